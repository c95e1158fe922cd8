//! The estimator's own metrics, served on `/metrics` by [`crate::http`].

use greenpipe_common::contract::estimator as c;
use greenpipe_common::registry::{register, register_with};
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramVec, IntCounter, IntCounterVec, IntGauge, Registry,
    TextEncoder,
};

/// Every self metric, registered in one registry.
#[derive(Clone)]
pub struct Telemetry {
    registry: Registry,
    /// Ticks written.
    pub ticks: IntCounter,
    /// Ticks written while catching up.
    pub ticks_backfilled: IntCounter,
    /// Ticks older than the backfill horizon, given up.
    pub ticks_abandoned: IntCounter,
    /// Now minus the last tick written.
    pub lag_seconds: Gauge,
    /// Unix time of the last tick written.
    pub last_tick: Gauge,
    /// PromQL requests by query and outcome.
    pub queries: IntCounterVec,
    /// Warnings in successful PromQL answers, by query.
    pub query_warnings: IntCounterVec,
    /// PromQL request durations by query.
    pub query_duration: HistogramVec,
    /// Samples accepted by the receiver.
    pub samples_written: IntCounter,
    /// Samples re-sent after a retryable failure.
    pub samples_retried: IntCounter,
    /// Samples given up, by reason.
    pub samples_dropped: IntCounterVec,
    /// Remote-write requests by outcome.
    pub remote_write_requests: IntCounterVec,
    /// OTLP export requests by outcome.
    pub otlp_requests: IntCounterVec,
    /// OTLP data points accepted.
    pub otlp_points_written: IntCounter,
    /// OTLP data points given up, by reason.
    pub otlp_points_dropped: IntCounterVec,
    /// Node estimates skipped, by reason.
    pub nodes_skipped: IntCounterVec,
    /// Node estimates in the last tick.
    pub nodes_estimated: IntGauge,
    /// Loaded models.
    pub models_loaded: GaugeVec,
    /// Model sets read again, by outcome.
    pub model_reloads: IntCounterVec,
    /// Whether the last model files read were loaded.
    pub model_reload_success: IntGauge,
}

impl Telemetry {
    /// Creates and registers every metric.
    pub fn new() -> Telemetry {
        let registry = Registry::new();
        let r = &registry;
        let model_reloads: IntCounterVec = register(r, &c::MODEL_RELOADS_TOTAL);
        // Both outcomes exist from the start, so increase() over them is 0 rather than empty
        // until the first reload.
        for outcome in greenpipe_common::contract::outcome::MODEL_RELOAD {
            model_reloads.with_label_values(&[outcome]);
        }
        Telemetry {
            model_reloads,
            model_reload_success: register(r, &c::MODEL_RELOAD_SUCCESS),
            ticks: register(r, &c::TICKS_TOTAL),
            ticks_backfilled: register(r, &c::TICKS_BACKFILLED_TOTAL),
            ticks_abandoned: register(r, &c::TICKS_ABANDONED_TOTAL),
            lag_seconds: register(r, &c::LAG_SECONDS),
            last_tick: register(r, &c::LAST_TICK_TIMESTAMP_SECONDS),
            queries: register(r, &c::QUERIES_TOTAL),
            query_warnings: register(r, &c::QUERY_WARNINGS_TOTAL),
            query_duration: register_with(
                r,
                &c::QUERY_DURATION_SECONDS,
                c::QUERY_DURATION_SECONDS.labels,
                Some(&[
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ]),
            ),
            samples_written: register(r, &c::SAMPLES_WRITTEN_TOTAL),
            samples_retried: register(r, &c::SAMPLES_RETRIED_TOTAL),
            samples_dropped: register(r, &c::SAMPLES_DROPPED_TOTAL),
            remote_write_requests: register(r, &c::REMOTE_WRITE_REQUESTS_TOTAL),
            otlp_requests: register(r, &c::OTLP_REQUESTS_TOTAL),
            otlp_points_written: register(r, &c::OTLP_POINTS_WRITTEN_TOTAL),
            otlp_points_dropped: register(r, &c::OTLP_POINTS_DROPPED_TOTAL),
            nodes_skipped: register(r, &c::NODES_SKIPPED_TOTAL),
            nodes_estimated: register(r, &c::NODES_ESTIMATED),
            models_loaded: register(r, &c::MODELS_LOADED),
            registry,
        }
    }

    /// The exposition text of every metric.
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding into a Vec cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod contract_tests {
    use super::*;

    /// Every family on the estimator's `/metrics` is declared in `common::contract`, with the
    /// declared help and type.
    #[test]
    fn every_family_matches_its_declaration() {
        let t = Telemetry::new();
        // A vec family is encoded only once it has a series.
        t.queries.with_label_values(&["q", "ok"]).inc();
        t.query_warnings.with_label_values(&["q"]).inc();
        t.query_duration.with_label_values(&["q"]).observe(0.1);
        t.samples_dropped.with_label_values(&["http_400"]).inc();
        t.remote_write_requests.with_label_values(&["200"]).inc();
        t.nodes_skipped.with_label_values(&["no_model"]).inc();
        t.models_loaded.with_label_values(&["m"]).set(1.0);
        t.model_reloads.with_label_values(&["applied"]).inc();
        t.otlp_requests.with_label_values(&["200"]).inc();
        t.otlp_points_dropped.with_label_values(&["http_400"]).inc();
        let text = t.encode();
        let mut seen = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap();
                let f = greenpipe_common::contract::family(name)
                    .unwrap_or_else(|| panic!("{name} is not declared"));
                assert_eq!(help, f.help, "{name}");
                seen += 1;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let f = greenpipe_common::contract::family(name).unwrap();
                assert_eq!(kind, f.kind.as_str(), "{name}");
            }
        }
        // Every family of the estimator's own /metrics (contract::estimator) was seen.
        assert_eq!(seen, c::ALL.len(), "{text}");
    }
}
