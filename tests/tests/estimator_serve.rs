//! `greenpipe-estimator serve` against a real Prometheus (and VictoriaMetrics): feature series with
//! known values are remote-written by the test, the estimator reads them through PromQL and writes
//! predictions back; the test checks the arithmetic, the energy balance of every tick, backfill
//! after outages, and the handling of receiver errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::model::ModelFile;
use greenpipe_common::names::{container as c, estimate, estimator as self_metric, node as n};
use greenpipe_estimator::remote_write::{self, TimeSeries};
use greenpipe_tests::models::{file_json, linear_test_model};
use greenpipe_tests::{
    counter_series, free_port, gauge_series, now_ms, raw_samples, remote_write, wait_for,
    workspace_binary, Guard, Prometheus, StoredSeries, VictoriaMetrics,
};

/// Two models: a linear one for every node, an interpolation one for `n2` by name.
static MODELS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    file_json(&[
        linear_test_model(
            r#"[
        {"feature": "cpu_seconds_per_second", "watts_per_unit": 2.0},
        {"feature": "network_bytes_per_second", "watts_per_unit": 0.0000005}
      ]"#,
        ),
        r#"{
      "name": "interp-n2",
      "selector": {"node": "n2"},
      "features": [],
      "regressor": {"kind": "utilisation_interpolation", "cpus": 4.0, "max_watts": 6.0},
      "idle_power_watts": 2.0,
      "attribution_weights": [{"feature": "cpu_seconds_per_second", "watts_per_unit": 1.0}]
    }"#
        .to_string(),
    ])
});

/// A container of the simulated fleet: id, CPU rate, network rate, processes.
struct Ctr(&'static str, f64, Option<f64>, f64);

/// The simulated fleet: node, node CPU rate (None: absent, NaN: broken), node network rate,
/// containers.
fn fleet() -> Vec<(&'static str, Option<f64>, f64, Vec<Ctr>)> {
    vec![
        (
            "n1",
            Some(1.5),
            2e6,
            vec![
                Ctr("c1", 0.5, Some(1e6), 2.0),
                Ctr("c2", 0.7, None, 1.0),
                Ctr("system", 0.3, None, 10.0),
            ],
        ),
        ("n2", Some(0.8), 1e5, vec![Ctr("c3", 0.6, None, 3.0)]),
        (
            "n-nan",
            Some(f64::NAN),
            1e5,
            vec![Ctr("c4", 0.1, None, 1.0)],
        ),
        ("n-missing", None, 1e5, vec![Ctr("c5", 0.2, None, 1.0)]),
    ]
}

/// Feature series of the whole fleet from `from` to `to` (ms), one sample per second, as the
/// exporter would produce them (idle CPU and the loopback device included, to be ignored).
fn fleet_series(from: i64, to: i64) -> Vec<TimeSeries> {
    fleet_series_every(from, to, 1000)
}

/// [`fleet_series`] with one sample every `step_ms`.
fn fleet_series_every(from: i64, to: i64, step_ms: i64) -> Vec<TimeSeries> {
    let span = (from, to, step_ms);
    let mut out = Vec::new();
    for (node, cpu, net, containers) in fleet() {
        if let Some(cpu) = cpu {
            let mut ts = counter_series(
                n::CPU_SECONDS_TOTAL,
                &[("node", node), ("mode", "user")],
                cpu,
                span,
            );
            if cpu.is_nan() {
                ts.samples.iter_mut().for_each(|s| s.value = f64::NAN);
            }
            out.push(ts);
            out.push(counter_series(
                n::CPU_SECONDS_TOTAL,
                &[("node", node), ("mode", "idle")],
                3.0,
                span,
            ));
        }
        for (dir, share) in [("receive", 0.75), ("transmit", 0.25)] {
            out.push(counter_series(
                n::NETWORK_BYTES_TOTAL,
                &[("node", node), ("device", "eth0"), ("direction", dir)],
                net * share,
                span,
            ));
        }
        if node == "n1" {
            // n1 has a power meter reading 6.5 W; the model says 7 W.
            let meter = [("node", node), ("meter", "usb"), ("kind", "um25c")];
            out.push(gauge_series(
                greenpipe_common::names::meter::POWER_WATTS,
                &meter,
                6.5,
                span,
            ));
        }
        out.push(counter_series(
            n::NETWORK_BYTES_TOTAL,
            &[("node", node), ("device", "lo"), ("direction", "receive")],
            9e9,
            span,
        ));
        for Ctr(id, cpu, net, procs) in containers {
            let pod = format!("pod-{id}");
            let labels = [
                ("node", node),
                ("container_id", id),
                ("pod_uid", pod.as_str()),
            ];
            let with = |extra: (&'static str, &'static str)| {
                let mut l = labels.to_vec();
                l.push(extra);
                l
            };
            out.push(counter_series(
                c::CPU_SECONDS_TOTAL,
                &with(("source", "cgroup")),
                cpu,
                span,
            ));
            // The same CPU time seen by a second source must not be counted twice.
            out.push(counter_series(
                c::CPU_SECONDS_TOTAL,
                &with(("source", "bpf")),
                cpu,
                span,
            ));
            if let Some(net) = net {
                out.push(counter_series(
                    c::NETWORK_BYTES_TOTAL,
                    &[
                        labels.as_slice(),
                        &[("direction", "receive"), ("source", "bpf")],
                    ]
                    .concat(),
                    net,
                    span,
                ));
            }
            out.push(gauge_series(c::PROCESSES, &labels, procs, span));
        }
    }
    out
}

/// Expected node power and per-container total shares, computed here from the inputs with the
/// model file's arithmetic (not with the estimator's attribution code).
fn expected(node: &str) -> (f64, BTreeMap<String, f64>) {
    let models = ModelFile::from_json(&MODELS).unwrap();
    let (_, cpu, net, containers) = fleet().into_iter().find(|f| f.0 == node).unwrap();
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, cpu);
    x.set(Feature::NetworkBytesPerSecond, Some(net));
    let model = models.select(node, &BTreeMap::new()).unwrap();
    let watts = model.predict(&x).unwrap();
    let mut shares = BTreeMap::new();
    match node {
        "n1" => {
            // Linear: 3 + 2*1.5 + 0.5*2 = 7 W; idle 3 W by processes 2:1:10; dynamic 4 W by
            // 2*cpu + 5e-7*net = c1 1.5, c2 1.4, system 0.6.
            assert_eq!(watts, 7.0);
            let usage = [("c1", 1.5), ("c2", 1.4), ("system", 0.6)];
            let procs: f64 = containers.iter().map(|c| c.3).sum();
            for (id, u) in usage {
                let p = containers.iter().find(|c| c.0 == id).unwrap().3;
                shares.insert(id.to_string(), 3.0 * p / procs + 4.0 * u / 3.5);
            }
        }
        "n2" => {
            // Interpolation: 2 + (6-2)*0.8/4 = 2.8 W; no `system` reported: system CPU is
            // 0.8 - 0.6 = 0.2, dynamic 0.8 W by CPU 0.6 : 0.2; idle 2 W all to c3 (the only one
            // with a process count).
            assert!((watts - 2.8).abs() < 1e-12);
            shares.insert("c3".into(), 2.0 + 0.8 * 0.6 / 0.8);
            shares.insert("system".into(), 0.8 * 0.2 / 0.8);
        }
        _ => unreachable!(),
    }
    (watts, shares)
}

struct Estimator {
    guard: Guard,
    metrics_url: String,
}

fn start_estimator(
    models: &Path,
    source: &str,
    remote_write_url: &str,
    extra: &[&str],
) -> Estimator {
    let port = free_port();
    let mut args = vec![
        "serve".to_string(),
        format!("--prometheus-url={source}"),
        format!("--remote-write-url={remote_write_url}"),
        format!("--models={}", models.display()),
        "--remote-write.max-backoff=1s".into(),
        format!("--web.listen-address=127.0.0.1:{port}"),
        "--log.level=warn".into(),
    ];
    // Defaults of these tests, unless the caller sets the flag (a caller's --interval keeps
    // the estimator's own --rate-window default, which follows it).
    let given = |flag: &str| extra.iter().any(|e| e.starts_with(flag));
    for default in ["--interval=1s", "--delay=1s", "--rate-window=5s"] {
        let flag = default.split('=').next().unwrap();
        let follows_interval = flag == "--rate-window" && given("--interval");
        if !(given(flag) || follows_interval) {
            args.push(default.into());
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = Command::new(workspace_binary("greenpipe-estimator"))
        .args(&args)
        .stdout(Stdio::null())
        .spawn()
        .expect("starting the estimator");
    Estimator {
        guard: Guard::new("estimator", child),
        metrics_url: format!("http://127.0.0.1:{port}/metrics"),
    }
}

/// Stops `est`, keeps it down for `down`, starts it again with the same flags and waits (up to
/// `timeout`) until n1 has a tick written after the restart.
fn restart_and_catch_up(
    mut est: Estimator,
    down: Duration,
    models: &Path,
    prom: &Prometheus,
    flags: &[&str],
    timeout: Duration,
) -> Estimator {
    est.guard.terminate();
    std::thread::sleep(down);
    let restarted = now_ms();
    let est = start_estimator(models, &prom.url, &prom.remote_write_url(), flags);
    wait_for(timeout, || {
        (node_power_ticks(&prom.url, "n1").last()?.0 >= restarted).then_some(())
    })
    .expect("the restarted estimator catches up");
    est
}

impl Estimator {
    /// Sum of a self metric's series whose label text contains `labels` (0 when absent).
    fn metric(&self, name: &str, labels: &str) -> f64 {
        greenpipe_tests::self_metric(&self.metrics_url, name, labels)
    }
}

fn model_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("models.json");
    std::fs::write(&path, &*MODELS).unwrap();
    path
}

/// Pushes the fleet's features from 2 minutes ago to 5 minutes ahead, so the estimator always
/// has data, also for ticks it backfills after an outage.
fn push_fleet(url: &str) {
    let now = now_ms() / 1000 * 1000;
    remote_write(url, fleet_series(now - 120_000, now + 300_000))
        .expect("pushing the fleet's features");
}

fn by_timestamp(series: &[StoredSeries]) -> BTreeMap<i64, Vec<f64>> {
    let mut out: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for s in series {
        for &(t, v) in &s.samples {
            out.entry(t).or_default().push(v);
        }
    }
    out
}

/// Every tick of `node`: the node sample and the sum of its container shares agree, and ticks are
/// consecutive seconds without duplicates. Returns the tick times.
/// The stored predicted-power samples of `node` over the last 10 minutes (none if not yet there).
fn node_power_ticks(base: &str, node: &str) -> Vec<(i64, f64)> {
    raw_samples(
        base,
        &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
        "10m",
    )
    .ok()
    .and_then(|s| s.first().map(|s| s.samples.clone()))
    .unwrap_or_default()
}

fn check_balance_and_continuity(base: &str, node: &str, window: &str) -> Vec<i64> {
    check_balance_and_continuity_every(base, node, window, 1000)
}

/// [`check_balance_and_continuity`] for ticks `step_ms` apart.
fn check_balance_and_continuity_every(
    base: &str,
    node: &str,
    window: &str,
    step_ms: i64,
) -> Vec<i64> {
    let nodes = raw_samples(
        base,
        &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
        window,
    )
    .unwrap();
    assert_eq!(
        nodes.len(),
        1,
        "one node power series for {node}: {nodes:?}"
    );
    let times: Vec<i64> = nodes[0].samples.iter().map(|s| s.0).collect();
    for w in times.windows(2) {
        assert_eq!(
            w[1] - w[0],
            step_ms,
            "gap or duplicate between ticks {} and {}",
            w[0],
            w[1]
        );
    }
    let shares = by_timestamp(
        &raw_samples(
            base,
            &format!("{}{{node=\"{node}\"}}", estimate::CONTAINER_POWER_WATTS),
            window,
        )
        .unwrap(),
    );
    for &(t, watts) in &nodes[0].samples {
        let parts = shares
            .get(&t)
            .unwrap_or_else(|| panic!("no container shares at tick {t}"));
        let sum: f64 = parts.iter().sum();
        assert!(
            (sum - watts).abs() <= 1e-9 * watts.max(1.0),
            "tick {t}: containers {sum} != node {watts}"
        );
    }
    times
}

/// An instant query at `time_ms`; the first sample's value.
fn query_at(base: &str, promql: &str, time_ms: i64) -> Option<f64> {
    let body: serde_json::Value = reqwest::blocking::Client::new()
        .get(format!("{base}/api/v1/query"))
        .query(&[
            ("query", promql.to_string()),
            ("time", format!("{}", time_ms as f64 / 1000.0)),
        ])
        .send()
        .ok()?
        .json()
        .ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// The energy counters of `node` (node and every container component): written at the same
/// ticks as their power series, each tick adding exactly power x tick length (so they never go
/// back, across restarts and outages included), and `increase()` over a window equal to the
/// integral of power over that window, to within one tick's energy. Returns the node's counter
/// samples.
fn check_energy(base: &str, node: &str, window: &str, step_ms: i64) -> Vec<(i64, f64)> {
    let step_s = step_ms as f64 / 1000.0;
    let pairs = [
        (
            estimate::NODE_POWER_WATTS,
            estimate::NODE_ENERGY_JOULES_TOTAL,
        ),
        (
            estimate::CONTAINER_POWER_WATTS,
            estimate::CONTAINER_ENERGY_JOULES_TOTAL,
        ),
    ];
    let mut node_energy = Vec::new();
    for (power, energy) in pairs {
        let powers = raw_samples(base, &format!("{power}{{node=\"{node}\"}}"), window).unwrap();
        let energies = raw_samples(base, &format!("{energy}{{node=\"{node}\"}}"), window).unwrap();
        assert!(!powers.is_empty(), "{power} of {node}");
        assert_eq!(powers.len(), energies.len(), "one {energy} per {power}");
        for p in &powers {
            let mut labels = p.labels.clone();
            labels.insert("__name__".into(), energy.into());
            let e = energies
                .iter()
                .find(|e| e.labels == labels)
                .unwrap_or_else(|| panic!("no {energy} for {labels:?}"));
            let watts: BTreeMap<i64, f64> = p.samples.iter().copied().collect();
            let joules: BTreeMap<i64, f64> = e.samples.iter().copied().collect();
            for w in e.samples.windows(2) {
                let ((t0, e0), (t1, e1)) = (w[0], w[1]);
                assert!(e1 >= e0, "{labels:?} went back at {t1}: {e0} -> {e1}");
                if t1 - t0 == step_ms {
                    let p1 = watts[&t1];
                    assert!(
                        (e1 - e0 - p1 * step_s).abs() <= 1e-9 * e1.max(1.0),
                        "{labels:?} at {t1}: +{} J for {p1} W over {step_s} s",
                        e1 - e0
                    );
                }
            }
            let common = watts.keys().filter(|t| joules.contains_key(t)).count();
            assert!(common + 2 >= watts.len().min(joules.len()), "same ticks");
            if power == estimate::NODE_POWER_WATTS {
                node_energy = e.samples.clone();
                // increase() over a third of the ticks (at least 4, at most 30), evaluated at
                // ticks, against Σ power x step.
                let ticks: Vec<i64> = p.samples.iter().map(|s| s.0).collect();
                let span = step_ms * (ticks.len() as i64 / 3).clamp(4, 30);
                let max_watts = watts.values().cloned().fold(0.0, f64::max);
                let mut checked = 0;
                for &t in ticks.iter().filter(|t| **t - span >= ticks[0]).step_by(7) {
                    let integral: f64 =
                        watts.range(t - span + 1..=t).map(|(_, w)| w * step_s).sum();
                    let increase = query_at(
                        base,
                        &format!("increase({energy}{{node=\"{node}\"}}[{span}ms])"),
                        t,
                    )
                    .expect("increase() answers");
                    assert!(
                        (increase - integral).abs() <= max_watts * step_s + 1e-9,
                        "increase at {t}: {increase} J, integral of power {integral} J"
                    );
                    checked += 1;
                }
                assert!(checked > 0, "no window of {span} ms to check increase() on");
            }
        }
    }
    node_energy
}

#[test]
fn predictions_and_attributions_land_and_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_fleet(&prom.remote_write_url());
    let est = start_estimator(
        &model_file(dir.path()),
        &prom.url,
        &prom.remote_write_url(),
        &[],
    );
    wait_for(Duration::from_secs(60), || {
        let s = raw_samples(
            &prom.url,
            &format!("{}{{node=\"n1\"}}", estimate::NODE_POWER_WATTS),
            "1m",
        )
        .ok()?;
        (s.first()?.samples.len() >= 8).then_some(())
    })
    .expect("8 ticks of n1 predictions reach Prometheus");

    for node in ["n1", "n2"] {
        let (watts, shares) = expected(node);
        let got = raw_samples(
            &prom.url,
            &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
            "1m",
        )
        .unwrap();
        let model = if node == "n2" {
            "interp-n2"
        } else {
            "linear-test"
        };
        assert_eq!(got[0].labels["model"], model);
        for (t, v) in &got[0].samples {
            assert!(
                (v - watts).abs() < 1e-9,
                "{node} at {t}: {v} W, expected {watts} W"
            );
        }
        let containers = raw_samples(
            &prom.url,
            &format!("{}{{node=\"{node}\"}}", estimate::CONTAINER_POWER_WATTS),
            "1m",
        )
        .unwrap();
        let last_t = got[0].samples.last().unwrap().0;
        let mut total_by_container: BTreeMap<String, f64> = BTreeMap::new();
        for s in &containers {
            assert_eq!(s.labels["model"], model);
            if let Some((_, v)) = s.samples.iter().find(|(t, _)| *t == last_t) {
                *total_by_container
                    .entry(s.labels["container_id"].clone())
                    .or_default() += v;
            }
            if s.labels["container_id"] != "system" {
                assert_eq!(
                    s.labels["pod_uid"],
                    format!("pod-{}", s.labels["container_id"])
                );
            }
        }
        assert_eq!(
            total_by_container.keys().collect::<Vec<_>>(),
            shares.keys().collect::<Vec<_>>()
        );
        for (id, w) in &shares {
            assert!(
                (total_by_container[id] - w).abs() < 1e-9,
                "{node}/{id}: {} W, expected {w} W",
                total_by_container[id]
            );
        }
        check_balance_and_continuity(&prom.url, node, "1m");
    }

    // Live prediction error against the meter where there is one (n1), none elsewhere.
    let error = |node: &str| {
        raw_samples(
            &prom.url,
            &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_ERROR_WATTS),
            "1m",
        )
        .unwrap()
    };
    let n1_error = error("n1");
    assert!(
        n1_error[0]
            .samples
            .iter()
            .all(|(_, v)| (v - 0.5).abs() < 1e-9),
        "{n1_error:?}"
    );
    assert!(error("n2").is_empty());

    // Broken nodes are skipped with a reason; the others went on (checked above).
    for node in ["n-nan", "n-missing"] {
        let s = raw_samples(
            &prom.url,
            &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
            "1m",
        )
        .unwrap();
        assert!(s.is_empty(), "{node} must not be estimated: {s:?}");
    }
    assert!(
        est.metric(
            self_metric::NODES_SKIPPED_TOTAL,
            "reason=\"non_finite_feature\""
        ) > 0.0
    );
    assert!(
        est.metric(
            self_metric::NODES_SKIPPED_TOTAL,
            "reason=\"missing_feature\""
        ) > 0.0
    );
    // A fixed number of queries per tick, whatever the fleet size.
    let ticks = est.metric(self_metric::TICKS_TOTAL, "");
    let node_queries = est.metric(self_metric::QUERIES_TOTAL, "query=\"node_features\"");
    assert!(
        ticks >= 8.0 && node_queries <= ticks,
        "{node_queries} node queries for {ticks} ticks"
    );
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
    assert_eq!(est.metric(self_metric::MODELS_LOADED, ""), 2.0);
}

#[test]
fn outages_of_prometheus_and_of_the_estimator_are_backfilled_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_fleet(&prom.remote_write_url());
    let models = model_file(dir.path());
    let mut est = start_estimator(&models, &prom.url, &prom.remote_write_url(), &[]);
    let ticks_of_n1 = |prom: &Prometheus| node_power_ticks(&prom.url, "n1");
    wait_for(Duration::from_secs(60), || {
        (ticks_of_n1(&prom).len() >= 5).then_some(())
    })
    .expect("first ticks");

    prom.stop();
    std::thread::sleep(Duration::from_secs(30));
    let back = now_ms();
    prom.spawn().expect("prometheus restarts");
    wait_for(Duration::from_secs(90), || {
        (ticks_of_n1(&prom).last()?.0 >= back).then_some(())
    })
    .expect("the estimator catches up after Prometheus comes back");

    // The estimator itself stops for 10 s.
    est.guard.terminate();
    std::thread::sleep(Duration::from_secs(10));
    let restarted = now_ms();
    est = start_estimator(&models, &prom.url, &prom.remote_write_url(), &[]);
    wait_for(Duration::from_secs(60), || {
        (ticks_of_n1(&prom).last()?.0 >= restarted).then_some(())
    })
    .expect("the restarted estimator catches up");

    let times = check_balance_and_continuity(&prom.url, "n1", "10m");
    // The counters went on across both outages and the restart, without a reset.
    let energy = check_energy(&prom.url, "n1", "10m", 1000);
    assert_eq!(energy.len(), times.len(), "an energy sample at every tick");
    check_energy(&prom.url, "n2", "10m", 1000);
    assert!(
        times.len() >= 45,
        "ticks before, during and after both outages: {} from {} to {}",
        times.len(),
        times[0],
        times[times.len() - 1]
    );
    assert!(
        est.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 5.0,
        "the restarted estimator backfilled"
    );
    assert_eq!(
        est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""),
        0.0,
        "no rejected request"
    );
    assert_eq!(
        est.metric(self_metric::REMOTE_WRITE_REQUESTS_TOTAL, "outcome=\"4"),
        0.0
    );
}

/// What the in-process receiver got, and what it answers.
#[derive(Default)]
struct Received {
    /// Marker samples (tick times) accepted.
    ticks: Vec<i64>,
    /// Node power samples accepted `(tick, node)`.
    node_samples: Vec<(i64, String)>,
    /// Header problems seen.
    bad_headers: Vec<String>,
}

fn start_receiver(status: Arc<AtomicU16>, received: Arc<Mutex<Received>>) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new().route(
                "/api/v1/write",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let status = status.clone();
                    let received = received.clone();
                    async move {
                        let code = status.load(Ordering::SeqCst);
                        let mut got = received.lock().unwrap();
                        for (h, v) in [
                            ("content-encoding", "snappy"),
                            ("content-type", "application/x-protobuf"),
                            ("x-prometheus-remote-write-version", "0.1.0"),
                        ] {
                            if headers.get(h).and_then(|x| x.to_str().ok()) != Some(v) {
                                got.bad_headers.push(format!("{h}: {:?}", headers.get(h)));
                            }
                        }
                        if code == 200 {
                            let request =
                                remote_write::decode(&body).expect("a valid snappy protobuf body");
                            for ts in request.timeseries {
                                let name = ts.label("__name__").unwrap_or_default().to_string();
                                for s in &ts.samples {
                                    if name == estimate::TICK_TIMESTAMP_SECONDS {
                                        got.ticks.push(s.timestamp);
                                    } else if name == estimate::NODE_POWER_WATTS {
                                        got.node_samples.push((
                                            s.timestamp,
                                            ts.label("node").unwrap().to_string(),
                                        ));
                                    }
                                }
                            }
                        }
                        (
                            StatusCode::from_u16(code).unwrap(),
                            "answer from the test receiver",
                        )
                    }
                }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    url
}

#[test]
fn receiver_errors_5xx_are_retried_and_4xx_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_fleet(&prom.remote_write_url());
    let status = Arc::new(AtomicU16::new(200));
    let received = Arc::new(Mutex::new(Received::default()));
    let url = start_receiver(status.clone(), received.clone());
    let est = start_estimator(&model_file(dir.path()), &prom.url, &url, &[]);
    let ticks = |r: &Arc<Mutex<Received>>| r.lock().unwrap().ticks.len();
    wait_for(Duration::from_secs(60), || {
        (ticks(&received) >= 3).then_some(())
    })
    .expect("first ticks");

    // 500 for 5 s: retried, nothing lost.
    status.store(500, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(5));
    status.store(200, Ordering::SeqCst);
    let resumed = now_ms();
    wait_for(Duration::from_secs(60), || {
        (*received.lock().unwrap().ticks.last()? >= resumed).then_some(())
    })
    .expect("ticks arrive again after the 500s");
    {
        let got = received.lock().unwrap();
        assert!(got.bad_headers.is_empty(), "{:?}", got.bad_headers);
        for w in got.ticks.windows(2) {
            assert_eq!(w[1] - w[0], 1000, "tick lost or repeated around the 500s");
        }
        let n1: Vec<i64> = got
            .node_samples
            .iter()
            .filter(|s| s.1 == "n1")
            .map(|s| s.0)
            .collect();
        assert_eq!(n1, got.ticks, "n1 estimated at every tick, once");
    }
    assert!(est.metric(self_metric::SAMPLES_RETRIED_TOTAL, "") > 0.0);
    assert!(est.metric(self_metric::REMOTE_WRITE_REQUESTS_TOTAL, "outcome=\"500\"") > 0.0);
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);

    // 400 for 3 s: dropped and counted, not retried; the estimator goes on.
    let before = ticks(&received);
    status.store(400, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(3));
    status.store(200, Ordering::SeqCst);
    let resumed = now_ms();
    wait_for(Duration::from_secs(30), || {
        (*received.lock().unwrap().ticks.last()? >= resumed).then_some(())
    })
    .expect("ticks arrive again after the 400s");
    let dropped = est.metric(self_metric::SAMPLES_DROPPED_TOTAL, "reason=\"http_400\"");
    let bad_requests = est.metric(self_metric::REMOTE_WRITE_REQUESTS_TOTAL, "outcome=\"400\"");
    assert!(
        dropped > 0.0 && bad_requests > 0.0,
        "dropped {dropped}, 400s {bad_requests}"
    );
    let got = received.lock().unwrap();
    let gap = got
        .ticks
        .windows(2)
        .skip(before.saturating_sub(1))
        .any(|w| w[1] - w[0] > 1000);
    assert!(gap, "the ticks refused with 400 were not resent");
}

#[test]
fn victoria_metrics_accepts_the_same_writes_and_serves_the_resume_point() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_fleet(&prom.remote_write_url());
    let vm = VictoriaMetrics::start().expect("victoria-metrics");
    let models = model_file(dir.path());
    let progress = format!("--progress-url={}", vm.url);
    let mut est = start_estimator(&models, &prom.url, &vm.remote_write_url(), &[&progress]);
    let ticks_of_n1 = || node_power_ticks(&vm.url, "n1");
    wait_for(Duration::from_secs(60), || {
        (ticks_of_n1().len() >= 5).then_some(())
    })
    .expect("ticks reach VictoriaMetrics");
    est.guard.terminate();
    std::thread::sleep(Duration::from_secs(5));
    let restarted = now_ms();
    est = start_estimator(&models, &prom.url, &vm.remote_write_url(), &[&progress]);
    wait_for(Duration::from_secs(60), || {
        (ticks_of_n1().last()?.0 >= restarted).then_some(())
    })
    .expect("the restarted estimator catches up in VictoriaMetrics");
    let (watts, _) = expected("n1");
    assert!(ticks_of_n1().iter().all(|(_, v)| (v - watts).abs() < 1e-9));
    check_balance_and_continuity(&vm.url, "n1", "10m");
    assert!(est.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 3.0);
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
}

#[test]
fn malformed_or_mismatched_model_files_fail_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("truncated.json", &MODELS[..40], "model file is not valid"),
        (
            "version.json",
            &MODELS.replace("\"schema_version\": 1", "\"schema_version\": 9"),
            "schema_version 9",
        ),
        (
            "kind.json",
            &MODELS.replace("\"linear\"", "\"hologram\""),
            "hologram",
        ),
        (
            "coefficients.json",
            &MODELS.replace("[2.0, 0.5]", "[2.0]"),
            "1 coefficients for 2 inputs",
        ),
        (
            "weights.json",
            &MODELS.replace("0.0000005", "-1.0"),
            "must be finite and >= 0",
        ),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new(workspace_binary("greenpipe-estimator"))
            .args([
                "serve",
                "--prometheus-url=http://127.0.0.1:1",
                "--remote-write-url=http://127.0.0.1:1/api/v1/write",
                "--web.listen-address=127.0.0.1:0",
            ])
            .arg(format!("--models={}", path.display()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(expected) && stderr.contains(name),
            "{name}: {expected:?} not in {stderr}"
        );
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("running a setup command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn reads_and_writes_over_tls_with_a_custom_ca_and_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    // A private CA and a server certificate for 127.0.0.1, as an operator's PKI would issue.
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=greenpipe-test-ca", "-keyout"])
        .arg(p("ca.key"))
        .arg("-out")
        .arg(p("ca.pem")));
    run(Command::new("openssl")
        .args([
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
        ])
        .arg(p("server.key"))
        .arg("-out")
        .arg(p("server.csr")));
    std::fs::write(p("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial", "-in"])
        .arg(p("server.csr"))
        .arg("-CA")
        .arg(p("ca.pem"))
        .arg("-CAkey")
        .arg(p("ca.key"))
        .arg("-out")
        .arg(p("server.pem"))
        .arg("-extfile")
        .arg(p("san.ext")));
    // Prometheus' web config wants a bcrypt hash of the password.
    let hash = Command::new("python3")
        .args([
            "-c",
            "import crypt; print(crypt.crypt('s3cret', crypt.mksalt(crypt.METHOD_BLOWFISH)))",
        ])
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap().trim().to_string();
    assert!(hash.starts_with("$2"), "bcrypt hash: {hash:?}");
    std::fs::write(
        p("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  greenpipe: '{hash}'\n",
            p("server.pem").display(),
            p("server.key").display()
        ),
    )
    .unwrap();
    std::fs::write(p("prometheus.yml"), "global:\n  scrape_interval: 1s\n").unwrap();
    std::fs::write(p("password"), "s3cret\n").unwrap();
    let port = free_port();
    let base = format!("https://127.0.0.1:{port}");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", p("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", p("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!("--web.config.file={}", p("web.yml").display()))
        .arg("--web.enable-remote-write-receiver")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(p("prometheus.log")).unwrap())
        .spawn()
        .expect("starting prometheus");
    let _prometheus = Guard::new("prometheus-tls", child);
    let ca = reqwest::Certificate::from_pem(&std::fs::read(p("ca.pem")).unwrap()).unwrap();
    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let get = |path: &str, query: &[(&str, &str)]| {
        client
            .get(format!("{base}{path}"))
            .query(query)
            .basic_auth("greenpipe", Some("s3cret"))
            .send()
    };
    wait_for(Duration::from_secs(30), || {
        get("/-/ready", &[])
            .ok()
            .filter(|r| r.status().is_success())
    })
    .unwrap_or_else(|| {
        panic!(
            "TLS prometheus not ready: {}",
            std::fs::read_to_string(p("prometheus.log")).unwrap()
        )
    });
    let unauthenticated = client
        .get(format!("{base}/api/v1/query?query=up"))
        .send()
        .unwrap();
    assert_eq!(
        unauthenticated.status().as_u16(),
        401,
        "the server really demands credentials"
    );

    let now = now_ms() / 1000 * 1000;
    for batch in remote_write::batches(
        fleet_series(now - 120_000, now + 300_000),
        Default::default(),
    ) {
        let r = client
            .post(format!("{base}/api/v1/write"))
            .basic_auth("greenpipe", Some("s3cret"))
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(remote_write::encode(batch))
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }
    let auth = |endpoint: &str| {
        [
            format!("--{endpoint}.username=greenpipe"),
            format!("--{endpoint}.password-file={}", p("password").display()),
            format!("--{endpoint}.ca-file={}", p("ca.pem").display()),
        ]
    };
    let args: Vec<String> = auth("prometheus")
        .into_iter()
        .chain(auth("remote-write"))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let est = start_estimator(
        &model_file(dir.path()),
        &base,
        &format!("{base}/api/v1/write"),
        &args,
    );
    let (watts, _) = expected("n1");
    let got = wait_for(Duration::from_secs(60), || {
        let body: serde_json::Value = get(
            "/api/v1/query",
            &[("query", "greenpipe_node_power_watts{node=\"n1\"}")],
        )
        .ok()?
        .json()
        .ok()?;
        body["data"]["result"][0]["value"][1]
            .as_str()?
            .parse::<f64>()
            .ok()
    })
    .expect("predictions written over TLS with basic auth reach Prometheus");
    assert!((got - watts).abs() < 1e-9, "{got} vs {watts}");
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
}

#[test]
fn five_ticks_read_and_written_at_a_time_land_once_each_and_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_fleet(&prom.remote_write_url());
    let models = model_file(dir.path());
    // One read and one write per 5 ticks: every series of a write carries 5 samples.
    let flags = ["--read.ticks-per-query=5"];
    let est = start_estimator(&models, &prom.url, &prom.remote_write_url(), &flags);
    wait_for(Duration::from_secs(60), || {
        (node_power_ticks(&prom.url, "n1").len() >= 10).then_some(())
    })
    .expect("two groups of five ticks");
    let groups = est.metric(self_metric::REMOTE_WRITE_REQUESTS_TOTAL, "outcome=\"2");
    let ticks = est.metric(self_metric::TICKS_TOTAL, "");
    assert!(
        ticks >= 10.0 && groups <= ticks / 5.0 + 1.0,
        "{ticks} ticks went out in {groups} requests"
    );
    let est = restart_and_catch_up(
        est,
        Duration::from_secs(8),
        &models,
        &prom,
        &flags,
        Duration::from_secs(60),
    );
    for node in ["n1", "n2"] {
        let (watts, _) = expected(node);
        let ticks = node_power_ticks(&prom.url, node);
        assert!(
            ticks.iter().all(|(_, v)| (v - watts).abs() < 1e-9),
            "{node}: {ticks:?}"
        );
        let times = check_balance_and_continuity(&prom.url, node, "10m");
        assert!(times.len() >= 18, "{node}: {times:?}");
        check_energy(&prom.url, node, "10m", 1000);
    }
    assert!(est.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 5.0);
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
}

#[test]
fn fifteen_second_ticks_conserve_power_backfill_and_count_energy() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "15s").expect("prometheus");
    // Scrapes every 15 s, as most clusters do; 10 minutes of history and 5 ahead.
    let now = now_ms() / 15_000 * 15_000;
    remote_write(
        &prom.remote_write_url(),
        fleet_series_every(now - 600_000, now + 300_000, 15_000),
    )
    .unwrap();
    let models = model_file(dir.path());
    // --rate-window defaults to 4 x 15 s: four scrapes per rate().
    let flags = ["--interval=15s", "--delay=2s"];
    let est = start_estimator(&models, &prom.url, &prom.remote_write_url(), &flags);
    wait_for(Duration::from_secs(90), || {
        (node_power_ticks(&prom.url, "n1").len() >= 2).then_some(())
    })
    .expect("two 15 s ticks");
    // Down for more than two ticks; the restarted estimator backfills them.
    let est = restart_and_catch_up(
        est,
        Duration::from_secs(35),
        &models,
        &prom,
        &flags,
        Duration::from_secs(90),
    );
    for node in ["n1", "n2"] {
        let (watts, _) = expected(node);
        let ticks = node_power_ticks(&prom.url, node);
        assert!(
            ticks
                .iter()
                .all(|(t, v)| t % 15_000 == 0 && (v - watts).abs() < 1e-9),
            "{node}: {ticks:?}"
        );
        let times = check_balance_and_continuity_every(&prom.url, node, "10m", 15_000);
        assert!(times.len() >= 5, "{node}: {times:?}");
        check_energy(&prom.url, node, "10m", 15_000);
    }
    // The tick that is ready at the restart is live; the ones before it were backfilled.
    assert!(est.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 1.0);
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
}

#[test]
fn victoria_metrics_as_source_and_receiver_with_its_default_latency_offset_and_an_outage() {
    let dir = tempfile::tempdir().unwrap();
    // VictoriaMetrics as shipped: -search.latencyOffset 30s hides the newest samples from
    // queries; the engine's default --delay (32 s) waits them out.
    let mut vm = VictoriaMetrics::start_with_latency_offset(None).expect("victoria-metrics");
    push_fleet(&vm.remote_write_url());
    let models = model_file(dir.path());
    let flags = [
        "--prometheus.engine=victoriametrics",
        "--delay=32s",
        &format!("--progress-url={}", vm.url),
    ];
    // --delay is the engine's default; spelled out because start_estimator sets 1s otherwise.
    let est = start_estimator(&models, &vm.url, &vm.remote_write_url(), &flags);
    let ticks_of_n1 = |vm: &VictoriaMetrics| node_power_ticks(&vm.url, "n1");
    wait_for(Duration::from_secs(120), || {
        (ticks_of_n1(&vm).len() >= 5).then_some(())
    })
    .expect("ticks read from and written to VictoriaMetrics");

    // Source and receiver down for 20 s: the estimator retries, then backfills every tick.
    vm.stop();
    std::thread::sleep(Duration::from_secs(20));
    let back = now_ms();
    vm.spawn().expect("victoria-metrics restarts");
    wait_for(Duration::from_secs(120), || {
        (ticks_of_n1(&vm).last()?.0 >= back - 30_000).then_some(())
    })
    .expect("the estimator catches up after the outage");
    let (watts, _) = expected("n1");
    let ticks = ticks_of_n1(&vm);
    assert!(
        ticks.iter().all(|(_, v)| (v - watts).abs() < 1e-9),
        "{ticks:?}"
    );
    let times = check_balance_and_continuity(&vm.url, "n1", "10m");
    assert!(
        times.len() >= 25,
        "ticks before, during and after: {times:?}"
    );
    check_energy(&vm.url, "n1", "10m", 1000);
    assert!(est.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 10.0);
    assert!(
        est.metric(self_metric::QUERIES_TOTAL, "outcome=\"network_error\"") > 0.0,
        "the outage was seen as network errors"
    );
    assert_eq!(est.metric(self_metric::SAMPLES_DROPPED_TOTAL, ""), 0.0);
}
