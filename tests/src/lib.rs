//! Helpers shared by the end-to-end tests: a private, real Prometheus on a loopback port, the
//! workspace's binaries, free ports and waiting with a deadline.
//!
//! Nothing here fakes a component: [`Prometheus`] runs Debian's `prometheus` binary with its own
//! data directory and `--web.enable-remote-write-receiver`, and is killed when dropped.

pub mod cgroup;
pub mod scrape;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

pub mod demo_pod;
pub mod grafana;
pub mod static_target;

/// A free TCP port on 127.0.0.1 (bound then released; good enough for tests on one machine).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral loopback port")
}

/// Polls `f` every 100 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Path of a binary built by this workspace (`greenpipe-exporter`, `greenpipe-estimator`),
/// building it first if needed so `cargo test -p greenpipe-tests` works on its own.
pub fn workspace_binary(name: &str) -> PathBuf {
    let root = workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let path = target.join("debug").join(name);
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--bin", name])
        .current_dir(&root)
        .status()
        .expect("running cargo build");
    assert!(status.success(), "cargo build --bin {name} failed");
    path
}

/// Like [`workspace_binary`], unless `GREENPIPE_TEST_BIN_DIR` names a directory of prebuilt
/// binaries (release builds, or binaries from another checkout) to test instead.
pub fn test_binary(name: &str) -> PathBuf {
    match std::env::var_os("GREENPIPE_TEST_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => workspace_binary(name),
    }
}

/// The workspace root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// A child process killed (SIGTERM, then SIGKILL) when dropped.
pub struct Guard {
    child: Option<Child>,
    name: String,
}

impl Guard {
    /// Wraps a spawned child.
    pub fn new(name: &str, child: Child) -> Guard {
        Guard {
            child: Some(child),
            name: name.to_string(),
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Waits up to `timeout` for the child to exit by itself (then terminates it); returns the
    /// exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.as_mut()?.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Some(status);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break,
            }
        }
        eprintln!("{} did not exit within {timeout:?}", self.name);
        self.terminate();
        None
    }

    /// Sends SIGTERM and waits up to 10 s; returns the exit status.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) on a pid we spawned and have not reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} ignored SIGTERM; killing", self.name);
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.terminate();
    }
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
        let log = std::fs::File::create(self.dir.path().join("prometheus.log"))?;
        let child = Command::new("prometheus")
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
            .arg("--storage.tsdb.retention.time=1d")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context(
                "starting prometheus (is Debian's `prometheus` installed? scripts/setup.sh)",
            )?;
        self.guard = Some(Guard::new("prometheus", child));
        let ready = wait_for(Duration::from_secs(30), || {
            reqwest::blocking::get(format!("{}/-/ready", self.url))
                .ok()
                .filter(|r| r.status().is_success())
        });
        if ready.is_none() {
            let log =
                std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default();
            bail!("prometheus did not become ready on {}:\n{log}", self.url);
        }
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
        let body: serde_json::Value = reqwest::blocking::Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", promql)])
            .send()?
            .error_for_status()?
            .json()?;
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
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
