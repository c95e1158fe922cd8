//! Remote write 2.0 against a real Prometheus 3 receiver (3.16, built from source by
//! `scripts/backends.sh build prometheus3`, started here with the 2.0 message accepted): what the
//! receiver stored is read back sample by sample. Prometheus 3's `type-and-unit-labels` feature
//! turns the metadata of a 2.0 series into `__type__` and `__unit__` labels, and
//! `created-timestamp-zero-ingestion` stores a start timestamp as a zero sample, so both are
//! visible in what it stored. The fallback to 1.0 is tried against a Prometheus 3 that takes 1.0
//! only (415) and Debian's Prometheus 2.42, which predates 2.0 (2xx without the written-samples
//! header).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use greenpipe_common::names::{estimate, estimator as own};
use greenpipe_estimator::endpoint::{AuthFlags, Endpoint};
use greenpipe_estimator::remote_write::v2::{self, Description, MetricType};
use greenpipe_estimator::remote_write::{
    compress, BatchLimits, Protocol, RetryPolicy, Sample, Sender, TimeSeries, CONTENT_ENCODING,
    VERSION_HEADER,
};
use greenpipe_estimator::telemetry::Telemetry;
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::prometheus3::Prometheus3;
use greenpipe_tests::{
    by_labels, free_port, marker_ticks, now_ms, one_container_node, raw_samples, remote_write,
    self_metric, test_binary, wait_for, Guard, Prometheus, SeriesByLabels, StoredSeries,
};

/// No scrape targets: it only receives.
const CONFIG: &str = "global:\n  scrape_interval: 15s\n";

fn series(name: &str, labels: &[(&str, &str)], samples: &[(i64, f64)]) -> TimeSeries {
    let mut ts = TimeSeries::new(name, labels);
    ts.samples = samples
        .iter()
        .map(|&(timestamp, value)| Sample { value, timestamp })
        .collect();
    ts
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn a_2_0_request_is_stored_sample_by_sample_with_its_metadata_and_start_timestamp() {
    let p3 = Prometheus3::start(
        &["prometheus.WriteRequest", "io.prometheus.write.v2.Request"],
        &["type-and-unit-labels", "created-timestamp-zero-ingestion"],
        &[],
        CONFIG,
    );
    let t0 = now_ms() / 1000 * 1000 - 60_000;
    let energy: Vec<(i64, f64)> = (1..=5).map(|k| (t0 + k * 1000, 10.0 * k as f64)).collect();
    // A zero value and a negative one: the encoder leaves zero fields out.
    let power = [(t0, 0.0), (t0 + 1000, -1.25), (t0 + 2000, 7.5)];
    let sent = vec![
        series("rw2_test_energy_joules_total", &[("node", "a")], &energy),
        series("rw2_test_power_watts", &[("node", "a")], &power),
    ];
    let describe = |ts: &TimeSeries| -> Option<Description> {
        Some(match ts.label("__name__")? {
            "rw2_test_energy_joules_total" => Description {
                kind: MetricType::Counter,
                help: "Test energy.",
                unit: "joules",
                start_timestamp: t0 - 500,
            },
            _ => Description {
                kind: MetricType::Gauge,
                help: "Test power.",
                unit: "watts",
                start_timestamp: 0,
            },
        })
    };
    let body = compress(&v2::encode_request(&sent, describe));
    let response = reqwest::blocking::Client::new()
        .post(p3.write_url())
        .header("Content-Encoding", CONTENT_ENCODING)
        .header("Content-Type", v2::CONTENT_TYPE)
        .header(VERSION_HEADER, v2::VERSION)
        .body(body)
        .send()
        .unwrap();
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (written, histograms) = (
        header(v2::SAMPLES_WRITTEN_HEADER),
        header(v2::HISTOGRAMS_WRITTEN_HEADER),
    );
    assert!(
        status.is_success(),
        "HTTP {status}: {}\n{}",
        response.text().unwrap_or_default(),
        p3.log()
    );
    assert_eq!(written.as_deref(), Some("8"), "samples written");
    assert_eq!(histograms.as_deref(), Some("0"));

    let mut stored = raw_samples(&p3.url, "{__name__=~\"rw2_test_.*\"}", "10m").unwrap();
    stored.sort_by(|a, b| a.labels.cmp(&b.labels));
    let mut energy_stored = vec![(t0 - 500, 0.0)];
    energy_stored.extend(energy.iter().copied());
    assert_eq!(
        stored,
        vec![
            StoredSeries {
                labels: labels(&[
                    ("__name__", "rw2_test_energy_joules_total"),
                    ("__type__", "counter"),
                    ("__unit__", "joules"),
                    ("node", "a"),
                ]),
                // The start timestamp as a zero sample, then every sample sent.
                samples: energy_stored,
            },
            StoredSeries {
                labels: labels(&[
                    ("__name__", "rw2_test_power_watts"),
                    ("__type__", "gauge"),
                    ("__unit__", "watts"),
                    ("node", "a"),
                ]),
                samples: power.to_vec(),
            },
        ]
    );
}

fn sender(url: &str, telemetry: &Arc<Telemetry>) -> Sender {
    let endpoint = Endpoint::new(
        greenpipe_estimator::USER_AGENT,
        "remote-write",
        url,
        &AuthFlags::default(),
        Duration::from_secs(10),
    )
    .unwrap();
    Sender::new(
        endpoint,
        BatchLimits::default(),
        RetryPolicy::default(),
        telemetry.clone(),
    )
    .with_protocol(Protocol::V2)
}

fn requests(telemetry: &Telemetry, outcome: &str) -> u64 {
    telemetry
        .remote_write_requests
        .with_label_values(&[outcome])
        .get()
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn the_sender_falls_back_to_1_0_on_415_and_counts_what_a_partial_write_left_out() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t0 = now_ms() / 1000 * 1000 - 60_000;
    let node = |t: i64, v: f64| {
        series(
            estimate::NODE_POWER_WATTS,
            &[("node", "s1"), ("model", "m")],
            &[(t, v)],
        )
    };

    // A Prometheus 3 that takes 1.0 only answers 415: the batch goes again as 1.0, and so does
    // every later one.
    let v1_only = Prometheus3::start(&["prometheus.WriteRequest"], &[], &[], CONFIG);
    let telemetry = Arc::new(Telemetry::new());
    let s = sender(&v1_only.write_url(), &telemetry);
    let report = runtime.block_on(s.send(vec![node(t0, 4.0)]));
    assert_eq!((report.written, report.dropped), (1, 0));
    assert_eq!(s.protocol(), Protocol::V1);
    assert_eq!(requests(&telemetry, "415"), 1);
    let report = runtime.block_on(s.send(vec![node(t0 + 1000, 5.0)]));
    assert_eq!((report.written, report.dropped), (1, 0));
    assert_eq!(requests(&telemetry, "415"), 1, "no second 2.0 attempt");
    let stored = raw_samples(&v1_only.url, estimate::NODE_POWER_WATTS, "10m").unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].samples, [(t0, 4.0), (t0 + 1000, 5.0)]);

    // A 2.0 receiver that refuses one sample of three (another value at a stored timestamp)
    // writes the rest and says so: two written, one dropped, and the sender stays on 2.0.
    let p3 = Prometheus3::start(&["io.prometheus.write.v2.Request"], &[], &[], CONFIG);
    let telemetry = Arc::new(Telemetry::new());
    let s = sender(&p3.write_url(), &telemetry);
    let report = runtime.block_on(s.send(vec![node(t0, 4.0)]));
    assert_eq!((report.written, report.dropped), (1, 0));
    let mut second = node(t0, 9.0);
    second.samples.extend([
        Sample {
            value: 6.0,
            timestamp: t0 + 1000,
        },
        Sample {
            value: 7.0,
            timestamp: t0 + 2000,
        },
    ]);
    let report = runtime.block_on(s.send(vec![second]));
    assert_eq!((report.written, report.dropped), (2, 1), "{}", p3.log());
    assert_eq!(s.protocol(), Protocol::V2);
    assert_eq!(
        telemetry
            .samples_dropped
            .with_label_values(&["http_400"])
            .get(),
        1
    );
    let stored = raw_samples(&p3.url, estimate::NODE_POWER_WATTS, "10m").unwrap();
    assert_eq!(
        stored[0].samples,
        [(t0, 4.0), (t0 + 1000, 6.0), (t0 + 2000, 7.0)]
    );
}

fn start_estimator(
    models: &Path,
    source: &str,
    receiver: &str,
    progress: &str,
    log: &Path,
) -> (Guard, String) {
    let port = free_port();
    let child = Command::new(test_binary("greenpipe-estimator"))
        .arg("serve")
        .arg(format!("--prometheus-url={source}"))
        .arg(format!("--remote-write-url={receiver}"))
        .arg(format!("--progress-url={progress}"))
        .arg("--remote-write.protocol=2.0")
        .arg(format!("--models={}", models.display()))
        .args(["--interval=1s", "--delay=1s", "--rate-window=5s"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("starting the estimator");
    (
        Guard::new("estimator", child),
        format!("http://127.0.0.1:{port}/metrics"),
    )
}

/// Every power and energy series the estimator writes.
const OUTPUT_SERIES: &str =
    "{__name__=~\"greenpipe_(node|container)_(power|idle_power|energy)_.*\"}";

/// The estimator's output series in `base`, without the `__type__`/`__unit__` labels, keyed by
/// their labels; samples restricted to `ticks`.
fn output(base: &str, ticks: &BTreeSet<i64>) -> SeriesByLabels {
    // Power and energy names only: the source's feature series (greenpipe_node_cpu_...) live
    // in the same Prometheus 3.
    let mut series = raw_samples(base, OUTPUT_SERIES, "10m").unwrap();
    for s in &mut series {
        s.labels.remove("__type__");
        s.labels.remove("__unit__");
    }
    by_labels(series, Some(ticks))
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn the_estimator_writes_2_0_to_prometheus_3_exactly_what_it_writes_as_1_0() {
    let p3 = Prometheus3::start(
        &["prometheus.WriteRequest", "io.prometheus.write.v2.Request"],
        &["type-and-unit-labels"],
        &[],
        CONFIG,
    );
    let old = Prometheus::start(&[], "1s").expect("debian prometheus");
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 300_000, 1000);
    let ctr = [("node", "r1"), ("container_id", "k1"), ("pod_uid", "p1")];
    remote_write(
        &format!("{}/api/v1/write", p3.url),
        one_container_node("r1", &ctr, span),
    )
    .expect("pushing features");
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("linear-rw2")])).unwrap();
    // Both read the same source. One writes 2.0 to Prometheus 3; the other asks Debian's
    // Prometheus 2.42 for 2.0, gets 2xx without the written-samples header and sends 1.0.
    let (mut a, a_metrics) = start_estimator(
        &models,
        &p3.url,
        &p3.write_url(),
        &p3.url,
        &dir.path().join("v2.log"),
    );
    let (mut b, b_metrics) = start_estimator(
        &models,
        &p3.url,
        &old.remote_write_url(),
        &old.url,
        &dir.path().join("v1.log"),
    );
    let common = wait_for(Duration::from_secs(90), || {
        let common: BTreeSet<i64> = marker_ticks(&p3.url)
            .intersection(&marker_ticks(&old.url))
            .copied()
            .collect();
        (common.len() >= 6).then_some(common)
    })
    .unwrap_or_else(|| {
        panic!(
            "no common ticks; logs:\n{}\n{}",
            std::fs::read_to_string(dir.path().join("v2.log")).unwrap_or_default(),
            std::fs::read_to_string(dir.path().join("v1.log")).unwrap_or_default()
        )
    });
    let a_204 = self_metric(
        &a_metrics,
        own::REMOTE_WRITE_REQUESTS_TOTAL,
        "outcome=\"204\"",
    );
    let a_written = self_metric(&a_metrics, own::SAMPLES_WRITTEN_TOTAL, "");
    let b_written = self_metric(&b_metrics, own::SAMPLES_WRITTEN_TOTAL, "");
    a.terminate();
    b.terminate();
    // Ticks still in flight when the estimators stopped are left out.
    let common: BTreeSet<i64> = common.into_iter().rev().skip(1).collect();

    let v2 = output(&p3.url, &common);
    let v1 = output(&old.url, &common);
    assert!(!v2.is_empty());
    assert_eq!(v2.keys().collect::<Vec<_>>(), v1.keys().collect::<Vec<_>>());
    for (labels, samples) in &v2 {
        assert_eq!(samples.len(), common.len(), "{labels:?}");
        let name = labels["__name__"].as_str();
        if name.ends_with("_total") {
            // Counters start where each estimator started: compare their increases.
            let steps = |s: &[(i64, f64)]| -> Vec<(i64, f64)> {
                s.windows(2).map(|w| (w[1].0, w[1].1 - w[0].1)).collect()
            };
            let (x, y) = (steps(samples.as_slice()), steps(v1[labels].as_slice()));
            for ((t, dx), (_, dy)) in x.iter().zip(&y) {
                assert!((dx - dy).abs() < 1e-9, "{labels:?} at {t}: {dx} vs {dy}");
            }
        } else {
            assert_eq!(samples, &v1[labels], "{labels:?}");
        }
    }
    // The node's prediction: 3 W + 2 W per CPU second per second (the user mode, 1/s).
    let node = labels(&[
        ("__name__", estimate::NODE_POWER_WATTS),
        ("model", "linear-rw2"),
        ("node", "r1"),
    ]);
    assert!(
        v2[&node].iter().all(|&(_, w)| (w - 5.0).abs() < 1e-9),
        "{:?}",
        v2[&node]
    );

    // Only 2.0 carries metadata: Prometheus 3 turned it into labels on every output series.
    let typed = raw_samples(
        &p3.url,
        "{__name__=~\"greenpipe_(node|container)_(power|idle_power|energy)_.*\",__type__=~\"gauge|counter\",__unit__!=\"\"}",
        "10m",
    )
    .unwrap();
    assert_eq!(typed.len(), v2.len());
    for s in &typed {
        let kind = if s.labels["__name__"].ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        assert_eq!(s.labels["__type__"], kind, "{:?}", s.labels);
    }
    assert!(a_204 >= 1.0 && a_written >= 1.0 && b_written >= 1.0);
    let a_log = std::fs::read_to_string(dir.path().join("v2.log")).unwrap();
    let b_log = std::fs::read_to_string(dir.path().join("v1.log")).unwrap();
    assert!(!a_log.contains("does not take remote write 2.0"), "{a_log}");
    assert!(b_log.contains("does not take remote write 2.0"), "{b_log}");
}
