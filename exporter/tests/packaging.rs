//! The files the release tarball ships for running the exporter outside Kubernetes
//! (deploy/systemd/, scripts/release.sh): the example config is one the exporter accepts, with
//! the values it claims, and the unit starts the binary with that config.

use std::path::PathBuf;
use std::time::Duration;

use greenpipe_exporter::config::Config;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd")
}

#[test]
fn example_config_is_accepted_as_written() {
    let file = deploy().join("exporter.toml");
    let c = Config::parse_from([
        "greenpipe-exporter",
        "--config.file",
        file.to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{}: {e:#}", file.display()));
    assert_eq!(c.node_name, "pi5-kitchen");
    assert_eq!(c.interval, Duration::from_secs(1));
    assert_eq!(c.listen.port(), 9910);
    assert_eq!(c.meter.specs.len(), 1, "{:?}", c.meter.specs);
    assert_eq!(c.meter.timeout, Duration::from_millis(500));
}

#[test]
fn unit_runs_the_installed_binary_with_the_example_config() {
    let unit = std::fs::read_to_string(deploy().join("greenpipe-exporter.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart line");
    assert_eq!(
        exec,
        "/usr/local/bin/greenpipe-exporter --config.file=/etc/greenpipe/exporter.toml"
    );
    for cap in ["CAP_BPF", "CAP_PERFMON"] {
        assert!(
            unit.lines()
                .any(|l| l.starts_with("AmbientCapabilities=") && l.contains(cap)),
            "{cap} missing from AmbientCapabilities"
        );
    }
}
