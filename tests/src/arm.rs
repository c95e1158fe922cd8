//! The exporter cross-built for ARM, run on this x86-64 host: under qemu-user next to the x86-64
//! exporter, or inside a whole arm64 machine (`scripts/arm-vm.sh`, qemu-system-aarch64).
//!
//! The cross builds are `scripts/test-arm.sh`'s (Debian's rustc-web, see `scripts/cross.sh`):
//! it builds them, then runs the `arm_*` tests with `GREENPIPE_ARM_TARGET_DIR` naming its target
//! directory. These tests are `#[ignore]`d so `cargo test --workspace` does not run them
//! without that build.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{free_port, Guard};

/// Raspberry Pi 4/5 (64-bit OS), Jetson, Graviton.
pub const AARCH64: &str = "aarch64-unknown-linux-gnu";

/// The qemu-user emulator for `target`: the runners of `.cargo/config.toml`.
pub fn qemu_user(target: &str) -> &'static str {
    match target {
        AARCH64 => "qemu-aarch64-static",
        "armv7-unknown-linux-gnueabihf" => "qemu-arm-static",
        other => panic!("no qemu-user runner for {other}"),
    }
}

/// A debug binary `scripts/test-arm.sh` cross-built for `target`.
pub fn cross_binary(target: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os("GREENPIPE_ARM_TARGET_DIR").unwrap_or_else(|| {
        panic!(
            "GREENPIPE_ARM_TARGET_DIR is unset: run the arm_* tests through scripts/test-arm.sh, \
             which cross-builds {name} for {target} first"
        )
    });
    let path = Path::new(&dir).join(target).join("debug").join(name);
    assert!(
        path.is_file(),
        "{} missing: scripts/test-arm.sh builds it",
        path.display()
    );
    path
}

/// A cross-built exporter running under qemu-user, its stderr kept for the test to read.
pub struct CrossExporter {
    /// `/metrics` URL on loopback.
    pub url: String,
    log: tempfile::NamedTempFile,
    _guard: Guard,
}

impl CrossExporter {
    /// Starts the `target` exporter for `node` on a free loopback port under qemu-user,
    /// collecting every 500 ms as [`crate::start_exporter`]'s x86-64 one does.
    pub fn start(target: &str, node: &str, extra: &[&str]) -> CrossExporter {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("temp file for the exporter's log");
        let child = Command::new(qemu_user(target))
            .arg(cross_binary(target, "greenpipe-exporter"))
            .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
            .args(["--node-name", node, "--collection.interval", "500ms"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("reopening the log file"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "starting {} (qemu-user-static, scripts/setup.sh --cross): {e}",
                    qemu_user(target)
                )
            });
        CrossExporter {
            url: format!("http://127.0.0.1:{port}/metrics"),
            log,
            _guard: Guard::new(&format!("{target} exporter"), child),
        }
    }

    /// Its log so far, without the terminal colour codes tracing writes.
    pub fn log(&self) -> String {
        strip_ansi(&std::fs::read_to_string(self.log.path()).unwrap_or_default())
    }
}

/// What the guest of `scripts/arm-vm.sh run` printed on its serial console.
#[derive(Debug)]
pub struct VmRun {
    /// Every line of the console, `\r` removed.
    pub console: String,
    /// `GREENPIPE-VM: key rest` lines: key → rest.
    pub facts: std::collections::BTreeMap<String, String>,
    /// The exporter's `/metrics` page taken after the busy process ended.
    pub metrics: String,
    /// The exporter's log, colour codes removed.
    pub log: String,
}

impl VmRun {
    /// The rest of the `GREENPIPE-VM: key ...` line; panics naming the key when the guest
    /// did not print it.
    pub fn fact(&self, key: &str) -> &str {
        self.facts.get(key).unwrap_or_else(|| {
            panic!(
                "the guest printed no '{key}' line; console:\n{}",
                self.console
            )
        })
    }
}

/// Boots the arm64 machine with the aarch64 exporter at `exporter` (`scripts/arm-vm.sh run`,
/// qemu `-cpu cpu`) and parses its console. The script's own timeout fails a hung guest.
pub fn boot_vm(exporter: &Path, cpu: &str) -> VmRun {
    let output = Command::new(crate::workspace_root().join("scripts/arm-vm.sh"))
        .arg("run")
        .arg(exporter)
        .arg(cpu)
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/arm-vm.sh");
    let console = String::from_utf8_lossy(&output.stdout).replace('\r', "");
    assert!(
        output.status.success(),
        "scripts/arm-vm.sh failed ({}); console:\n{console}",
        output.status
    );
    let between = |begin: &str, end: &str| -> String {
        console
            .split_once(begin)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(inner, _)| inner.trim_start_matches('\n').to_string())
            .unwrap_or_default()
    };
    let facts = console
        .lines()
        .filter_map(|l| l.strip_prefix("GREENPIPE-VM: "))
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            (k.to_string(), v.trim().to_string())
        })
        .collect();
    VmRun {
        metrics: between("GREENPIPE-VM-METRICS-BEGIN\n", "GREENPIPE-VM-METRICS-END"),
        log: strip_ansi(&between("GREENPIPE-VM-LOG-BEGIN\n", "GREENPIPE-VM-LOG-END")),
        facts,
        console,
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The metric families a `/metrics` page declares (`# TYPE` lines).
pub fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_colour_codes_and_reads_type_lines() {
        assert_eq!(
            strip_ansi("\x1b[33m WARN\x1b[0m \x1b[3mcollector\x1b[0m\x1b[2m=\x1b[0m\"ebpf\""),
            " WARN collector=\"ebpf\""
        );
        let page = "# HELP a x\n# TYPE a counter\na 1\n# TYPE b_total counter\nb_total 2\n";
        assert_eq!(
            families(page),
            BTreeSet::from(["a".to_string(), "b_total".to_string()])
        );
    }
}
