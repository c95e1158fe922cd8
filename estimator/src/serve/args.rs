//! Flags of `serve`, validated into a [`Config`]. Flag names follow Prometheus' style
//! (`--web.listen-address`, `--remote-write.*`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use greenpipe_common::listen::parse_listen_address;

use super::pipeline::PipelineConfig;
use crate::attribution::IdleSplit;
use crate::endpoint::{AuthFlags, Endpoint};
use crate::model_registry::ModelRegistry;
use crate::promql::Engine;
use crate::remote_write::{BatchLimits, RetryPolicy};
use crate::shard::Shard;

/// `greenpipe-estimator serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Prometheus to read the exporters' metrics from (server root, e.g. http://prometheus:9090).
    #[arg(long = "prometheus-url", env = "GREENPIPE_PROMETHEUS_URL")]
    pub prometheus_url: String,
    /// Basic-auth user towards Prometheus.
    #[arg(long = "prometheus.username")]
    pub prometheus_username: Option<String>,
    /// What serves --prometheus-url's query API; sets the --delay default and the request
    /// parameters that make it answer completely or fail (Thanos partial responses,
    /// VictoriaMetrics' cache).
    #[arg(long = "prometheus.engine", value_enum, default_value_t = Engine::Prometheus)]
    pub prometheus_engine: Engine,
    /// File holding the basic-auth password towards Prometheus.
    #[arg(long = "prometheus.password-file")]
    pub prometheus_password_file: Option<PathBuf>,
    /// File holding a bearer token for Prometheus (read again for every request).
    #[arg(long = "prometheus.bearer-token-file")]
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// PEM CA bundle to trust for Prometheus' TLS certificate (in addition to the system's).
    #[arg(long = "prometheus.ca-file")]
    pub prometheus_ca_file: Option<PathBuf>,

    /// Remote-write receiver (full URL, e.g. http://prometheus:9090/api/v1/write).
    #[arg(long = "remote-write-url", env = "GREENPIPE_REMOTE_WRITE_URL")]
    pub remote_write_url: String,
    /// Basic-auth user towards the receiver.
    #[arg(long = "remote-write.username")]
    pub remote_write_username: Option<String>,
    /// File holding the basic-auth password towards the receiver.
    #[arg(long = "remote-write.password-file")]
    pub remote_write_password_file: Option<PathBuf>,
    /// File holding a bearer token for the receiver (read again for every request).
    #[arg(long = "remote-write.bearer-token-file")]
    pub remote_write_bearer_token_file: Option<PathBuf>,
    /// PEM CA bundle to trust for the receiver's TLS certificate.
    #[arg(long = "remote-write.ca-file")]
    pub remote_write_ca_file: Option<PathBuf>,
    /// Largest number of samples in one remote-write request.
    #[arg(long = "remote-write.max-samples-per-request", default_value_t = 2000)]
    pub max_samples_per_request: usize,
    /// Largest uncompressed protobuf size of one remote-write request, bytes.
    #[arg(long = "remote-write.max-bytes-per-request", default_value_t = 1 << 20)]
    pub max_bytes_per_request: usize,
    /// First wait before retrying a failed remote write.
    #[arg(long = "remote-write.min-backoff", default_value = "100ms", value_parser = humantime::parse_duration)]
    pub min_backoff: Duration,
    /// Longest wait between retries of a failed remote write.
    #[arg(long = "remote-write.max-backoff", default_value = "10s", value_parser = humantime::parse_duration)]
    pub max_backoff: Duration,

    /// Query API where the estimator's own output can be read back, to resume after an outage
    /// [default: --prometheus-url, with its credentials]. Set it when the receiver is not that
    /// Prometheus (e.g. VictoriaMetrics: http://victoria-metrics:8428).
    #[arg(long = "progress-url")]
    pub progress_url: Option<String>,

    /// Model file written by `train`, or a directory of model files; may be repeated (all are
    /// merged; of models sharing a name the highest version wins) [default: the bundled
    /// uncalibrated profile]. Read again at a tick boundary when a file changes (also through a
    /// ConfigMap's `..data` symlink) and on SIGHUP; a file that does not load is refused and the
    /// models in force stay.
    #[arg(long)]
    pub models: Vec<PathBuf>,
    /// Time between ticks; tick times are multiples of it since the Unix epoch.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Window of `rate()` over the exporters' counters; at least two scrape intervals
    /// [default: 4 x --interval, at least 5s].
    #[arg(long = "rate-window", value_parser = humantime::parse_duration)]
    pub rate_window: Option<Duration>,
    /// How long after a tick it is evaluated, so the scrapes it needs are queryable
    /// [default: 2s; 5s for thanos and mimir; 32s for victoriametrics, whose
    /// -search.latencyOffset hides the newest 30s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub delay: Option<Duration>,
    /// This replica's share of the fleet, `i/n`: the nodes whose name Prometheus' `hashmod`
    /// maps to i. Each replica's queries select only those nodes.
    #[arg(long, default_value = "0/1")]
    pub shard: Shard,
    /// Label that a `hashmod` relabel rule over `node` (modulus n) sets on the source's series;
    /// the queries then select `<label>="i"`. Without it, a cheap node-list query finds the
    /// shard's nodes and the queries select them by name.
    #[arg(long = "shard.label")]
    pub shard_label: Option<String>,
    /// How idle power is split over containers.
    #[arg(long = "idle-split", value_enum, default_value_t = IdleSplit::Processes)]
    pub idle_split: IdleSplit,
    /// Oldest missed tick to backfill after an outage. Prometheus refuses remote-written samples
    /// more than about an hour older than its newest ones (out of bounds), so keep it at 1h there.
    #[arg(long = "backfill.max-age", default_value = "1h", value_parser = humantime::parse_duration)]
    pub backfill_max_age: Duration,
    /// Most ticks read by one range query while catching up.
    #[arg(long = "backfill.max-ticks-per-query", default_value_t = 60)]
    pub backfill_max_ticks: usize,
    /// Ticks read together by one range query and written together (one sample per tick in each
    /// series): N amortises each query's fixed cost, the decoding of every series' labels and
    /// the encoding of the written labels over N ticks, at the price of N-1 ticks of extra lag.
    #[arg(long = "read.ticks-per-query", default_value_t = 1)]
    pub read_ticks: usize,
    /// Timeout of one HTTP request.
    #[arg(long = "http.timeout", default_value = "30s", value_parser = humantime::parse_duration)]
    pub http_timeout: Duration,
    /// Address of the self-metrics endpoint.
    #[arg(long = "web.listen-address", default_value = ":9911")]
    pub listen_address: String,
    /// exporter-toolkit web config for the self-metrics endpoint (TLS, client certificates, basic
    /// auth; YAML).
    #[arg(long = "web.config.file")]
    pub web_config_file: Option<PathBuf>,
}

/// Validated configuration.
#[derive(Debug)]
pub struct Config {
    /// Self-metrics address.
    pub listen: SocketAddr,
    /// `--web.config.file`, loaded and checked.
    pub web: Option<std::sync::Arc<greenpipe_web::WebConfig>>,
    /// Everything the loop needs.
    pub pipeline: PipelineConfig,
}

impl ServeArgs {
    /// Checks the flags, loads the model file and builds the HTTP clients.
    pub fn into_config(self) -> anyhow::Result<Config> {
        let rate_window = self
            .rate_window
            .unwrap_or_else(|| (self.interval * 4).max(Duration::from_secs(5)));
        let delay = self
            .delay
            .unwrap_or_else(|| self.prometheus_engine.default_delay());
        if let Some(name) = &self.shard_label {
            anyhow::ensure!(
                is_label_name(name),
                "--shard.label {name:?} is not a label name"
            );
        }
        anyhow::ensure!(
            self.interval >= Duration::from_millis(10),
            "--interval {:?} is too short",
            self.interval
        );
        anyhow::ensure!(
            self.interval.as_millis() as u64 as f64 * 1e-3 == self.interval.as_secs_f64(),
            "--interval must be a whole number of milliseconds"
        );
        anyhow::ensure!(
            rate_window >= self.interval,
            "--rate-window {rate_window:?} is shorter than --interval"
        );
        anyhow::ensure!(
            self.backfill_max_ticks >= 1,
            "--backfill.max-ticks-per-query must be >= 1"
        );
        anyhow::ensure!(
            (1..=self.backfill_max_ticks).contains(&self.read_ticks),
            "--read.ticks-per-query must be between 1 and --backfill.max-ticks-per-query"
        );
        anyhow::ensure!(
            self.max_samples_per_request >= 1,
            "--remote-write.max-samples-per-request must be >= 1"
        );
        let prometheus_auth = AuthFlags {
            username: self.prometheus_username,
            password_file: self.prometheus_password_file,
            bearer_token_file: self.prometheus_bearer_token_file,
            ca_file: self.prometheus_ca_file,
        };
        let prometheus = Endpoint::new(
            "prometheus",
            &self.prometheus_url,
            &prometheus_auth,
            self.http_timeout,
        )?;
        let progress = match &self.progress_url {
            Some(url) => Endpoint::new("progress-url", url, &prometheus_auth, self.http_timeout)?,
            None => prometheus.clone(),
        };
        let remote_write = Endpoint::new(
            "remote-write",
            &self.remote_write_url,
            &AuthFlags {
                username: self.remote_write_username,
                password_file: self.remote_write_password_file,
                bearer_token_file: self.remote_write_bearer_token_file,
                ca_file: self.remote_write_ca_file,
            },
            self.http_timeout,
        )?;
        let models = ModelRegistry::open(&self.models)?;
        Ok(Config {
            listen: parse_listen_address(&self.listen_address)?,
            web: greenpipe_web::load(self.web_config_file.as_deref())?,
            pipeline: PipelineConfig {
                prometheus,
                progress,
                remote_write,
                models,
                interval: self.interval,
                rate_window,
                delay,
                shard: self.shard,
                shard_label: self.shard_label,
                engine: self.prometheus_engine,
                http_timeout: self.http_timeout,
                idle_split: self.idle_split,
                backfill_max_age: self.backfill_max_age,
                backfill_max_ticks: self.backfill_max_ticks,
                read_ticks: self.read_ticks,
                batch: BatchLimits {
                    max_samples: self.max_samples_per_request,
                    max_bytes: self.max_bytes_per_request,
                },
                retry: RetryPolicy {
                    min_backoff: self.min_backoff,
                    max_backoff: self.max_backoff.max(self.min_backoff),
                },
            },
        })
    }
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, Prometheus' label-name syntax.
fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
