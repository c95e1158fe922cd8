//! Fixture `/proc`, `/sys` and a hybrid cgroup tree (containerd pods in v2 with the systemd
//! driver, a Docker container in v1 with the cgroupfs driver) → the whole `/metrics` text,
//! compared with `tests/golden/metrics.prom`. `UPDATE_GOLDEN=1` rewrites the golden file.
//!
//! Self metrics whose values vary from run to run (durations, the exporter's own CPU and RSS,
//! the sample timestamp) are masked to 0, not left out, so their names, labels and types are
//! still checked.

use std::path::{Path, PathBuf};
use std::process::Command;

use greenpipe_common::names::{container, exporter, label, node, source, SYSTEM_CONTAINER};
use greenpipe_exporter::config::Config;
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.prom")
}

fn fixture_config() -> Config {
    let root = fixtures();
    let mut config = Config::for_paths(
        Paths {
            procfs: root.join("proc"),
            sysfs: root.join("sys"),
            cgroupfs: root.join("cgroup"),
            rootfs: root.to_path_buf(),
        },
        "fixture-node",
    );
    config.collectors = greenpipe_exporter::collector::REGISTRY
        .iter()
        .map(|s| s.name)
        .collect();
    config.options.process.top_n = Some(3);
    config
}

/// Metrics whose values depend on the run, not on the fixtures.
const VARYING: [&str; 5] = [
    exporter::COLLECTOR_DURATION_SECONDS,
    exporter::COLLECTION_DURATION_SECONDS,
    exporter::LAST_COLLECTION_TIMESTAMP_SECONDS,
    exporter::CPU_SECONDS_TOTAL,
    exporter::RESIDENT_MEMORY_BYTES,
];

fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        match line.rsplit_once(' ') {
            Some((series, _)) if !line.starts_with('#') && VARYING.contains(&name) => {
                out.push_str(series);
                out.push_str(" 0");
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn two_ticks() -> (MetricSet, String) {
    let mut sampler = Sampler::new(fixture_config()).expect("fixture collectors build");
    sampler.collect_once();
    let set = sampler.collect_once();
    let text = String::from_utf8(set.encode_text("fixture-node")).unwrap();
    // Unavailability reasons name fixture paths; the clone's location must not matter.
    let text = text.replace(&fixtures().display().to_string(), "$FIXTURES");
    (set, mask(&text))
}

#[test]
fn fixtures_match_golden_metrics() {
    let (_, text) = two_ticks();
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .expect("golden file exists (run with UPDATE_GOLDEN=1 to create it)");
    if want != text {
        let diff: Vec<String> = want
            .lines()
            .zip(text.lines())
            .filter(|(a, b)| a != b)
            .take(20)
            .map(|(a, b)| format!("- {a}\n+ {b}"))
            .collect();
        panic!(
            "/metrics differs from {} ({} vs {} lines); first differences:\n{}\n\
             rerun with UPDATE_GOLDEN=1 if the change is intended",
            path.display(),
            want.lines().count(),
            text.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn golden_file_passes_promtool() {
    let output = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(golden_path()).unwrap())
        .output()
        .expect("promtool is installed by scripts/setup.sh (Debian package prometheus)");
    let problems = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && problems.trim().is_empty(),
        "promtool: {problems}"
    );
}

fn value(set: &MetricSet, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    set.family(name)?
        .series
        .iter()
        .find(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|s| s.value)
}

fn sum_over_containers(set: &MetricSet, name: &str, extra: &[(&str, &str)]) -> f64 {
    set.family(name)
        .unwrap()
        .series
        .iter()
        .filter(|s| {
            extra
                .iter()
                .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|s| s.value)
        .sum()
}

/// node = Σ containers + system, for every resource that has a node total.
#[test]
fn system_completes_containers_to_node_totals() {
    let (set, _) = two_ticks();
    let busy: f64 = ["user", "nice", "system", "irq", "softirq", "steal"]
        .iter()
        .map(|m| value(&set, node::CPU_SECONDS_TOTAL, &[(label::MODE, m)]).unwrap())
        .sum();
    let cgroup = [(label::SOURCE, source::CGROUP)];
    let cpu = sum_over_containers(&set, container::CPU_SECONDS_TOTAL, &cgroup);
    assert!(
        (cpu - busy).abs() < 1e-6,
        "Σ container CPU {cpu} vs node busy {busy}"
    );
    let system_cpu = value(
        &set,
        container::CPU_SECONDS_TOTAL,
        &[(label::CONTAINER_ID, SYSTEM_CONTAINER)],
    )
    .unwrap();
    // 40 + 0.5 + 5 (v2) + 20 (v1 docker) seconds in containers.
    assert!(
        (busy - system_cpu - 65.5).abs() < 1e-6,
        "system {system_cpu}"
    );

    let disk_read = sum_over_containers(
        &set,
        container::DISK_BYTES_TOTAL,
        &[(label::DIRECTION, "read"), (label::SOURCE, source::CGROUP)],
    );
    let node_read: f64 = set
        .family(node::DISK_BYTES_TOTAL)
        .unwrap()
        .series
        .iter()
        .filter(|s| {
            s.labels
                .iter()
                .any(|(k, v)| *k == label::DIRECTION && v == "read")
        })
        .map(|s| s.value)
        .sum();
    assert_eq!(disk_read, node_read);

    // 6 processes in the fixture /proc: 4 in containers, init and sshd in system.
    assert_eq!(sum_over_containers(&set, container::PROCESSES, &[]), 6.0);
    assert_eq!(
        value(
            &set,
            container::PROCESSES,
            &[(label::CONTAINER_ID, SYSTEM_CONTAINER)]
        ),
        Some(2.0)
    );
}

/// A pod's shared network namespace is reported once; a hostNetwork container has none.
#[test]
fn network_per_namespace_not_per_container() {
    let (set, _) = two_ticks();
    let rx = |id: &str| {
        value(
            &set,
            container::NETWORK_BYTES_TOTAL,
            &[(label::CONTAINER_ID, id), (label::DIRECTION, "receive")],
        )
    };
    let pause = format!("0a0a{}", "0".repeat(60));
    let app = format!("a1a1{}", "1".repeat(60));
    let host_network = format!("beef{}", "2".repeat(60));
    let docker = format!("d0c0{}", "3".repeat(60));
    assert_eq!(
        rx(&pause),
        Some(4_000_000.0),
        "eth0 of the pod, lo left out"
    );
    assert_eq!(rx(&app), None);
    assert_eq!(rx(&host_network), None);
    assert_eq!(rx(&docker), Some(600_000.0));
}
