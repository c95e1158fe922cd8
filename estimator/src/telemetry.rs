//! The estimator's own metrics, served on `/metrics` by [`crate::http`].

use greenpipe_common::names::{estimator as n, label};
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    Opts, Registry, TextEncoder,
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
    /// Node estimates skipped, by reason.
    pub nodes_skipped: IntCounterVec,
    /// Node estimates in the last tick.
    pub nodes_estimated: IntGauge,
    /// Loaded models.
    pub models_loaded: GaugeVec,
}

impl Telemetry {
    /// Creates and registers every metric.
    pub fn new() -> Telemetry {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let gauge = |name: &str, help: &str| {
            let g = Gauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let nodes_estimated = IntGauge::new(
            n::NODES_ESTIMATED,
            "Node estimates written by the last tick.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(nodes_estimated.clone()))
            .expect("unique metric");
        let query_duration = HistogramVec::new(
            HistogramOpts::new(n::QUERY_DURATION_SECONDS, "PromQL request wall time.").buckets(
                vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            ),
            &[label::QUERY],
        )
        .expect("valid metric");
        registry
            .register(Box::new(query_duration.clone()))
            .expect("unique metric");
        let models_loaded = GaugeVec::new(
            Opts::new(
                n::MODELS_LOADED,
                "1 for every model loaded from the model file.",
            ),
            &[label::MODEL],
        )
        .expect("valid metric");
        registry
            .register(Box::new(models_loaded.clone()))
            .expect("unique metric");
        Telemetry {
            ticks: counter(n::TICKS_TOTAL, "Ticks estimated and written."),
            ticks_backfilled: counter(
                n::TICKS_BACKFILLED_TOTAL,
                "Ticks estimated while catching up after an outage.",
            ),
            ticks_abandoned: counter(
                n::TICKS_ABANDONED_TOTAL,
                "Ticks older than --backfill.max-age, given up.",
            ),
            lag_seconds: gauge(
                n::LAG_SECONDS,
                "Seconds between now and the last tick written.",
            ),
            last_tick: gauge(
                n::LAST_TICK_TIMESTAMP_SECONDS,
                "Unix time of the last tick written.",
            ),
            queries: counter_vec(
                n::QUERIES_TOTAL,
                "PromQL requests by query and outcome (ok, http_<status>, timeout, network_error, partial, error).",
                &[label::QUERY, label::OUTCOME],
            ),
            query_warnings: counter_vec(
                n::QUERY_WARNINGS_TOTAL,
                "Warnings attached to successful PromQL answers, by query.",
                &[label::QUERY],
            ),
            query_duration,
            samples_written: counter(
                n::SAMPLES_WRITTEN_TOTAL,
                "Samples accepted by the remote-write receiver.",
            ),
            samples_retried: counter(
                n::SAMPLES_RETRIED_TOTAL,
                "Samples sent again after a retryable failure.",
            ),
            samples_dropped: counter_vec(
                n::SAMPLES_DROPPED_TOTAL,
                "Samples given up, by reason.",
                &[label::REASON],
            ),
            remote_write_requests: counter_vec(
                n::REMOTE_WRITE_REQUESTS_TOTAL,
                "Remote-write requests by HTTP status or network_error.",
                &[label::OUTCOME],
            ),
            nodes_skipped: counter_vec(
                n::NODES_SKIPPED_TOTAL,
                "Node estimates skipped, by reason.",
                &[label::REASON],
            ),
            nodes_estimated,
            models_loaded,
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
