//! Flags of `serve`, validated into a [`Config`]. Flag names follow Prometheus' style
//! (`--web.listen-address`, `--remote-write.*`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use greenpipe_common::listen::parse_listen_address;

use super::pipeline::PipelineConfig;
use crate::attribution::IdleSplit;
use crate::endpoint::{AuthFlags, Endpoint};
use crate::estimate::{NodePower, Policy};
use crate::model_registry::ModelRegistry;
use crate::promql::Engine;
use crate::remote_write::{BatchLimits, Protocol, RetryPolicy};
use crate::shard::Shard;
use crate::USER_AGENT;
pub use greenpipe_remote_write::client::HeaderArg;

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
    /// Extra header on every query, NAME=VALUE (repeatable), e.g. X-Scope-OrgID=tenant-a for
    /// Mimir or THANOS-TENANT=tenant-a. Also sent to --progress-url. Values are never logged;
    /// put secret ones in --config.file rather than on the command line.
    #[arg(long = "prometheus.header", value_name = "NAME=VALUE")]
    pub prometheus_header: Vec<HeaderArg>,

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
    /// Extra header on every remote-write request, NAME=VALUE (repeatable), e.g.
    /// X-Scope-OrgID=tenant-a. Values are never logged.
    #[arg(long = "remote-write.header", value_name = "NAME=VALUE")]
    pub remote_write_header: Vec<HeaderArg>,
    /// Remote-write message: 1.0 (prometheus.WriteRequest) or 2.0 (io.prometheus.write.v2.Request,
    /// with each series' type, help and unit). A 2.0 sender falls back to 1.0 when the receiver
    /// answers 415, or 2xx without the written-samples header.
    #[arg(long = "remote-write.protocol", value_enum, default_value_t = Protocol::V1)]
    pub remote_write_protocol: Protocol,
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

    /// OTLP/HTTP metrics receiver (full URL, e.g.
    /// http://collector:4318/v1/metrics, or Prometheus 3's
    /// http://prometheus:9090/api/v1/otlp/v1/metrics): the node and container power and energy
    /// are also sent there, as OpenTelemetry's hw.host.power, hw.host.energy, hw.power and
    /// hw.energy. Remote write stays the record the estimator resumes from.
    #[arg(long = "otlp.endpoint")]
    pub otlp_endpoint: Option<String>,
    /// Basic-auth user towards the OTLP receiver.
    #[arg(long = "otlp.username")]
    pub otlp_username: Option<String>,
    /// File holding the basic-auth password towards the OTLP receiver.
    #[arg(long = "otlp.password-file")]
    pub otlp_password_file: Option<PathBuf>,
    /// File holding a bearer token for the OTLP receiver (read again for every request).
    #[arg(long = "otlp.bearer-token-file")]
    pub otlp_bearer_token_file: Option<PathBuf>,
    /// PEM CA bundle to trust for the OTLP receiver's TLS certificate.
    #[arg(long = "otlp.ca-file")]
    pub otlp_ca_file: Option<PathBuf>,
    /// Extra header on every OTLP request, NAME=VALUE (repeatable). Values are never logged.
    #[arg(long = "otlp.header", value_name = "NAME=VALUE")]
    pub otlp_header: Vec<HeaderArg>,

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
    /// The power a node reports: `predicted` (the model's, everywhere), or `measured` (on a
    /// node with a whole-node meter, e.g. a USB meter or a Jetson's module rail, its reading,
    /// split over containers by the model; nvml meters read a GPU only and do not count).
    #[arg(long = "node-power", value_enum, default_value_t = NodePower::Predicted)]
    pub node_power: NodePower,
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
    /// TOML file with the settings that may be secret or per tenant: `[prometheus] header`,
    /// `[remote_write] header` and `[otlp] header` (tables NAME = "VALUE", added to the flags'). Unknown keys are
    /// errors.
    #[arg(long = "config.file")]
    pub config_file: Option<PathBuf>,
}

/// `--config.file`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[prometheus]`: the query API (and --progress-url).
    #[serde(default)]
    pub prometheus: EndpointFile,
    /// `[remote_write]`: the receiver.
    #[serde(default)]
    pub remote_write: EndpointFile,
    /// `[otlp]`: the OTLP receiver.
    #[serde(default)]
    pub otlp: EndpointFile,
}

/// `[prometheus]`, `[remote_write]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointFile {
    /// `header`: NAME = "VALUE".
    #[serde(default)]
    pub header: BTreeMap<String, String>,
}

impl std::fmt::Debug for EndpointFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointFile")
            .field("header", &self.header.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl FileConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::ParseFile {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The flags' headers, then the file's, as `NAME=VALUE`.
fn header_args(flags: &[HeaderArg], file: &EndpointFile) -> Vec<String> {
    flags
        .iter()
        .map(|h| h.as_str().to_string())
        .chain(file.header.iter().map(|(n, v)| format!("{n}={v}")))
        .collect()
}

/// Why `serve`'s flags or `--config.file` were refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag's value is out of range or contradicts another flag.
    #[error("{0}")]
    Flag(String),
    /// `--config.file` could not be read.
    #[error("reading --config.file {}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// `--config.file` is not valid TOML or has unknown keys.
    #[error("--config.file {}", path.display())]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// toml's error (it names the key).
        source: toml::de::Error,
    },
    /// An endpoint's URL, auth or header flags.
    #[error(transparent)]
    Endpoint(#[from] crate::endpoint::EndpointError),
    /// The model files.
    #[error(transparent)]
    Models(#[from] crate::model_registry::RegistryError),
    /// `--web.listen-address`.
    #[error(transparent)]
    Listen(#[from] greenpipe_common::listen::ListenAddressError),
    /// `--web.config.file`.
    #[error(transparent)]
    Web(#[from] greenpipe_web::LoadError),
}

/// Refuses with `message` unless `ok`.
fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Flag(message()))
    }
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
    pub fn into_config(self) -> Result<Config, ConfigError> {
        let rate_window = self
            .rate_window
            .unwrap_or_else(|| (self.interval * 4).max(Duration::from_secs(5)));
        let delay = self
            .delay
            .unwrap_or_else(|| self.prometheus_engine.default_delay());
        if let Some(name) = &self.shard_label {
            ensure(is_label_name(name), || {
                format!("--shard.label {name:?} is not a label name")
            })?;
        }
        ensure(self.interval >= Duration::from_millis(10), || {
            format!("--interval {:?} is too short", self.interval)
        })?;
        ensure(
            self.interval.as_millis() as u64 as f64 * 1e-3 == self.interval.as_secs_f64(),
            || "--interval must be a whole number of milliseconds".to_string(),
        )?;
        ensure(rate_window >= self.interval, || {
            format!("--rate-window {rate_window:?} is shorter than --interval")
        })?;
        ensure(self.backfill_max_ticks >= 1, || {
            "--backfill.max-ticks-per-query must be >= 1".to_string()
        })?;
        ensure(
            (1..=self.backfill_max_ticks).contains(&self.read_ticks),
            || {
                "--read.ticks-per-query must be between 1 and --backfill.max-ticks-per-query"
                    .to_string()
            },
        )?;
        ensure(self.max_samples_per_request >= 1, || {
            "--remote-write.max-samples-per-request must be >= 1".to_string()
        })?;
        let file = match &self.config_file {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let prometheus_auth = AuthFlags {
            username: self.prometheus_username,
            password_file: self.prometheus_password_file,
            bearer_token_file: self.prometheus_bearer_token_file,
            ca_file: self.prometheus_ca_file,
            headers: header_args(&self.prometheus_header, &file.prometheus),
        };
        let prometheus = Endpoint::new(
            USER_AGENT,
            "prometheus",
            &self.prometheus_url,
            &prometheus_auth,
            self.http_timeout,
        )?;
        let progress = match &self.progress_url {
            Some(url) => Endpoint::new(
                USER_AGENT,
                "progress-url",
                url,
                &prometheus_auth,
                self.http_timeout,
            )?,
            None => prometheus.clone(),
        };
        let remote_write = Endpoint::new(
            USER_AGENT,
            "remote-write",
            &self.remote_write_url,
            &AuthFlags {
                username: self.remote_write_username,
                password_file: self.remote_write_password_file,
                bearer_token_file: self.remote_write_bearer_token_file,
                ca_file: self.remote_write_ca_file,
                headers: header_args(&self.remote_write_header, &file.remote_write),
            },
            self.http_timeout,
        )?;
        let otlp_headers = header_args(&self.otlp_header, &file.otlp);
        ensure(
            self.otlp_endpoint.is_some() || otlp_headers.is_empty(),
            || "OTLP headers are set but --otlp.endpoint is not".to_string(),
        )?;
        let otlp = match &self.otlp_endpoint {
            Some(url) => Some(Endpoint::new(
                USER_AGENT,
                "otlp",
                url,
                &AuthFlags {
                    username: self.otlp_username,
                    password_file: self.otlp_password_file,
                    bearer_token_file: self.otlp_bearer_token_file,
                    ca_file: self.otlp_ca_file,
                    headers: otlp_headers,
                },
                self.http_timeout,
            )?),
            None => None,
        };
        let models = ModelRegistry::open(&self.models)?;
        Ok(Config {
            listen: parse_listen_address(&self.listen_address)?,
            web: greenpipe_web::load(self.web_config_file.as_deref())?,
            pipeline: PipelineConfig {
                prometheus,
                progress,
                remote_write,
                otlp,
                models,
                interval: self.interval,
                rate_window,
                delay,
                shard: self.shard,
                shard_label: self.shard_label,
                engine: self.prometheus_engine,
                http_timeout: self.http_timeout,
                policy: Policy {
                    node_power: self.node_power,
                    idle_split: self.idle_split,
                },
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
                protocol: self.remote_write_protocol,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    const SECRET: &str = "s3cret-tenant-value";

    fn config(extra: &[&str]) -> anyhow::Result<Config> {
        let argv = [
            "serve",
            "--prometheus-url=http://127.0.0.1:9090",
            "--remote-write-url=http://127.0.0.1:9090/api/v1/write",
        ]
        .into_iter()
        .chain(extra.iter().copied());
        Ok(Cli::try_parse_from(argv)?.serve.into_config()?)
    }

    fn sent(endpoint: &Endpoint) -> Vec<(String, String, bool)> {
        let request = endpoint
            .authorise(endpoint.client.get(&endpoint.url))
            .unwrap()
            .build()
            .unwrap();
        request
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    v.to_str().unwrap().to_string(),
                    v.is_sensitive(),
                )
            })
            .collect()
    }

    #[test]
    fn headers_from_flags_and_file_are_sent_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("serve.toml");
        std::fs::write(
            &file,
            format!(
                "[prometheus.header]\n\"X-Api-Key\" = \"{SECRET}-file\"\n\
                 [remote_write]\nheader = {{ \"THANOS-TENANT\" = \"t=b\" }}\n"
            ),
        )
        .unwrap();
        let c = config(&[
            &format!("--prometheus.header=X-Scope-OrgID={SECRET}"),
            "--remote-write.header",
            "X-Scope-OrgID=tenant-b",
            &format!("--config.file={}", file.display()),
        ])
        .unwrap();
        let p = &c.pipeline;
        let h = |n: &str, v: &str| (n.to_string(), v.to_string(), true);
        assert_eq!(
            sent(&p.prometheus),
            [
                h("x-scope-orgid", SECRET),
                h("x-api-key", &format!("{SECRET}-file"))
            ]
        );
        // --progress-url defaults to --prometheus-url with its credentials and headers.
        assert_eq!(sent(&p.progress), sent(&p.prometheus));
        assert_eq!(
            sent(&p.remote_write),
            [
                h("x-scope-orgid", "tenant-b"),
                // The value may hold '=': only the first one separates.
                h("thanos-tenant", "t=b")
            ]
        );
        let shown = format!("{c:?}");
        assert!(shown.contains("x-scope-orgid"), "{shown}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("tenant-b"), "{shown}");
        let args = Cli::try_parse_from([
            "serve",
            "--prometheus-url=http://p",
            "--remote-write-url=http://p",
            &format!("--prometheus.header=X-Scope-OrgID={SECRET}"),
        ])
        .unwrap()
        .serve;
        let shown = format!("{args:?}");
        assert!(
            shown.contains("X-Scope-OrgID") && !shown.contains(SECRET),
            "{shown}"
        );
        let file = FileConfig::load(&file).unwrap();
        assert!(!format!("{file:?}").contains(SECRET));
    }

    #[test]
    fn bad_headers_are_refused_naming_the_flag_but_not_the_value() {
        for (arg, expected) in [
            (
                format!("--prometheus.header=X-Scope-OrgID{SECRET}"),
                "--prometheus.header: argument 1 has no '='",
            ),
            (
                format!("--remote-write.header=X Tenant={SECRET}"),
                "--remote-write.header: \"X Tenant\" is not a valid HTTP header name",
            ),
            (
                format!("--prometheus.header==={SECRET}"),
                "--prometheus.header: \"\" is not a valid HTTP header name",
            ),
            (
                format!("--prometheus.header=X-Key={SECRET}\n"),
                "--prometheus.header x-key: the value is not valid in HTTP",
            ),
            (
                "--remote-write.header=X-Scope-OrgID=".to_string(),
                "--remote-write.header x-scope-orgid: the value is empty",
            ),
            (
                format!("--remote-write.header=Authorization=Bearer {SECRET}"),
                "--remote-write.header authorization: set by the username/password-file or \
                 bearer-token-file flags",
            ),
            (
                format!("--remote-write.header=Content-Type={SECRET}"),
                "--remote-write.header content-type: set by the sender",
            ),
        ] {
            let err = config(&[arg.as_str()]).unwrap_err();
            let text = format!("{err:#}");
            assert!(text.starts_with(expected), "{arg:?}: {text}");
            assert!(!text.contains(SECRET), "{arg:?}: {text}");
        }
        let err = config(&[
            "--prometheus.header=X-Scope-OrgID=a",
            "--prometheus.header=x-scope-orgid=b",
        ])
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "--prometheus.header x-scope-orgid is given more than once"
        );
    }

    #[test]
    fn unknown_or_malformed_config_file_keys_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("serve.toml");
        for (text, expected) in [
            ("[prometheus]\nheaders = {}\n", "unknown field `headers`"),
            (
                "[remote-write.header]\nX = \"1\"\n",
                "unknown field `remote-write`",
            ),
            ("[prometheus.header]\nX = 1\n", "invalid type: integer"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = config(&[&format!("--config.file={}", file.display())]).unwrap_err();
            let text = format!("{err:#}");
            assert!(
                text.starts_with(&format!("--config.file {}", file.display()))
                    && text.contains(expected),
                "{text}"
            );
        }
        let err = config(&["--config.file=/nonexistent/serve.toml"]).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("reading --config.file /nonexistent/serve.toml"),
            "{err:#}"
        );
    }
}
