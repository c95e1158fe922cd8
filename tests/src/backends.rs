//! A storage engine started by `scripts/backends.sh up DIR ENGINE` (built from Go source, cached
//! per machine; its tests are ignored unless asked for, run by scripts/test-backends.sh),
//! stopped by `down` when dropped.

use std::collections::BTreeMap;
use std::process::Command;

use crate::workspace_root;

/// A running engine and the `DIR/env` that `up` wrote.
pub struct Backend {
    dir: tempfile::TempDir,
    /// `READ_URL`, `WRITE_URL`, `TENANT_HEADER`, `TENANT`, `ENGINE` (and `OTLP_URL` where the
    /// engine takes OTLP).
    pub env: BTreeMap<String, String>,
}

impl Backend {
    /// `scripts/backends.sh up DIR engine`; panics with its output when it fails.
    pub fn up(engine: &str) -> Backend {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let out = Command::new(workspace_root().join("scripts/backends.sh"))
            .arg("up")
            .arg(dir.path())
            .arg(engine)
            .output()
            .expect("running scripts/backends.sh");
        assert!(
            out.status.success(),
            "backends.sh up {engine} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(dir.path().join("env")).expect("DIR/env");
        let env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Backend { dir, env }
    }

    /// One of the `env` values.
    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from DIR/env: {:?}", self.env))
    }

    /// The last lines of each daemon's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
            for entry in entries.flatten() {
                let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                text.push_str(&format!("== {}\n", entry.path().display()));
                for line in tail.into_iter().rev() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = Command::new(workspace_root().join("scripts/backends.sh"))
            .arg("down")
            .arg(self.dir.path())
            .status();
    }
}
