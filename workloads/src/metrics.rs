//! `/metrics` of every subcommand: work done and latency, with the configuration as labels, so
//! that energy per inference (or per operation) is container energy over these counters.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use greenpipe_common::registry::{register, register_with};
use prometheus::{
    exponential_buckets, Encoder, HistogramVec, IntCounterVec, IntGaugeVec, Registry, TextEncoder,
};

/// The families, declared in the contract (`greenpipe_common::contract::workload`).
pub use greenpipe_common::contract::workload as families;

/// The inference configuration a series carries.
#[derive(Debug, Clone)]
pub struct InferenceLabels {
    pub workload: &'static str,
    pub model: String,
    pub precision: String,
    pub engine: &'static str,
    pub threads: String,
    pub mode: &'static str,
}

impl InferenceLabels {
    fn values(&self) -> [&str; 6] {
        [
            self.workload,
            &self.model,
            &self.precision,
            self.engine,
            &self.threads,
            self.mode,
        ]
    }
}

/// All series of one process.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub registry: Registry,
    inferences: IntCounterVec,
    duration: HistogramVec,
    operations: IntCounterVec,
    errors: IntCounterVec,
    running: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let r = &registry;
        let inferences = register(r, &families::INFERENCES_TOTAL);
        // 1 ms to ~33 s: a MobileNetV2 on a Pi 4 to a ResNet-50 in f16 emulation.
        let d = &families::INFERENCE_DURATION_SECONDS;
        let buckets = exponential_buckets(0.001, 2.0, 16).expect("valid buckets");
        let duration = register_with(r, d, d.labels, Some(&buckets));
        let operations = register(r, &families::OPERATIONS_TOTAL);
        let errors = register(r, &families::REQUEST_ERRORS_TOTAL);
        let running = register(r, &families::RUNNING);
        Metrics {
            registry,
            inferences,
            duration,
            operations,
            errors,
            running,
        }
    }

    /// One inference call of `images` images that took `seconds`.
    pub fn observe_inference(&self, labels: &InferenceLabels, images: u64, seconds: f64) {
        let v = labels.values();
        self.inferences.with_label_values(&v).inc_by(images);
        self.duration.with_label_values(&v).observe(seconds);
    }

    /// Makes the series exist at 0 before the first inference (rate() needs the zero).
    pub fn touch_inference(&self, labels: &InferenceLabels) {
        let v = labels.values();
        self.inferences.with_label_values(&v);
        self.duration.with_label_values(&v);
    }

    pub fn add_operations(&self, workload: &str, group: &str, unit: &str, n: u64) {
        self.operations
            .with_label_values(&[workload, group, unit])
            .inc_by(n);
    }

    pub fn error(&self, workload: &str, code: &str) {
        self.errors.with_label_values(&[workload, code]).inc();
    }

    pub fn set_running(&self, workload: &str, group: &str, on: bool) {
        self.running
            .with_label_values(&[workload, group])
            .set(on as i64);
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding into memory cannot fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The router: `/metrics`, `/healthz`, and a landing page.
pub fn app(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                        m.render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/",
            get(|| async {
                Html(
                    "<html><head><title>GreenPipe workload</title></head><body>\
                     <h1>GreenPipe workload</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>",
                )
                .into_response()
            }),
        )
}

/// The `/metrics` listener could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("--web.listen-address {addr}")]
pub struct ListenError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// Binds `addr` and serves [`app`] in the background; returns the bound address.
pub async fn serve(metrics: Arc<Metrics>, addr: SocketAddr) -> Result<SocketAddr, ListenError> {
    let listen_error = |source| ListenError { addr, source };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app(metrics)).await {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    Ok(bound)
}
