//! Helpers shared by the end-to-end tests: a private, real Prometheus on a loopback port, the
//! workspace's binaries, free ports and waiting with a deadline.
//!
//! Nothing here fakes a component: [`Prometheus`] runs Debian's `prometheus` binary with its own
//! data directory and `--web.enable-remote-write-receiver`, and is killed when dropped.

pub mod arm;
pub mod backends;
pub mod cgroup;
pub mod closed_loop_meter;
pub mod control_plane;
pub mod daemon;
pub mod fake_nvml;
pub mod link;
pub mod models;
pub mod pki;
pub mod prometheus3;
pub mod scrape;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::bail;

pub mod demo_pod;
pub mod grafana;
pub mod static_target;

pub use daemon::Guard;
pub use greenpipe_test_support::{free_port, wait_for};

/// Sum of the series of `name` on the `/metrics` page at `url` whose label text contains
/// `labels` (0 when absent or unreachable).
pub fn self_metric(url: &str, name: &str, labels: &str) -> f64 {
    let text = reqwest::blocking::get(url)
        .and_then(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Path of a binary built by this workspace (`greenpipe-exporter`, `greenpipe-estimator`),
/// building it first if needed so `cargo test -p greenpipe-tests` works on its own.
pub fn workspace_binary(name: &str) -> PathBuf {
    let root = workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    // One build builds every binary, so a test process builds once: each no-op cargo build
    // checks the whole workspace's fingerprints and waits for the build directory's lock, which
    // the test lanes running beside each other contend for.
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_workspace_binaries(&root));
    target.join("debug").join(name)
}

fn build_workspace_binaries(root: &Path) {
    let mut build = Command::new(env!("CARGO"));
    // The test process carries the variables cargo sets for the test crate (CARGO_PKG_NAME,
    // CARGO_MANIFEST_DIR, ...). Build scripts that watch them (ring via cc) would see a changed
    // environment and rebuild half the dependency tree on every call: drop them.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let set_by_cargo_for_tests = (key.starts_with("CARGO_")
            && !matches!(
                key.as_ref(),
                "CARGO_HOME" | "CARGO_TARGET_DIR" | "CARGO_INCREMENTAL"
            )
            && !key.starts_with("CARGO_BUILD_")
            && !key.starts_with("CARGO_REGISTRIES_")
            && !key.starts_with("CARGO_NET_")
            && !key.starts_with("CARGO_PROFILE_")
            && !key.starts_with("CARGO_TERM_"))
            || key == "OUT_DIR";
        if set_by_cargo_for_tests {
            build.env_remove(key.as_ref());
        }
    }
    // scripts/test-runner.sh sets it for the test binary alone (libtest's --report-time); build
    // scripts that probe for nightly (anyhow's) watch it, and would rebuild the tree under it.
    build.env_remove("RUSTC_BOOTSTRAP");
    // The same package and target selection as `cargo test --workspace` (every member, test
    // targets included, so dev-dependencies' features are unified the same way): after the test
    // build this is a no-op that finds the binary cargo test already linked. `--bin NAME` alone
    // resolved features for the default members without dev-dependencies and rebuilt rustix, tar
    // and the tract stack under it (4 min, and a second copy on disk).
    let status = build
        .args(["build", "--quiet", "--workspace", "--bins", "--tests"])
        .current_dir(root)
        .status()
        .expect("running cargo build");
    assert!(
        status.success(),
        "cargo build of the workspace's binaries failed"
    );
}

/// Like [`workspace_binary`], unless `GREENPIPE_TEST_BIN_DIR` names a directory of prebuilt
/// binaries (release builds, or binaries from another checkout) to test instead.
pub fn test_binary(name: &str) -> PathBuf {
    match std::env::var_os("GREENPIPE_TEST_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => workspace_binary(name),
    }
}

/// The carbon tools' command line: the placement controller is `carbon place` under it. The
/// one place that knows which binary carries them.
pub fn carbon_command() -> Command {
    Command::new(test_binary("greenpipe-carbon"))
}

/// The workspace root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// The files of `dir` whose extension is `extension`, sorted by path.
pub fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// Starts `greenpipe-exporter` for `node` on `127.0.0.1:port` with `extra` flags, its stderr
/// written to `log` (or dropped).
pub fn spawn_exporter(node: &str, port: u16, extra: &[&str], log: Option<&Path>) -> Guard {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).expect("creating the exporter log")),
        None => Stdio::null(),
    };
    let child = Command::new(workspace_binary("greenpipe-exporter"))
        .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
        .args(["--node-name", node])
        .args(extra)
        .stderr(stderr)
        .spawn()
        .expect("starting the exporter");
    Guard::new("exporter", child)
}

/// Starts `greenpipe-exporter` for `node` on a free loopback port, collecting every 500 ms, with
/// `extra` flags; returns its guard and its `/metrics` URL.
pub fn start_exporter(node: &str, extra: &[&str]) -> (Guard, String) {
    let port = free_port();
    let extra = [&["--collection.interval", "500ms"], extra].concat();
    (
        spawn_exporter(node, port, &extra, None),
        format!("http://127.0.0.1:{port}/metrics"),
    )
}

/// A private Prometheus server on a loopback port.
pub struct Prometheus {
    /// Base URL, e.g. `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its data and config directory.
    pub dir: tempfile::TempDir,
    port: u16,
    scrape_targets: Vec<String>,
    scrape_interval: String,
    guard: Option<Guard>,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (host:port) every `scrape_interval` (e.g. `1s`),
    /// with the remote-write receiver enabled. Waits until it is ready.
    pub fn start(targets: &[String], scrape_interval: &str) -> anyhow::Result<Prometheus> {
        let dir = tempfile::tempdir()?;
        let port = free_port();
        let mut p = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            dir,
            port,
            scrape_targets: targets.to_vec(),
            scrape_interval: scrape_interval.to_string(),
            guard: None,
        };
        p.write_config()?;
        p.spawn()?;
        Ok(p)
    }

    /// Starts Prometheus with a whole configuration file of the caller's (rule files, several
    /// jobs); paths in it must be absolute. The remote-write receiver is enabled as in
    /// [`Prometheus::start`].
    pub fn start_with_config(config: &str) -> anyhow::Result<Prometheus> {
        let dir = tempfile::tempdir()?;
        let port = free_port();
        let mut p = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            dir,
            port,
            scrape_targets: Vec::new(),
            scrape_interval: String::new(),
            guard: None,
        };
        std::fs::write(p.dir.path().join("prometheus.yml"), config)?;
        p.spawn()?;
        Ok(p)
    }

    fn write_config(&self) -> anyhow::Result<()> {
        let targets = self
            .scrape_targets
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let jobs = if self.scrape_targets.is_empty() {
            String::new()
        } else {
            format!(
                "scrape_configs:\n  - job_name: greenpipe-exporter\n    scrape_interval: {0}\n    \
                 scrape_timeout: {0}\n    static_configs:\n      - targets: [{targets}]\n",
                self.scrape_interval
            )
        };
        std::fs::write(
            self.dir.path().join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: {}\n{jobs}",
                self.scrape_interval
            ),
        )?;
        Ok(())
    }

    /// Starts (or restarts, keeping the data) the server process.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let mut command = Command::new("prometheus");
        command
            .arg(format!(
                "--config.file={}",
                self.dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .arg("--web.enable-remote-write-receiver")
            .arg("--web.enable-lifecycle")
            .arg("--storage.tsdb.retention.time=1d");
        self.guard = Some(daemon::start(
            "prometheus",
            command,
            &self.dir.path().join("prometheus.log"),
            &format!("{}/-/ready", self.url),
            Duration::from_secs(30),
        )?);
        Ok(())
    }

    /// Stops the server (SIGTERM), keeping its data directory for a later [`Prometheus::spawn`].
    pub fn stop(&mut self) {
        if let Some(mut g) = self.guard.take() {
            g.terminate();
        }
    }

    /// Remote-write endpoint URL.
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.url)
    }

    /// Runs an instant query and returns the `data.result` array.
    pub fn query(&self, promql: &str) -> anyhow::Result<Vec<serde_json::Value>> {
        query_api(&self.url, promql)
    }

    /// Runs an instant query and returns the first sample's value, if any.
    pub fn query_scalar(&self, promql: &str) -> anyhow::Result<Option<f64>> {
        Ok(self
            .query(promql)?
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|v| v.parse().ok()))
    }
}

/// Runs an instant query against any Prometheus-compatible query API (`base` = server root) and
/// returns the `data.result` array.
pub fn query_api(base: &str, promql: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    query_api_with_headers(base, &[], promql)
}

/// [`query_api`] with extra request headers (a tenant's).
pub fn query_api_with_headers(
    base: &str,
    headers: &[(&str, &str)],
    promql: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut request = reqwest::blocking::Client::new()
        .get(format!("{base}/api/v1/query"))
        .query(&[("query", promql)]);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body: serde_json::Value = request.send()?.error_for_status()?.json()?;
    Ok(body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// One stored series: its labels and raw samples `(ms, value)`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSeries {
    /// Label pairs (including `__name__`).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Samples in time order.
    pub samples: Vec<(i64, f64)>,
}

/// Labels of a stored series, its samples.
pub type SeriesByLabels =
    std::collections::BTreeMap<std::collections::BTreeMap<String, String>, Vec<(i64, f64)>>;

/// `series` (as [`raw_samples`] returns them) keyed by their labels, each keeping only the
/// samples whose time is in `ticks` (all of them with `None`).
pub fn by_labels(
    series: Vec<StoredSeries>,
    ticks: Option<&std::collections::BTreeSet<i64>>,
) -> SeriesByLabels {
    series
        .into_iter()
        .map(|s| {
            let samples = s
                .samples
                .into_iter()
                .filter(|(t, _)| ticks.is_none_or(|ticks| ticks.contains(t)))
                .collect();
            (s.labels, samples)
        })
        .collect()
}

/// The raw samples of the series matching `selector` over the last `window` (e.g. `10m`), read
/// with a range-vector instant query so nothing is interpolated or deduplicated.
pub fn raw_samples(base: &str, selector: &str, window: &str) -> anyhow::Result<Vec<StoredSeries>> {
    raw_samples_with_headers(base, &[], selector, window)
}

/// [`raw_samples`] with extra request headers (a tenant's).
pub fn raw_samples_with_headers(
    base: &str,
    headers: &[(&str, &str)],
    selector: &str,
    window: &str,
) -> anyhow::Result<Vec<StoredSeries>> {
    let result = query_api_with_headers(base, headers, &format!("{selector}[{window}]"))?;
    Ok(result
        .iter()
        .map(|s| StoredSeries {
            labels: s["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            samples: s["values"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(|p| {
                            let t = p[0].as_f64()?;
                            let v: f64 = p[1].as_str()?.parse().ok()?;
                            Some(((t * 1000.0).round() as i64, v))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect())
}

/// Remote-writes series (protobuf + snappy, as Prometheus agents do) to a receiver's write URL.
/// The test's way to put feature series with known values into Prometheus.
pub fn remote_write(
    url: &str,
    series: Vec<greenpipe_estimator::remote_write::TimeSeries>,
) -> anyhow::Result<()> {
    remote_write_with_headers(url, &[], series)
}

/// [`remote_write`] with extra request headers (a tenant's, e.g. `THANOS-TENANT`).
pub fn remote_write_with_headers(
    url: &str,
    headers: &[(&str, &str)],
    series: Vec<greenpipe_estimator::remote_write::TimeSeries>,
) -> anyhow::Result<()> {
    use greenpipe_estimator::remote_write as rw;
    let client = reqwest::blocking::Client::new();
    for batch in rw::batches(series, rw::BatchLimits::default()) {
        let mut request = client.post(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request
            .header("Content-Encoding", rw::CONTENT_ENCODING)
            .header("Content-Type", rw::CONTENT_TYPE)
            .header(rw::VERSION_HEADER, rw::VERSION)
            .body(rw::encode(batch))
            .send()?;
        let status = response.status();
        if !status.is_success() {
            bail!("remote write to {url}: HTTP {status}: {}", response.text()?);
        }
    }
    Ok(())
}

/// A series of `name` sampled every `step_ms` from `from_ms` to `to_ms`, valued `value(t_ms)`.
pub fn series_of(
    name: &str,
    labels: &[(&str, &str)],
    (from_ms, to_ms, step_ms): (i64, i64, i64),
    value: impl Fn(i64) -> f64,
) -> greenpipe_estimator::remote_write::TimeSeries {
    use greenpipe_estimator::remote_write::{Sample, TimeSeries};
    let mut ts = TimeSeries::new(name, labels);
    ts.samples = (from_ms..=to_ms)
        .step_by(step_ms as usize)
        .map(|t| Sample {
            value: value(t),
            timestamp: t,
        })
        .collect();
    ts
}

/// A counter growing by `per_second` from 1000 at `from_ms`, one sample every `step_ms` up to
/// `to_ms`: its `rate()` is exactly `per_second`.
pub fn counter_series(
    name: &str,
    labels: &[(&str, &str)],
    per_second: f64,
    window: (i64, i64, i64),
) -> greenpipe_estimator::remote_write::TimeSeries {
    series_of(name, labels, window, |t| {
        1000.0 + per_second * (t - window.0) as f64 / 1000.0
    })
}

/// A gauge holding `value` from `from_ms` to `to_ms`, one sample every `step_ms`.
pub fn gauge_series(
    name: &str,
    labels: &[(&str, &str)],
    value: f64,
    window: (i64, i64, i64),
) -> greenpipe_estimator::remote_write::TimeSeries {
    series_of(name, labels, window, |_| value)
}

/// The tick times of the estimator's markers stored in `base` over the last 10 minutes: the
/// ticks it wrote completely.
pub fn marker_ticks(base: &str) -> std::collections::BTreeSet<i64> {
    raw_samples(
        base,
        greenpipe_common::names::estimate::TICK_TIMESTAMP_SECONDS,
        "10m",
    )
    .unwrap_or_default()
    .into_iter()
    .flat_map(|s| s.samples.into_iter().map(|(t, _)| t))
    .collect()
}

/// The smallest input `serve` estimates a node from, over `span`: `node`'s CPU busy 1 s/s
/// (`user`) and idle 3 s/s, and one container (`container`: its `node`, `container_id` and
/// `pod_uid` labels) using 0.5 s/s of it (source `cgroup`) with 2 processes.
pub fn one_container_node(
    node: &str,
    container: &[(&str, &str)],
    span: (i64, i64, i64),
) -> Vec<greenpipe_estimator::remote_write::TimeSeries> {
    use greenpipe_common::names::{container as c, node as n};
    vec![
        counter_series(
            n::CPU_SECONDS_TOTAL,
            &[("node", node), ("mode", "user")],
            1.0,
            span,
        ),
        counter_series(
            n::CPU_SECONDS_TOTAL,
            &[("node", node), ("mode", "idle")],
            3.0,
            span,
        ),
        counter_series(
            c::CPU_SECONDS_TOTAL,
            &[container, &[("source", "cgroup")]].concat(),
            0.5,
            span,
        ),
        gauge_series(c::PROCESSES, container, 2.0, span),
    ]
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// A private VictoriaMetrics (Debian's `victoria-metrics`) on a loopback port, with its own data
/// directory and no query latency offset (its default 30 s hides fresh samples from queries).
pub struct VictoriaMetrics {
    /// Base URL (query API root; remote write at `/api/v1/write`).
    pub url: String,
    /// Data directory.
    pub dir: tempfile::TempDir,
    port: u16,
    latency_offset: Option<String>,
    guard: Option<Guard>,
}

impl VictoriaMetrics {
    /// Starts it and waits until it answers.
    pub fn start() -> anyhow::Result<VictoriaMetrics> {
        VictoriaMetrics::start_with_latency_offset(Some("0s"))
    }

    /// Starts it with `-search.latencyOffset` (`None`: VictoriaMetrics' default, 30 s).
    pub fn start_with_latency_offset(offset: Option<&str>) -> anyhow::Result<VictoriaMetrics> {
        let port = free_port();
        let mut vm = VictoriaMetrics {
            url: format!("http://127.0.0.1:{port}"),
            dir: tempfile::tempdir()?,
            port,
            latency_offset: offset.map(str::to_string),
            guard: None,
        };
        vm.spawn()?;
        Ok(vm)
    }

    /// Starts (or restarts, keeping the data) the server process.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let mut command = Command::new("victoria-metrics");
        command
            .arg(format!("-httpListenAddr=127.0.0.1:{}", self.port))
            .arg(format!(
                "-storageDataPath={}",
                self.dir.path().join("data").display()
            ))
            .arg("-retentionPeriod=1d");
        if let Some(offset) = &self.latency_offset {
            command.arg(format!("-search.latencyOffset={offset}"));
        }
        self.guard = Some(daemon::start(
            "victoria-metrics",
            command,
            &self.dir.path().join("victoria-metrics.log"),
            &format!("{}/health", self.url),
            Duration::from_secs(30),
        )?);
        Ok(())
    }

    /// Stops the server (SIGTERM), keeping its data for a later [`VictoriaMetrics::spawn`].
    pub fn stop(&mut self) {
        if let Some(mut g) = self.guard.take() {
            g.terminate();
        }
    }

    /// Remote-write endpoint URL.
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.url)
    }
}
