//! A private Prometheus 3 (built from source by `scripts/backends.sh build prometheus3`, cached
//! per machine) on a loopback port: the receiver of the remote write 2.0 and OTLP tests (feature
//! `backends`, run by scripts/test-backends.sh).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{free_port, wait_for, workspace_root, Guard};

/// The Prometheus 3 binary (built on first use, cached per machine).
fn binary() -> PathBuf {
    let out = Command::new(workspace_root().join("scripts/backends.sh"))
        .args(["build", "prometheus3"])
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/backends.sh");
    assert!(
        out.status.success(),
        "scripts/backends.sh build prometheus3 failed"
    );
    let dir = String::from_utf8(out.stdout).expect("a UTF-8 path");
    PathBuf::from(dir.trim()).join("prometheus")
}

/// A running Prometheus 3, stopped when dropped.
pub struct Prometheus3 {
    /// Base URL (query API root).
    pub url: String,
    dir: tempfile::TempDir,
    _guard: Guard,
}

impl Prometheus3 {
    /// Starts it with the remote-write receiver on: `accepted` are the remote-write messages it
    /// takes, `features` its `--enable-feature` values, `extra` further flags (e.g.
    /// `--web.enable-otlp-receiver`), `config` its configuration file. Waits until it is ready.
    pub fn start(
        accepted: &[&str],
        features: &[&str],
        extra: &[&str],
        config: &str,
    ) -> Prometheus3 {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writing prometheus.yml");
        let port = free_port();
        let mut cmd = Command::new(binary());
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver");
        for m in accepted {
            cmd.arg(format!(
                "--web.remote-write-receiver.accepted-protobuf-messages={m}"
            ));
        }
        if !features.is_empty() {
            cmd.arg(format!("--enable-feature={}", features.join(",")));
        }
        cmd.args(extra);
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("the log file");
        let guard = Guard::new(
            "prometheus3",
            cmd.stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("starting prometheus 3"),
        );
        let url = format!("http://127.0.0.1:{port}");
        wait_for(Duration::from_secs(60), || {
            reqwest::blocking::get(format!("{url}/-/ready"))
                .ok()
                .filter(|r| r.status().is_success())
        })
        .unwrap_or_else(|| {
            panic!(
                "prometheus 3 not ready:\n{}",
                std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
            )
        });
        Prometheus3 {
            url,
            dir,
            _guard: guard,
        }
    }

    /// The remote-write URL.
    pub fn write_url(&self) -> String {
        format!("{}/api/v1/write", self.url)
    }

    /// The OTLP/HTTP metrics URL.
    pub fn otlp_url(&self) -> String {
        format!("{}/api/v1/otlp/v1/metrics", self.url)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}
