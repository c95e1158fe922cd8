//! End to end, GPU: two processes in pod-shaped cgroups that the NVML stand-in
//! (exporter/tests/fixtures/fake_nvml, the real ABI, loaded through LD_LIBRARY_PATH as the real
//! library is) reports at 78 % and 15 % of the GPU, the exporter binary's gpu collector, a real
//! Prometheus scraping it, and `greenpipe-estimator serve` with a model that has a GPU term. At
//! every tick the estimator wrote, the containers' power (idle + dynamic, `system` included)
//! adds up to the node's, and the two containers' dynamic power is in their GPU shares' ratio
//! (their processes sleep: the GPU is all they use). The GPU's power, read by the exporter's
//! `nvml` meter, is written as the node's GPU power, and its energy counter grows by it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_common::names::{estimate, label};
use greenpipe_tests::demo_pod::DemoPod;
use greenpipe_tests::fake_nvml::FakeNvml;
use greenpipe_tests::models::file_json;
use greenpipe_tests::{
    free_port, marker_ticks, raw_samples, wait_for, workspace_binary, Guard, Prometheus,
};

const NODE: &str = "gpu-node";

/// The process of a pod running one program.
fn pid_of(pod: &DemoPod) -> u32 {
    let pids = pod.pids();
    assert_eq!(pids.len(), 1, "{}: {pids:?}", pod.cgroup().display());
    pids[0]
}

/// `greenpipe-estimator serve` reading and writing `prom` every second with `models`.
fn serve(prom: &Prometheus, models: &Path) -> Guard {
    let estimator = Command::new(workspace_binary("greenpipe-estimator"))
        .args([
            "serve".to_string(),
            format!("--prometheus-url={}", prom.url),
            format!("--remote-write-url={}", prom.remote_write_url()),
            format!("--models={}", models.display()),
            format!("--web.listen-address=127.0.0.1:{}", free_port()),
            "--interval=1s".into(),
            "--delay=1s".into(),
            "--rate-window=5s".into(),
            "--log.level=warn".into(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("starting the estimator");
    Guard::new("estimator", estimator)
}

/// 3 W + 2 W per busy CPU + 40 W per busy GPU, idle 3 W; attribution by CPU and GPU time.
fn gpu_model() -> String {
    r#"{
      "name": "gpu-linear",
      "selector": {"default": true},
      "features": [
        {"feature": "cpu_seconds_per_second", "mean": 0.0, "scale": 1.0},
        {"feature": "gpu_seconds_per_second", "mean": 0.0, "scale": 1.0}
      ],
      "regressor": {"kind": "linear", "intercept": 3.0, "coefficients": [2.0, 40.0]},
      "idle_power_watts": 3.0,
      "attribution_weights": [
        {"feature": "cpu_seconds_per_second", "watts_per_unit": 2.0},
        {"feature": "gpu_seconds_per_second", "watts_per_unit": 40.0}
      ]
    }"#
    .to_string()
}

#[test]
fn containers_gpu_shares_split_the_node_power_and_add_up_to_it() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "needs root (cgroups)");
    let scope = format!("greenpipe-gpu-e2e-{}", std::process::id());
    let a = DemoPod::start_program(&scope, Path::new("/bin/sleep"), &["600"]).expect("pod a");
    let b = DemoPod::start_program(&scope, Path::new("/bin/sleep"), &["600"]).expect("pod b");
    let dir = tempfile::tempdir().unwrap();
    let nvml = FakeNvml::build(&FakeNvml::one_gpu_state(
        52.0,
        93,
        &[(pid_of(&a), 78), (pid_of(&b), 15)],
    ));

    let port = free_port();
    let exporter = nvml
        .apply(&mut Command::new(workspace_binary("greenpipe-exporter")))
        .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
        .args(["--node-name", NODE, "--collection.interval", "500ms"])
        .args(["--meter", "nvml:auto"])
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the exporter");
    let _exporter = Guard::new("exporter", exporter);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");

    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[gpu_model()])).unwrap();
    let _estimator = serve(&prom, &models);

    // Ticks whose every series landed, with both containers' shares among them.
    let container = |id: &str| {
        format!(
            "{}{{{}=\"{NODE}\",{}=\"{id}\"}}",
            estimate::CONTAINER_POWER_WATTS,
            label::NODE,
            label::CONTAINER_ID
        )
    };
    let ticks = wait_for(Duration::from_secs(90), || {
        let written = marker_ticks(&prom.url);
        let with = |id: &str| -> Option<std::collections::BTreeSet<i64>> {
            let s = raw_samples(&prom.url, &container(id), "10m").ok()?;
            Some(
                s.iter()
                    .flat_map(|s| s.samples.iter().map(|p| p.0))
                    .collect(),
            )
        };
        let both: Vec<i64> = with(&a.container_id)?
            .intersection(&with(&b.container_id)?)
            .filter(|t| written.contains(t))
            .copied()
            .collect();
        (both.len() >= 8).then_some(both)
    })
    .unwrap_or_else(|| {
        panic!(
            "no eight complete ticks with both containers; stored: {:?}",
            prom.query(&format!(
                "{{__name__=~\"greenpipe_.*power.*\",{}=\"{NODE}\"}}",
                label::NODE
            ))
        )
    });

    let node = raw_samples(
        &prom.url,
        &format!(
            "{}{{{}=\"{NODE}\"}}",
            estimate::NODE_POWER_WATTS,
            label::NODE
        ),
        "10m",
    )
    .unwrap();
    let node: BTreeMap<i64, f64> = node.iter().flat_map(|s| s.samples.clone()).collect();
    let shares = raw_samples(
        &prom.url,
        &format!(
            "{}{{{}=\"{NODE}\"}}",
            estimate::CONTAINER_POWER_WATTS,
            label::NODE
        ),
        "10m",
    )
    .unwrap();
    for t in &ticks {
        let total: f64 = shares
            .iter()
            .flat_map(|s| s.samples.iter().filter(|p| p.0 == *t).map(|p| p.1))
            .sum();
        let watts = node[t];
        assert!(
            (total - watts).abs() < 1e-6 * watts,
            "tick {t}: containers add up to {total} W, the node is {watts} W"
        );
        // Once the rate window holds only GPU-busy samples, the GPU term is 40 W x 0.93 (the
        // first ticks' rates see the counters start inside their window).
        if t == ticks.last().unwrap() {
            assert!(watts > 3.0 + 40.0 * 0.9, "tick {t}: node {watts} W");
        }
        let dynamic = |id: &str| -> f64 {
            shares
                .iter()
                .filter(|s| {
                    s.labels.get(label::CONTAINER_ID).map(String::as_str) == Some(id)
                        && s.labels.get(label::COMPONENT).map(String::as_str) == Some("dynamic")
                })
                .flat_map(|s| s.samples.iter().filter(|p| p.0 == *t).map(|p| p.1))
                .sum()
        };
        let (da, db) = (dynamic(&a.container_id), dynamic(&b.container_id));
        let ratio = da / db;
        assert!(
            (ratio - 78.0 / 15.0).abs() < 0.05 * 78.0 / 15.0,
            "tick {t}: dynamic {da} W and {db} W, ratio {ratio}, NVML's 78:15 = {}",
            78.0 / 15.0
        );
    }

    // The NVML meter's 52 W is the node's GPU power at every tick that had a reading, and the
    // GPU energy counter grows by 52 W x the time between two such ticks.
    let gpu_series = |metric: &str| -> BTreeMap<i64, f64> {
        raw_samples(
            &prom.url,
            &format!("{metric}{{{}=\"{NODE}\"}}", label::NODE),
            "10m",
        )
        .unwrap()
        .iter()
        .flat_map(|s| s.samples.clone())
        .collect()
    };
    let gpu_power = gpu_series(estimate::NODE_GPU_POWER_WATTS);
    let gpu_energy = gpu_series(estimate::NODE_GPU_ENERGY_JOULES_TOTAL);
    let last = ticks.last().unwrap();
    assert_eq!(gpu_power.get(last), Some(&52.0), "{gpu_power:?}");
    assert!(gpu_power.values().all(|w| *w == 52.0), "{gpu_power:?}");
    let with_reading: Vec<i64> = ticks
        .iter()
        .copied()
        .filter(|t| gpu_power.contains_key(t))
        .collect();
    let mut checked = 0;
    for pair in with_reading.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b - a != 1000 {
            continue;
        }
        checked += 1;
        let grown = gpu_energy[&b] - gpu_energy[&a];
        assert!(
            (grown - 52.0).abs() < 1e-6,
            "GPU energy grew {grown} J from {a} to {b}"
        );
    }
    assert!(
        checked >= 3,
        "only {checked} consecutive ticks with a GPU reading: {gpu_power:?}"
    );
}

/// A model per Jetson power mode: `serve` selects by `power_mode`, which no node label carries
/// but the gpu collector's `greenpipe_gpu_power_mode_info` does. Node `orin-a` in mode
/// `2:15W` gets the 15 W model; node `orin-b`, without a power mode, the default one.
#[test]
fn models_are_selected_by_the_jetson_power_mode() {
    use greenpipe_common::names::gpu;
    use greenpipe_tests::{gauge_series, now_ms, one_container_node, remote_write};
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 300_000, 1000);
    let mut series = Vec::new();
    for node in ["orin-a", "orin-b"] {
        series.extend(one_container_node(
            node,
            &[("node", node), ("container_id", "c1"), ("pod_uid", "p1")],
            span,
        ));
        // The series node labels are read from, as every exporter writes it.
        series.push(gauge_series(
            greenpipe_common::names::node::CPUS,
            &[("node", node)],
            6.0,
            span,
        ));
    }
    series.push(gauge_series(
        gpu::POWER_MODE_INFO,
        &[("node", "orin-a"), (label::POWER_MODE, "2:15W")],
        1.0,
        span,
    ));
    remote_write(&prom.remote_write_url(), series).expect("pushing the nodes' series");

    let model = |name: &str, selector: &str| {
        format!(
            r#"{{"name": "{name}", "selector": {selector},
              "features": [{{"feature": "cpu_seconds_per_second", "mean": 0.0, "scale": 1.0}}],
              "regressor": {{"kind": "linear", "intercept": 3.0, "coefficients": [2.0]}},
              "idle_power_watts": 3.0,
              "attribution_weights": [{{"feature": "cpu_seconds_per_second", "watts_per_unit": 2.0}}]}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(
        &models,
        file_json(&[
            model("mode-15w", r#"{"labels": {"power_mode": "2:15W"}}"#),
            model("fallback", r#"{"default": true}"#),
        ]),
    )
    .unwrap();
    let _estimator = serve(&prom, &models);
    // The models each node's predictions were written under.
    let models_of = |node: &str| -> Vec<String> {
        raw_samples(
            &prom.url,
            &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
            "10m",
        )
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.labels.get(label::MODEL).cloned())
        .collect()
    };
    let picked = wait_for(Duration::from_secs(60), || {
        let (a, b) = (models_of("orin-a"), models_of("orin-b"));
        (!a.is_empty() && !b.is_empty()).then_some((a, b))
    })
    .expect("predictions for both nodes");
    assert_eq!(
        picked,
        (vec!["mode-15w".to_string()], vec!["fallback".to_string()]),
        "node labels as serve reads them: {:?}",
        prom.query(&format!(
            "max by (node, power_mode) (last_over_time({}[5s]))",
            gpu::POWER_MODE_INFO
        ))
    );
}
