//! The estimator's OTLP output (`serve --otlp.endpoint`) taken by Prometheus 3's own OTLP
//! receiver (3.16, built from source; ignored unless asked for, run by
//! scripts/test-backends.sh) and checked against what the same estimator remote-wrote for the
//! same ticks: the names and labels Prometheus 3 gives OpenTelemetry's `hw.*` metrics with its
//! default translation (the table in docs/estimator.md, "OTLP"), every value, and the
//! containers' shares summing to the host.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_common::names::{estimate, estimator as own};
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::prometheus3::Prometheus3;
use greenpipe_tests::{
    by_labels, free_port, marker_ticks, now_ms, one_container_node, query_api, raw_samples,
    remote_write, self_metric, test_binary, wait_for, Guard,
};

/// The remote-written families the estimator also sends as OTLP, and the names Prometheus 3
/// stores those OTLP metrics under (UCUM `W` and `J` become `watts` and `joules`, a monotonic
/// cumulative sum gains `_total`, dots become underscores).
const NAMES: [(&str, &str); 4] = [
    (estimate::NODE_POWER_WATTS, "hw_host_power_watts"),
    (
        estimate::NODE_ENERGY_JOULES_TOTAL,
        "hw_host_energy_joules_total",
    ),
    (estimate::CONTAINER_POWER_WATTS, "hw_power_watts"),
    (
        estimate::CONTAINER_ENERGY_JOULES_TOTAL,
        "hw_energy_joules_total",
    ),
];

/// The labels Prometheus 3 gives the OTLP twin of a remote-written series: the resource's
/// `service.name` and `service.instance.id` become `job` and `instance`, point attributes keep
/// their names with `_` for `.`.
fn otlp_labels(remote_written: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let name = remote_written["__name__"].as_str();
    let (_, otlp_name) = NAMES
        .iter()
        .find(|(rw, _)| *rw == name)
        .unwrap_or_else(|| panic!("{name} has no OTLP twin"));
    let mut out = BTreeMap::from([
        ("__name__".to_string(), otlp_name.to_string()),
        ("job".to_string(), "greenpipe-estimator".to_string()),
    ]);
    let host = name.starts_with("greenpipe_node_");
    for (key, value) in remote_written {
        let keys: &[&str] = match key.as_str() {
            "__name__" => &[],
            "node" if host => &["instance", "hw_id"],
            "node" => &["instance"],
            "model" => &["greenpipe_model"],
            "container_id" => &["hw_id", "container_id"],
            "pod_uid" => &["k8s_pod_uid"],
            "component" => &["greenpipe_power_component"],
            other => panic!("{name}: label {other} has no OTLP attribute"),
        };
        for k in keys {
            out.insert(k.to_string(), value.clone());
        }
    }
    if !host {
        out.insert("hw_type".to_string(), "container".to_string());
    }
    out
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn prometheus_3_stores_the_otlp_output_as_hw_metrics_equal_to_the_remote_written_ones() {
    let p3 = Prometheus3::start(
        &["prometheus.WriteRequest"],
        &[],
        &["--web.enable-otlp-receiver"],
        "global:\n  scrape_interval: 15s\n",
    );
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 300_000, 1000);
    let ctr = [("node", "o1"), ("container_id", "k1"), ("pod_uid", "p1")];
    remote_write(&p3.write_url(), one_container_node("o1", &ctr, span)).expect("pushing features");
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("linear-otlp")])).unwrap();
    let port = free_port();
    let log = dir.path().join("estimator.log");
    let child = Command::new(test_binary("greenpipe-estimator"))
        .arg("serve")
        .arg(format!("--prometheus-url={}", p3.url))
        .arg(format!("--remote-write-url={}", p3.write_url()))
        .arg(format!("--otlp.endpoint={}", p3.otlp_url()))
        .arg(format!("--models={}", models.display()))
        .args(["--interval=1s", "--delay=1s", "--rate-window=5s"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("starting the estimator");
    let mut estimator = Guard::new("estimator", child);
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let host_power = "hw_host_power_watts{instance=\"o1\"}";
    // Enough ticks written both ways (OTLP goes out from its own task, so it may trail).
    let written = wait_for(Duration::from_secs(90), || {
        let marked = marker_ticks(&p3.url);
        let otlp: BTreeSet<i64> = raw_samples(&p3.url, host_power, "10m")
            .unwrap_or_default()
            .into_iter()
            .flat_map(|s| s.samples.into_iter().map(|(t, _)| t))
            .collect();
        let both: BTreeSet<i64> = marked.intersection(&otlp).copied().collect();
        (both.len() >= 6).then_some(both)
    })
    .unwrap_or_else(|| {
        panic!(
            "fewer than 6 ticks both remote-written and OTLP; estimator log:\n{}\nprometheus log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            p3.log()
        )
    });
    let points = self_metric(&metrics, own::OTLP_POINTS_WRITTEN_TOTAL, "");
    let dropped = self_metric(&metrics, own::OTLP_POINTS_DROPPED_TOTAL, "");
    let ok = self_metric(&metrics, own::OTLP_REQUESTS_TOTAL, "outcome=\"2");
    estimator.terminate();
    // A tick still in flight when the estimator stopped is left out.
    let common: BTreeSet<i64> = written.into_iter().rev().skip(1).collect();

    let rw_selector = format!("{{__name__=~\"{}\"}}", NAMES.map(|(rw, _)| rw).join("|"));
    let otlp_selector = format!(
        "{{__name__=~\"{}\"}}",
        NAMES.map(|(_, otlp)| otlp).join("|")
    );
    let rw = by_labels(
        raw_samples(&p3.url, &rw_selector, "10m").unwrap(),
        Some(&common),
    );
    let otlp = by_labels(
        raw_samples(&p3.url, &otlp_selector, "10m").unwrap(),
        Some(&common),
    );
    // Node power and energy, and at least one container's idle and dynamic power and energy.
    assert!(rw.len() >= 2 + 2 * 2, "{:#?}", rw.keys());
    let expected: BTreeSet<BTreeMap<String, String>> = rw.keys().map(otlp_labels).collect();
    assert_eq!(
        otlp.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "the OTLP series are the remote-written ones, renamed"
    );
    for (labels, samples) in &rw {
        assert_eq!(samples.len(), common.len(), "{labels:?}");
        assert_eq!(&otlp[&otlp_labels(labels)], samples, "{labels:?}");
    }

    // The node's prediction (3 W + 2 W × 1 CPU s/s), and the containers' shares add up to it.
    let host = &otlp[&otlp_labels(&BTreeMap::from([
        (
            "__name__".to_string(),
            estimate::NODE_POWER_WATTS.to_string(),
        ),
        ("model".to_string(), "linear-otlp".to_string()),
        ("node".to_string(), "o1".to_string()),
    ]))];
    assert!(
        host.iter().all(|&(_, w)| (w - 5.0).abs() < 1e-9),
        "{host:?}"
    );
    for &(t, watts) in host {
        let shares: f64 = otlp
            .iter()
            .filter(|(l, _)| l["__name__"] == "hw_power_watts")
            .map(|(_, s)| s.iter().find(|(u, _)| *u == t).expect("a share per tick").1)
            .sum();
        assert!(
            (shares - watts).abs() < 1e-9,
            "at {t}: {shares} W of {watts} W"
        );
    }

    // The resource's other attributes are on `target_info`.
    let info = query_api(
        &p3.url,
        "target_info{job=\"greenpipe-estimator\",instance=\"o1\"}",
    )
    .unwrap();
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0]["metric"]["k8s_node_name"], "o1", "{info:?}");
    assert_eq!(info[0]["metric"]["host_name"], "o1", "{info:?}");

    assert!(
        points > 0.0 && ok > 0.0,
        "points {points}, 2xx answers {ok}"
    );
    assert_eq!(dropped, 0.0);
}
