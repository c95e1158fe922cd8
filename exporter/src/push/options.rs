//! The push options: `--push.*` flags and the file's `[push]` section, resolved into
//! [`PushConfig`]. The receiver's flags mirror the estimator's `--remote-write.*` (URL, basic
//! auth, bearer token file, CA file, extra headers, backoff) and are validated by the same
//! [`Endpoint`], so a header, token or certificate is refused in the same words by both.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use greenpipe_remote_write::client::{AuthFlags, Endpoint, EndpointError, HeaderArg, RetryPolicy};
use serde::Deserialize;

/// Default `--push.buffer.max-bytes`: an hour of a busy node's samples fits (docs/benchmarks.md).
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// Default `--push.buffer.dir`.
pub const DEFAULT_DIR: &str = "/var/lib/greenpipe-exporter/push";
/// Default `--push.job`: the job name the deployed Prometheus scrapes the exporter as.
pub const DEFAULT_JOB: &str = "greenpipe-exporter";

/// What the exporter's requests say they come from.
const USER_AGENT: &str = concat!("greenpipe-exporter/", env!("CARGO_PKG_VERSION"));

/// `--push.*` as given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PushFlags {
    /// Push every sample by Prometheus remote write 1.0 to this URL (e.g.
    /// http://prometheus:9090/api/v1/write) besides serving /metrics [default: off].
    #[arg(
        id = "push.remote-write-url",
        long = "push.remote-write-url",
        value_name = "URL"
    )]
    pub url: Option<String>,
    /// How often buffered samples are written to disk and sent, a whole number of collection
    /// intervals [default: --collection.interval].
    #[arg(id = "push.interval", long = "push.interval", value_name = "DURATION")]
    pub interval: Option<String>,
    /// Basic-auth user towards the receiver.
    #[arg(id = "push.username", long = "push.username", value_name = "USER")]
    pub username: Option<String>,
    /// File holding the basic-auth password towards the receiver.
    #[arg(
        id = "push.password-file",
        long = "push.password-file",
        value_name = "FILE"
    )]
    pub password_file: Option<PathBuf>,
    /// File holding a bearer token for the receiver (read again for every request).
    #[arg(
        id = "push.bearer-token-file",
        long = "push.bearer-token-file",
        value_name = "FILE"
    )]
    pub bearer_token_file: Option<PathBuf>,
    /// PEM CA bundle to trust for the receiver's TLS certificate (besides the system's).
    #[arg(id = "push.ca-file", long = "push.ca-file", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Extra header on every push request, NAME=VALUE (repeatable), e.g. X-Scope-OrgID=tenant-a.
    /// Values are never logged; put secret ones in --config.file.
    #[arg(id = "push.header", long = "push.header", value_name = "NAME=VALUE")]
    pub header: Vec<HeaderArg>,
    /// Longest wait for one push request [default: 10s].
    #[arg(id = "push.timeout", long = "push.timeout", value_name = "DURATION")]
    pub timeout: Option<String>,
    /// First wait before retrying a failed push [default: 100ms].
    #[arg(
        id = "push.min-backoff",
        long = "push.min-backoff",
        value_name = "DURATION"
    )]
    pub min_backoff: Option<String>,
    /// Longest wait between retries of a failed push [default: 10s].
    #[arg(
        id = "push.max-backoff",
        long = "push.max-backoff",
        value_name = "DURATION"
    )]
    pub max_backoff: Option<String>,
    /// Directory of the on-disk buffer: samples not yet acknowledged by the receiver, resent
    /// after a restart [default: /var/lib/greenpipe-exporter/push].
    #[arg(id = "push.buffer.dir", long = "push.buffer.dir", value_name = "DIR")]
    pub buffer_dir: Option<PathBuf>,
    /// Samples older than this are dropped from the buffer (and counted) [default: 1h].
    #[arg(
        id = "push.buffer.max-age",
        long = "push.buffer.max-age",
        value_name = "DURATION"
    )]
    pub buffer_max_age: Option<String>,
    /// Largest size of the buffer, bytes (suffixes KiB, MiB, GiB) [default: 256MiB]; past it the
    /// oldest samples are dropped (and counted).
    #[arg(
        id = "push.buffer.max-bytes",
        long = "push.buffer.max-bytes",
        value_name = "BYTES"
    )]
    pub buffer_max_bytes: Option<String>,
    /// Value of the `job` label on pushed series, as a scrape would set it
    /// [default: greenpipe-exporter].
    #[arg(id = "push.job", long = "push.job", value_name = "JOB")]
    pub job: Option<String>,
    /// Value of the `instance` label on pushed series [default: the node name].
    #[arg(id = "push.instance", long = "push.instance", value_name = "INSTANCE")]
    pub instance: Option<String>,
}

/// `[push]` of the config file; keys as the flags without `push.`, dashes as underscores.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushFile {
    /// `remote_write_url`.
    pub remote_write_url: Option<String>,
    /// `interval`.
    pub interval: Option<String>,
    /// `username`.
    pub username: Option<String>,
    /// `password_file`.
    pub password_file: Option<PathBuf>,
    /// `bearer_token_file`.
    pub bearer_token_file: Option<PathBuf>,
    /// `ca_file`.
    pub ca_file: Option<PathBuf>,
    /// `header`: NAME = "VALUE", added after the flags' headers.
    #[serde(default)]
    pub header: BTreeMap<String, String>,
    /// `timeout`.
    pub timeout: Option<String>,
    /// `min_backoff`.
    pub min_backoff: Option<String>,
    /// `max_backoff`.
    pub max_backoff: Option<String>,
    /// `job`.
    pub job: Option<String>,
    /// `instance`.
    pub instance: Option<String>,
    /// `[push.buffer]`.
    #[serde(default)]
    pub buffer: BufferFile,
}

impl std::fmt::Debug for PushFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values may be credentials.
        f.debug_struct("PushFile")
            .field("remote_write_url", &self.remote_write_url)
            .field("header", &self.header.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// `[push.buffer]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferFile {
    /// `dir`.
    pub dir: Option<PathBuf>,
    /// `max_age`.
    pub max_age: Option<String>,
    /// `max_bytes`: a number of bytes, or a string with a suffix (`"256MiB"`).
    pub max_bytes: Option<toml::Value>,
}

/// Where the buffer lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferLimits {
    /// The directory of segment files.
    pub dir: PathBuf,
    /// Samples older than this are dropped.
    pub max_age: Duration,
    /// Largest total size of the segment files.
    pub max_bytes: u64,
}

/// The validated push configuration.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// The receiver, its credentials and headers.
    pub endpoint: Endpoint,
    /// Collection ticks per request (`--push.interval` / `--collection.interval`).
    pub ticks_per_push: u32,
    /// Backoff between retries.
    pub retry: RetryPolicy,
    /// The on-disk buffer.
    pub buffer: BufferLimits,
    /// `job` label.
    pub job: String,
    /// `instance` label.
    pub instance: String,
}

/// Why the push options were refused; each names the flag (the file's key is the same name).
#[derive(Debug, thiserror::Error)]
pub enum PushOptionsError {
    /// A `--push.*` option without `--push.remote-write-url`.
    #[error("{0} is set but --push.remote-write-url is not")]
    WithoutUrl(&'static str),
    /// A duration that does not parse.
    #[error("{flag} {text:?}")]
    Duration {
        /// The flag.
        flag: &'static str,
        /// The text given.
        text: String,
        /// humantime's complaint.
        #[source]
        source: humantime::DurationError,
    },
    /// A value out of range.
    #[error("{flag}: {why} (got {text:?})")]
    Range {
        /// The flag.
        flag: &'static str,
        /// The value given.
        text: String,
        /// What it must be.
        why: &'static str,
    },
    /// The URL, credentials, CA or headers.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
}

impl PushConfig {
    /// Flags over the file; `None` when neither names a URL (push off). `interval` is the
    /// collection interval, `node` the node name (the default `instance`).
    pub fn resolve(
        flags: PushFlags,
        file: PushFile,
        interval: Duration,
        node: &str,
    ) -> Result<Option<PushConfig>, PushOptionsError> {
        let headers: Vec<String> = flags
            .header
            .iter()
            .map(|h| h.as_str().to_string())
            .chain(file.header.iter().map(|(n, v)| format!("{n}={v}")))
            .collect();
        let Some(url) = flags.url.or(file.remote_write_url) else {
            let given = [
                (
                    "--push.interval",
                    flags.interval.is_some() || file.interval.is_some(),
                ),
                ("--push.header", !headers.is_empty()),
                (
                    "--push.username",
                    flags.username.is_some() || file.username.is_some(),
                ),
                (
                    "--push.password-file",
                    flags.password_file.is_some() || file.password_file.is_some(),
                ),
                (
                    "--push.bearer-token-file",
                    flags.bearer_token_file.is_some() || file.bearer_token_file.is_some(),
                ),
                (
                    "--push.ca-file",
                    flags.ca_file.is_some() || file.ca_file.is_some(),
                ),
                (
                    "--push.timeout",
                    flags.timeout.is_some() || file.timeout.is_some(),
                ),
                (
                    "--push.min-backoff",
                    flags.min_backoff.is_some() || file.min_backoff.is_some(),
                ),
                (
                    "--push.max-backoff",
                    flags.max_backoff.is_some() || file.max_backoff.is_some(),
                ),
                (
                    "--push.buffer.dir",
                    flags.buffer_dir.is_some() || file.buffer.dir.is_some(),
                ),
                (
                    "--push.buffer.max-age",
                    flags.buffer_max_age.is_some() || file.buffer.max_age.is_some(),
                ),
                (
                    "--push.buffer.max-bytes",
                    flags.buffer_max_bytes.is_some() || file.buffer.max_bytes.is_some(),
                ),
                ("--push.job", flags.job.is_some() || file.job.is_some()),
                (
                    "--push.instance",
                    flags.instance.is_some() || file.instance.is_some(),
                ),
            ];
            return match given.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(PushOptionsError::WithoutUrl(flag)),
                None => Ok(None),
            };
        };
        let timeout = duration("--push.timeout", flags.timeout.or(file.timeout), "10s")?;
        let push_interval = match flags.interval.or(file.interval) {
            Some(text) => (duration("--push.interval", Some(text.clone()), "")?, text),
            None => (interval, String::new()),
        };
        let ticks = push_interval.0.as_secs_f64() / interval.as_secs_f64();
        if ticks < 1.0 - 1e-9 || (ticks - ticks.round()).abs() > 1e-6 {
            return Err(PushOptionsError::Range {
                flag: "--push.interval",
                text: push_interval.1,
                why: "must be a whole number of --collection.interval",
            });
        }
        let retry = RetryPolicy {
            min_backoff: duration(
                "--push.min-backoff",
                flags.min_backoff.or(file.min_backoff),
                "100ms",
            )?,
            max_backoff: duration(
                "--push.max-backoff",
                flags.max_backoff.or(file.max_backoff),
                "10s",
            )?,
        };
        let max_age = duration(
            "--push.buffer.max-age",
            flags.buffer_max_age.or(file.buffer.max_age),
            "1h",
        )?;
        let max_bytes = match (flags.buffer_max_bytes, file.buffer.max_bytes) {
            (Some(text), _) => parse_bytes(&text)?,
            (None, Some(toml::Value::Integer(n))) if n > 0 => n as u64,
            (None, Some(toml::Value::String(text))) => parse_bytes(&text)?,
            (None, Some(other)) => parse_bytes(&other.to_string())?,
            (None, None) => DEFAULT_MAX_BYTES,
        };
        let endpoint = Endpoint::new(
            USER_AGENT,
            "push",
            &url,
            &AuthFlags {
                username: flags.username.or(file.username),
                password_file: flags.password_file.or(file.password_file),
                bearer_token_file: flags.bearer_token_file.or(file.bearer_token_file),
                ca_file: flags.ca_file.or(file.ca_file),
                headers,
            },
            timeout,
        )?;
        let job = flags.job.or(file.job).unwrap_or_else(|| DEFAULT_JOB.into());
        let instance = flags
            .instance
            .or(file.instance)
            .unwrap_or_else(|| node.into());
        for (flag, value) in [("--push.job", &job), ("--push.instance", &instance)] {
            if value.is_empty() {
                return Err(PushOptionsError::Range {
                    flag,
                    text: String::new(),
                    why: "must not be empty",
                });
            }
        }
        Ok(Some(PushConfig {
            endpoint,
            ticks_per_push: ticks.round() as u32,
            retry,
            buffer: BufferLimits {
                dir: flags
                    .buffer_dir
                    .or(file.buffer.dir)
                    .unwrap_or_else(|| DEFAULT_DIR.into()),
                max_age,
                max_bytes,
            },
            job,
            instance,
        }))
    }
}

/// A duration option, or `default` when not given (an empty default: the caller's own).
fn duration(
    flag: &'static str,
    text: Option<String>,
    default: &str,
) -> Result<Duration, PushOptionsError> {
    let text = text.unwrap_or_else(|| default.to_string());
    let d = humantime::parse_duration(&text).map_err(|source| PushOptionsError::Duration {
        flag,
        text: text.clone(),
        source,
    })?;
    if d.is_zero() {
        return Err(PushOptionsError::Range {
            flag,
            text,
            why: "must be above zero",
        });
    }
    Ok(d)
}

/// `--push.buffer.max-bytes`: bytes, or a number with `KiB`, `MiB`, `GiB` (or Prometheus'
/// base-2 `KB`, `MB`, `GB`).
fn parse_bytes(text: &str) -> Result<u64, PushOptionsError> {
    let refused = |why| PushOptionsError::Range {
        flag: "--push.buffer.max-bytes",
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| refused("expected bytes, e.g. 268435456 or 256MiB"))?;
    let unit: u64 = match suffix.trim() {
        "" | "B" => 1,
        "KiB" | "KB" => 1 << 10,
        "MiB" | "MB" => 1 << 20,
        "GiB" | "GB" => 1 << 30,
        _ => return Err(refused("the suffix must be KiB, MiB or GiB")),
    };
    match number.checked_mul(unit) {
        Some(0) => Err(refused("must be above zero")),
        Some(n) => Ok(n),
        None => Err(refused("too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_and_without_suffix() {
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert_eq!(parse_bytes("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("1GB").unwrap(), 1 << 30);
        for bad in ["", "0", "12 parsecs", "-1", "99999999999999GiB"] {
            let err = parse_bytes(bad).unwrap_err();
            assert!(err.to_string().contains("--push.buffer.max-bytes"), "{err}");
        }
    }
}
