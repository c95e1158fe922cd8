//! A private Prometheus 3 (built from source by `scripts/backends.sh build prometheus3`, cached
//! per machine) on a loopback port, with the flags a test asks for: the receiver of the remote
//! write 2.0 and OTLP tests (ignored unless asked for, run by scripts/test-backends.sh).

use std::process::Command;
use std::time::Duration;

use crate::backends::{binary, Engine};
use crate::{daemon, free_port, Guard};

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
        let prometheus =
            binary(Engine::Prometheus3, "prometheus").unwrap_or_else(|e| panic!("{e:#}"));
        let mut cmd = Command::new(prometheus);
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
        let url = format!("http://127.0.0.1:{port}");
        let guard = daemon::start(
            "prometheus3",
            cmd,
            &dir.path().join("prometheus.log"),
            &format!("{url}/-/ready"),
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
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
