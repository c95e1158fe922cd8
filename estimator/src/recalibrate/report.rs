//! What a refit attempt reports: a log line with its scores, a JSON line on stdout (one per
//! attempt, for CronJob logs and tests), and the self metrics of `recalibrate`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use greenpipe_common::contract::outcome;
use greenpipe_common::contract::recalibrate as c;
use greenpipe_common::model::NodeModel;
use greenpipe_common::names::label;
use greenpipe_common::registry::{register, register_with};
use prometheus::{GaugeVec, Histogram, IntCounterVec, Registry};
use serde::Serialize;

use super::correction::Affine;

/// The end of a refit attempt.
#[derive(Debug)]
pub enum Outcome {
    /// Better on the held-out slice, not worse on validation: the new version.
    Accepted(Box<NodeModel>),
    /// Judged and refused, with why.
    Rejected(String),
    /// Could not be judged (no data, Prometheus down, unwritable output).
    Failed(String),
}

/// One refit attempt.
#[derive(Debug, Clone, Serialize)]
pub struct RefitReport {
    /// Model name.
    pub model: String,
    /// Versioned label of the model refitted.
    pub model_label: String,
    /// Version refitted.
    pub version: u32,
    /// Node whose meter supplied the data.
    pub node: String,
    /// Live MAPE (ratio) that triggered the refit.
    pub live_mape_ratio: f64,
    /// Unix seconds, start of the window.
    pub window_from: f64,
    /// Unix seconds, end of the window.
    pub window_to: f64,
    /// Rows fitted on.
    pub fit_samples: u64,
    /// Rows judged on.
    pub held_out_samples: u64,
    /// Scores before and after (percent).
    pub scores: BTreeMap<String, f64>,
    /// `accepted`, `rejected` or `failed`.
    pub outcome: &'static str,
    /// Why it was rejected or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The new version's label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_label: Option<String>,
    /// The file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<PathBuf>,
    /// Correction offset, watts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_watts: Option<f64>,
    /// Correction gain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gain: Option<f64>,
    /// Correction shape chosen (`dynamic_gain`, `offset`, `affine`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<&'static str>,
    /// CPU time of fitting and scoring, seconds.
    pub cpu_seconds: f64,
    /// The fitted correction.
    #[serde(skip)]
    pub correction: Option<Affine>,
}

impl RefitReport {
    /// An attempt on `model` with data of `node` over `from..to`.
    pub fn new(model: &NodeModel, node: &str, live: f64, from: f64, to: f64) -> RefitReport {
        RefitReport {
            model: model.name.clone(),
            model_label: model.label(),
            version: model.version(),
            node: node.to_string(),
            live_mape_ratio: live,
            window_from: from,
            window_to: to,
            fit_samples: 0,
            held_out_samples: 0,
            scores: BTreeMap::new(),
            outcome: outcome::FAILED,
            reason: None,
            new_label: None,
            written: None,
            offset_watts: None,
            gain: None,
            shape: None,
            cpu_seconds: 0.0,
            correction: None,
        }
    }

    /// Records the outcome: log, stdout line, metrics.
    pub fn finish(&mut self, outcome: &Outcome, telemetry: &Telemetry) {
        self.offset_watts = self.correction.map(|c| c.offset_watts);
        self.gain = self.correction.map(|c| c.gain);
        let (name, reason) = match outcome {
            Outcome::Accepted(_) => (outcome::ACCEPTED, None),
            Outcome::Rejected(r) => (outcome::REJECTED, Some(r.clone())),
            Outcome::Failed(r) => (outcome::FAILED, Some(r.clone())),
        };
        self.outcome = name;
        self.reason = reason;
        telemetry
            .refits
            .with_label_values(&[&self.model, name])
            .inc();
        telemetry.refit_cpu.observe(self.cpu_seconds);
        let line = serde_json::to_string(self).expect("a report serialises");
        match outcome {
            Outcome::Accepted(_) => tracing::info!(
                model = %self.model_label,
                new = ?self.new_label,
                node = %self.node,
                scores = ?self.scores,
                "refit accepted"
            ),
            _ => tracing::warn!(
                model = %self.model_label,
                node = %self.node,
                outcome = name,
                reason = ?self.reason,
                scores = ?self.scores,
                "refit not accepted; the current version stays"
            ),
        }
        println!("{line}");
    }
}

/// Self metrics of `recalibrate`.
#[derive(Clone)]
pub struct Telemetry {
    registry: Registry,
    /// Live error per node and model.
    pub live_error: GaugeVec,
    /// Refits by model and outcome.
    pub refits: IntCounterVec,
    /// CPU time per refit.
    pub refit_cpu: Histogram,
    /// Checks by outcome.
    pub checks: IntCounterVec,
}

impl Telemetry {
    /// Creates and registers every metric.
    pub fn new() -> Telemetry {
        let registry = Registry::new();
        let r = &registry;
        // The live error carries the node whose meter it was measured against.
        let live_error = register_with(r, &c::LIVE_ERROR_RATIO, &[label::NODE, label::MODEL], None);
        let refits = register(r, &c::REFITS_TOTAL);
        let refit_cpu = register_with(
            r,
            &c::REFIT_CPU_SECONDS,
            &[],
            Some(&[0.001, 0.01, 0.1, 1.0, 10.0, 100.0]),
        );
        let checks = register(r, &c::CHECKS_TOTAL);
        Telemetry {
            registry,
            live_error,
            refits,
            refit_cpu,
            checks,
        }
    }

    fn encode(&self) -> String {
        let mut out = Vec::new();
        prometheus::Encoder::encode(
            &prometheus::TextEncoder::new(),
            &self.registry.gather(),
            &mut out,
        )
        .expect("text encoding into a Vec cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

/// `/metrics` and `/healthz`.
pub fn app(telemetry: Telemetry) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(t): State<Arc<Telemetry>>| async move {
                (
                    [(header::CONTENT_TYPE, crate::http::TEXT_FORMAT)],
                    t.encode(),
                )
                    .into_response()
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(Arc::new(telemetry))
}
