//! HTTP: `/metrics` (or the configured path) serves the last published sample; `/healthz`
//! answers once the first sample exists. A function builds the router so tests can call it
//! without a socket.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::sampler::Shared;

/// The exposition format's content type.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Builds the router.
pub fn app(shared: Shared, telemetry_path: &str) -> Router {
    let landing = format!(
        "<html><head><title>GreenPipe exporter</title></head><body><h1>GreenPipe exporter</h1>\
         <p><a href=\"{telemetry_path}\">Metrics</a></p></body></html>"
    );
    Router::new()
        .route(telemetry_path, get(metrics))
        .route("/healthz", get(healthz))
        .route("/", get(move || async move { Html(landing) }))
        .with_state(shared)
}

async fn metrics(State(shared): State<Shared>) -> Response {
    let published = shared.read().unwrap_or_else(|e| e.into_inner()).clone();
    if published.cycles == 0 {
        return (StatusCode::SERVICE_UNAVAILABLE, "no sample collected yet\n").into_response();
    }
    (
        [(header::CONTENT_TYPE, TEXT_FORMAT)],
        published.text.as_ref().clone(),
    )
        .into_response()
}

async fn healthz(State(shared): State<Shared>) -> Response {
    let cycles = shared.read().unwrap_or_else(|e| e.into_inner()).cycles;
    if cycles == 0 {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response()
    } else {
        (StatusCode::OK, "ok\n").into_response()
    }
}
