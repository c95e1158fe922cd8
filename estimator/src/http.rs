//! The estimator's own HTTP endpoints: `/metrics` (self metrics) and `/healthz`. A function
//! builds the router so tests can call it without a socket.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

use crate::telemetry::Telemetry;

/// The exposition format's content type.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Builds the router.
pub fn app(telemetry: Arc<Telemetry>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/",
            get(|| async {
                Html(
                    "<html><head><title>GreenPipe estimator</title></head><body>\
                     <h1>GreenPipe estimator</h1><p><a href=\"/metrics\">Metrics</a></p>\
                     </body></html>",
                )
            }),
        )
        .with_state(telemetry)
}

async fn metrics(State(telemetry): State<Arc<Telemetry>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], telemetry.encode())
}
