//! Meter-assisted recalibration (issue 18) against a real Prometheus:
//!
//! - drift end to end: an **emulated** closed-loop UM25C (a test fixture whose power follows
//!   this machine's real load) read by the real exporter, scraped by Prometheus, estimated by
//!   `serve`, watched by `recalibrate`; the meter's dynamic power grows 15 % mid-run, the live
//!   error crosses the threshold, one refit is accepted, `serve` switches to the new version at
//!   a tick boundary, and the stored power series has every tick exactly once;
//! - no drift: the same loop with a noisy, unchanged meter never triggers a refit;
//! - a refit worse on the original validation traces is rejected and nothing is written (and,
//!   with a looser margin, the same refit is accepted with its lineage);
//! - a corrupt model version dropped into the model directory (and one needing a feature the
//!   node lacks) is refused, SIGHUP re-reads without ending `serve`, predictions go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::model::{ModelFile, Recalibration};
use greenpipe_common::names::recalibrate as rc;
use greenpipe_common::names::{container as c, estimate, estimator as est, meter, node as n};
use greenpipe_common::trace::{write_trace, TraceRow};
use greenpipe_estimator::remote_write::TimeSeries;
use greenpipe_tests::closed_loop_meter::{
    ClosedLoopMeter, LoopSettings, PowerFunction, SwingingLoad,
};
use greenpipe_tests::{
    counter_series, free_port, gauge_series, now_ms, raw_samples, remote_write, series_of,
    spawn_exporter, wait_for, workspace_binary, Guard, Prometheus,
};

/// A linear model of CPU only: `intercept + coefficient * cpu`.
fn linear_model(name: &str, selector: &str, intercept: f64, coefficient: f64) -> String {
    format!(
        r#"{{
  "schema_version": 1,
  "models": [{{
    "name": "{name}",
    "selector": {selector},
    "features": [{{"feature": "cpu_seconds_per_second", "mean": 0.0, "scale": 1.0}}],
    "regressor": {{"kind": "linear", "intercept": {intercept}, "coefficients": [{coefficient}]}},
    "idle_power_watts": {intercept},
    "attribution_weights": [{{"feature": "cpu_seconds_per_second", "watts_per_unit": {coefficient}}}]
  }}]
}}"#
    )
}

/// A trace of the machine before any drift: `idle + per_cpu * cpu` over CPU 0..2, with a
/// deterministic ±1 % wobble (what "the original validation traces" are for this model).
fn validation_trace(dir: &Path, node: &str, idle: f64, per_cpu: f64) -> PathBuf {
    let rows: Vec<TraceRow> = (0..200)
        .map(|i| {
            let cpu = i as f64 * 0.01;
            let mut features = FeatureValues::default();
            features.set(Feature::CpuSecondsPerSecond, Some(cpu));
            TraceRow {
                timestamp: 1.7e9 + i as f64,
                node: node.into(),
                workload: "validation".into(),
                power_watts: Some((idle + per_cpu * cpu) * (1.0 + 0.01 * ((i % 3) as f64 - 1.0))),
                features,
            }
        })
        .collect();
    let path = dir.join("validation.csv");
    std::fs::write(&path, write_trace(&rows).unwrap()).unwrap();
    path
}

struct Served {
    guard: Guard,
    metrics_url: String,
    log: PathBuf,
}

impl Served {
    /// Sum of a self metric's series whose label text contains `labels` (0 when absent).
    fn metric(&self, name: &str, labels: &str) -> f64 {
        greenpipe_tests::self_metric(&self.metrics_url, name, labels)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn spawn(dir: &Path, name: &str, args: &[String], port: u16) -> Served {
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(workspace_binary("greenpipe-estimator"))
        .args(args)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::fs::File::create(dir.join(format!("{name}.out"))).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("starting the estimator");
    Served {
        guard: Guard::new(name, child),
        metrics_url: format!("http://127.0.0.1:{port}/metrics"),
        log,
    }
}

fn serve(dir: &Path, prom: &Prometheus, models: &Path) -> Served {
    let args = [
        "serve".to_string(),
        format!("--prometheus-url={}", prom.url),
        format!("--remote-write-url={}", prom.remote_write_url()),
        format!("--models={}", models.display()),
        "--interval=1s".into(),
        "--delay=2s".into(),
        "--rate-window=5s".into(),
        "--remote-write.max-backoff=1s".into(),
        "--log.level=info".into(),
    ];
    spawn(dir, "serve", &args, free_port())
}

/// Every stored `greenpipe_node_power_watts` sample of `node` over `window`, whatever its model
/// label: `(tick ms, model label, watts)` in time order.
fn power_ticks(prom: &Prometheus, node: &str, window: &str) -> Vec<(i64, String, f64)> {
    let series = raw_samples(
        &prom.url,
        &format!("{}{{node=\"{node}\"}}", estimate::NODE_POWER_WATTS),
        window,
    )
    .unwrap_or_default();
    let mut out: Vec<(i64, String, f64)> = series
        .iter()
        .flat_map(|s| {
            let model = s.labels.get("model").cloned().unwrap_or_default();
            s.samples.iter().map(move |&(t, v)| (t, model.clone(), v))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    out
}

/// Ticks are consecutive seconds, each written once (by one model), and the model changes at
/// most `switches` times, never back. Returns the ticks where it changed.
fn assert_every_tick_once(ticks: &[(i64, String, f64)], switches: usize) -> Vec<(i64, String)> {
    for w in ticks.windows(2) {
        assert_eq!(
            w[1].0 - w[0].0,
            1000,
            "gap or duplicate between ticks {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    let mut changes = Vec::new();
    for w in ticks.windows(2) {
        if w[1].1 != w[0].1 {
            changes.push((w[1].0, w[1].1.clone()));
        }
    }
    assert!(
        changes.len() <= switches,
        "the model changed more than {switches} times: {changes:?}"
    );
    changes
}

/// A counter whose rate swings as `1 + amp * sin(2π t / period)` (t in seconds since `from_ms`),
/// and the exact mean rate over the 5 s before `t` (what `rate(x[5s])` measures).
struct Swing {
    from_ms: i64,
    amp: f64,
    period_s: f64,
}

impl Swing {
    fn integral(&self, t_ms: i64) -> f64 {
        let t = (t_ms - self.from_ms) as f64 / 1000.0;
        let w = 2.0 * std::f64::consts::PI / self.period_s;
        1000.0 + t + self.amp / w * (1.0 - (w * t).cos())
    }

    fn mean_rate(&self, t_ms: i64) -> f64 {
        (self.integral(t_ms) - self.integral(t_ms - 5000)) / 5.0
    }
}

#[test]
fn a_refit_worse_on_the_validation_traces_is_rejected_and_the_old_model_stays() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    // The board's model as trained: 1.5 W + 4 W per CPU-second/s. Since then the node's dynamic
    // power grew 15 %; its meter (a USB meter on pi-7, one node of the pi4 group) shows it.
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    std::fs::write(
        models.join("pi4-board.json"),
        linear_model("pi4-board", r#"{"labels": {"board": "pi4"}}"#, 1.5, 4.0),
    )
    .unwrap();
    let validation = validation_trace(dir.path(), "pi-3", 1.5, 4.0);
    let estimator = workspace_binary("greenpipe-estimator");
    // Up to 5 minutes ahead, so the window is full whenever the checks below run.
    let now = now_ms() / 1000 * 1000;
    let (from, to) = (now - 150_000, now + 300_000);
    let swing = Swing {
        from_ms: from - 10_000,
        amp: 0.8,
        period_s: 300.0,
    };
    let node = [("node", "pi-7")];
    let drifted = |t: i64| 1.5 + 1.15 * 4.0 * swing.mean_rate(t);
    let modelled = |t: i64| 1.5 + 4.0 * swing.mean_rate(t);
    let series: Vec<TimeSeries> = vec![
        series_of(
            n::CPU_SECONDS_TOTAL,
            &[("node", "pi-7"), ("mode", "user")],
            (from - 10_000, to, 1000),
            |t| swing.integral(t),
        ),
        series_of(
            meter::POWER_WATTS,
            &[("node", "pi-7"), ("meter", "usb"), ("kind", "um25c")],
            (from, to, 1000),
            drifted,
        ),
        // What serve wrote for it with the current model.
        series_of(
            estimate::NODE_POWER_ABS_ERROR_RATIO,
            &[node[0], ("model", "pi4-board")],
            (from, to, 1000),
            |t| (modelled(t) - drifted(t)).abs() / drifted(t),
        ),
    ];
    remote_write(&prom.remote_write_url(), series).expect("pushing the window");

    let once = |margin: &str, threshold: &str| {
        let out = Command::new(&estimator)
            .args([
                "recalibrate",
                "--once",
                &format!("--prometheus-url={}", prom.url),
                &format!("--models={}", models.display()),
                &format!("--validation-traces={}", validation.display()),
                &format!("--threshold={threshold}"),
                "--error-window=60s",
                "--refit-window=60s",
                &format!("--validation-margin={margin}"),
            ])
            .stderr(Stdio::piped())
            .output()
            .expect("running recalibrate --once");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "recalibrate failed:\n{stderr}");
        let reports: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON report line"))
            .collect();
        (reports, stderr)
    };
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(&models)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };

    // Live error ~10 %: below a 20 % threshold nothing happens.
    let (reports, _) = once("5", "0.2");
    assert!(reports.is_empty(), "{reports:?}");

    // A margin of 0.5 points: the refit fits the drifted node better but is worse on the
    // machine as it was trained, by more than that: rejected, nothing written.
    let (reports, stderr) = once("0.5", "0.05");
    assert_eq!(reports.len(), 1, "{reports:?}\n{stderr}");
    let r = &reports[0];
    assert_eq!(r["outcome"], "rejected", "{r}");
    assert_eq!(
        r["node"], "pi-7",
        "the report names the node whose meter was used"
    );
    assert!(r["reason"].as_str().unwrap().contains("validation"), "{r}");
    let s = &r["scores"];
    let f = |k: &str| s[k].as_f64().unwrap_or_else(|| panic!("no {k} in {s}"));
    assert!(
        f("held_out_mape_percent_after") < f("held_out_mape_percent_before"),
        "{s}"
    );
    assert!(
        f("validation_mape_percent_after") > f("validation_mape_percent_before") + 0.5,
        "{s}"
    );
    assert!(stderr.contains("refit not accepted"), "{stderr}");
    assert_eq!(
        files(),
        ["pi4-board.json"],
        "a rejected refit writes nothing"
    );

    // The same refit with a margin that allows it: accepted, written as version 2 with its lineage.
    let (reports, stderr) = once("20", "0.05");
    assert_eq!(reports.len(), 1, "{reports:?}\n{stderr}");
    assert_eq!(reports[0]["outcome"], "accepted", "{}", reports[0]);
    assert_eq!(reports[0]["new_label"], "pi4-board@v2");
    assert_eq!(files(), ["pi4-board.json", "pi4-board.v2.json"]);
    let v2 =
        ModelFile::from_json(&std::fs::read_to_string(models.join("pi4-board.v2.json")).unwrap())
            .unwrap();
    let m = &v2.models[0];
    assert_eq!(m.version(), 2);
    assert_eq!(
        m.selector.labels["board"], "pi4",
        "the group's selector is kept"
    );
    let Recalibration {
        parent_version,
        node,
        window_from,
        window_to,
        parameters,
        scores,
        ..
    } = &m.recalibrations[0];
    assert_eq!((*parent_version, node.as_str()), (1, "pi-7"));
    assert!(
        window_to - window_from >= 50.0,
        "{window_from}..{window_to}"
    );
    assert!((parameters["gain"] - 1.15).abs() < 0.05, "{parameters:?}");
    assert!(scores["held_out_mape_percent_after"] < 1.0, "{scores:?}");
    // The corrected model predicts the drifted node.
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(1.0));
    let p = m.predict(&x).unwrap();
    assert!((p - (1.5 + 1.15 * 4.0)).abs() < 0.1, "{p}");
}

/// Node `n1` at a constant CPU rate of 1, with a container, from 2 minutes ago to 5 ahead.
fn push_constant_node(prom: &Prometheus) {
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 300_000, 1000);
    let mut series = vec![counter_series(
        n::CPU_SECONDS_TOTAL,
        &[("node", "n1"), ("mode", "user")],
        1.0,
        span,
    )];
    let ctr = [("node", "n1"), ("container_id", "c1"), ("pod_uid", "p1")];
    series.push(counter_series(
        c::CPU_SECONDS_TOTAL,
        &[ctr.as_slice(), &[("source", "cgroup")]].concat(),
        0.6,
        span,
    ));
    series.push(gauge_series(c::PROCESSES, &ctr, 2.0, span));
    remote_write(&prom.remote_write_url(), series).expect("pushing n1");
}

fn sighup(pid: u32) {
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGHUP);
    }
}

#[test]
fn a_corrupt_model_version_is_refused_and_predictions_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    push_constant_node(&prom);
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    std::fs::write(
        models.join("m.json"),
        linear_model("m", r#"{"default": true}"#, 3.0, 2.0),
    )
    .unwrap();
    let serve = serve(dir.path(), &prom, &models);
    let ticks_of = |label: &str| {
        power_ticks(&prom, "n1", "10m")
            .into_iter()
            .filter(|t| t.1 == label)
            .count()
    };
    wait_for(Duration::from_secs(60), || {
        (ticks_of("m") >= 3).then_some(())
    })
    .unwrap_or_else(|| panic!("no predictions with model m:\n{}", serve.log()));

    // A corrupt version: refused, named in the log, the old model stays.
    let v2 = models.join("m.v2.json");
    std::fs::write(
        &v2,
        "{\"schema_version\": 1, \"models\": [{\"name\": \"m\", ",
    )
    .unwrap();
    let refused = |at_least: f64| {
        wait_for(Duration::from_secs(30), || {
            (serve.metric(est::MODEL_RELOADS_TOTAL, "outcome=\"refused\"") >= at_least)
                .then_some(())
        })
        .unwrap_or_else(|| panic!("not refused ({at_least}):\n{}", serve.log()));
    };
    refused(1.0);
    assert!(serve.log().contains("m.v2.json"), "{}", serve.log());
    assert_eq!(serve.metric(est::MODEL_RELOAD_SUCCESS, ""), 0.0);
    // SIGHUP reads the files again (refusing the same file again) and does not end serve.
    sighup(serve.guard.pid());
    refused(2.0);

    // A well-formed version 2 that needs a feature this node does not report: refused too.
    let mut file =
        ModelFile::from_json(&linear_model("m", r#"{"default": true}"#, 3.0, 2.0)).unwrap();
    let lineage = Recalibration {
        version: 2,
        parent_version: 1,
        accepted_at: 0.0,
        method: "test".into(),
        node: "n1".into(),
        window_from: 0.0,
        window_to: 60.0,
        fit_samples: 40,
        held_out_samples: 20,
        parameters: BTreeMap::new(),
        scores: BTreeMap::new(),
    };
    let mut lacking = file.clone();
    lacking.models[0].recalibrations.push(lineage.clone());
    lacking.models[0].features[0].feature = Feature::DiskBytesPerSecond;
    std::fs::write(&v2, lacking.to_json()).unwrap();
    refused(3.0);
    assert!(
        serve.log().contains("features they lack"),
        "{}",
        serve.log()
    );

    // A good version 2 (+0.5 W): in force from one tick on.
    file.models[0].recalibrations.push(lineage);
    if let greenpipe_common::model::ModelKind::Linear { intercept, .. } =
        &mut file.models[0].regressor
    {
        *intercept = 3.5;
    }
    std::fs::write(&v2, file.to_json()).unwrap();
    wait_for(Duration::from_secs(30), || {
        (ticks_of("m@v2") >= 3).then_some(())
    })
    .unwrap_or_else(|| panic!("version 2 not in force:\n{}", serve.log()));
    assert_eq!(
        serve.metric(est::MODEL_RELOADS_TOTAL, "outcome=\"applied\""),
        1.0
    );
    assert_eq!(serve.metric(est::MODEL_RELOAD_SUCCESS, ""), 1.0);
    assert_eq!(serve.metric(est::MODELS_LOADED, "model=\"m@v2\""), 1.0);
    assert_eq!(
        serve.metric(est::MODELS_LOADED, ""),
        1.0,
        "the old version is unlisted"
    );

    let ticks = power_ticks(&prom, "n1", "10m");
    let changes = assert_every_tick_once(&ticks, 1);
    assert_eq!(changes.len(), 1, "{changes:?}");
    for (t, model, watts) in &ticks {
        let want = if *t < changes[0].0 {
            ("m", 5.0)
        } else {
            ("m@v2", 5.5)
        };
        assert_eq!((model.as_str(), *watts), want, "tick {t}");
    }
    assert!(serve.guard.pid() > 0);
    assert_eq!(
        serve.metric(est::TICKS_TOTAL, "") as usize,
        ticks.len(),
        "every tick written is stored once"
    );
}

/// The closed loop: an emulated UM25C following this machine's load, the exporter reading it,
/// a Prometheus scraping the exporter (with the node's `board` label), `serve` estimating it
/// with a board-group model from a model directory.
struct Loop {
    dir: tempfile::TempDir,
    meter: ClosedLoopMeter,
    _exporter: Guard,
    prom: Prometheus,
    models: PathBuf,
    validation: PathBuf,
    serve: Served,
}

const IDLE: f64 = 1.5;
const PER_CPU: f64 = 4.0;
const NODE: &str = "emu-node-1";

/// The closed-loop tests run one at a time: each swings this machine's load, and the other's
/// swing, out of phase, is the largest source of live error in either (the meter's trailing
/// window and the rate() disagree most while load changes).
static ONE_CLOSED_LOOP: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn closed_loop(noise_watts: f64, seed: u64) -> Loop {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let meter = ClosedLoopMeter::start(
        &link,
        PowerFunction {
            idle_watts: IDLE,
            watts_per_cpu: PER_CPU,
            watts_per_disk_byte: 0.0,
            dynamic_scale: 1.0,
            noise_watts,
        },
        LoopSettings {
            seed,
            ..Default::default()
        },
    )
    .expect("closed-loop meter");
    let port = free_port();
    let exporter = spawn_exporter(
        NODE,
        port,
        &[
            "--meter",
            &format!("um25c:{}", link.display()),
            "--meter.timeout",
            "900ms",
        ],
        Some(&dir.path().join("exporter.log")),
    );
    let prom = Prometheus::start_with_config(&format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: greenpipe-exporter\n    \
         scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: \
         [\"127.0.0.1:{port}\"]\n        labels:\n          board: emu-board\n"
    ))
    .expect("prometheus");
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    // The model as trained: exactly the meter's function before any drift.
    std::fs::write(
        models.join("emu-board.json"),
        linear_model(
            "emu-board",
            r#"{"labels": {"board": "emu-board"}}"#,
            IDLE,
            PER_CPU,
        ),
    )
    .unwrap();
    let validation = validation_trace(dir.path(), "emu-node-0", IDLE, PER_CPU);
    let serve = serve(dir.path(), &prom, &models);
    Loop {
        meter,
        _exporter: exporter,
        prom,
        models,
        validation,
        serve,
        dir,
    }
}

impl Loop {
    fn recalibrate(&self, extra: &[&str]) -> Served {
        let mut args = vec![
            "recalibrate".to_string(),
            format!("--prometheus-url={}", self.prom.url),
            format!("--models={}", self.models.display()),
            format!("--validation-traces={}", self.validation.display()),
            "--check-interval=1s".into(),
            "--min-interval=10m".into(),
            "--log.level=info".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        spawn(self.dir.path(), "recalibrate", &args, free_port())
    }

    /// Live MAPE of `model` over `window` and its sample count, from Prometheus.
    fn live(&self, model: &str, window: &str) -> Option<(f64, f64)> {
        let sel = format!(
            "{}{{node=\"{NODE}\",model=\"{model}\"}}[{window}]",
            estimate::NODE_POWER_ABS_ERROR_RATIO
        );
        let mape = self
            .prom
            .query_scalar(&format!("avg_over_time({sel})"))
            .ok()??;
        let count = self
            .prom
            .query_scalar(&format!("count_over_time({sel})"))
            .ok()??;
        Some((mape, count))
    }

    fn wait_for_predictions(&self) {
        wait_for(Duration::from_secs(90), || {
            self.live("emu-board", "30s").filter(|(_, n)| *n >= 10.0)
        })
        .unwrap_or_else(|| {
            panic!(
                "no metered predictions:\nserve:\n{}\nexporter:\n{}",
                self.serve.log(),
                std::fs::read_to_string(self.dir.path().join("exporter.log")).unwrap_or_default()
            )
        });
    }
}

#[test]
fn a_noisy_unchanged_meter_never_triggers_a_refit() {
    let _one = ONE_CLOSED_LOOP.lock().unwrap_or_else(|e| e.into_inner());
    let lp = closed_loop(0.15, 11);
    let _load = SwingingLoad::start(0.2, 0.8, Duration::from_secs(40));
    lp.wait_for_predictions();
    let recal = lp.recalibrate(&[
        "--threshold=0.10",
        "--for=5s",
        "--error-window=10s",
        "--refit-window=20s",
    ]);
    // 90 checks, nine full error windows.
    let started = Instant::now();
    let mut max_window_error: f64 = 0.0;
    while started.elapsed() < Duration::from_secs(90) {
        if let Some((e, _)) = lp.live("emu-board", "10s") {
            max_window_error = max_window_error.max(e);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let checks = recal.metric(rc::CHECKS_TOTAL, "outcome=\"ok\"");
    assert!(checks >= 30.0, "only {checks} checks:\n{}", recal.log());
    // Noise alone stays under the threshold, but bursts of other load on the machine (builds,
    // the other tests) put the meter's trailing window and the 5 s rate() out of step for a few
    // seconds, which is a real live error: the recalibrator may then try a refit. What it may
    // never do is accept one, and it may only try after the live error really crossed.
    let attempts = recal.metric(rc::REFITS_TOTAL, "");
    assert_eq!(
        recal.metric(rc::REFITS_TOTAL, "outcome=\"accepted\""),
        0.0,
        "a refit accepted without drift (largest 10 s live error {max_window_error}):\n{}",
        recal.log()
    );
    assert!(
        attempts == 0.0 || max_window_error > 0.10,
        "{attempts} refits tried though the largest 10 s live error was {max_window_error}:\n{}",
        recal.log()
    );
    let noise = lp.meter.last();
    eprintln!(
        "no drift: largest 10 s live MAPE {max_window_error:.4}, {attempts} refits tried (none \
         accepted), last reading {noise:?}"
    );
    assert_every_tick_once(&power_ticks(&lp.prom, NODE, "2m"), 0);
}

#[test]
fn drift_is_detected_refitted_once_and_swapped_without_a_gap() {
    let _one = ONE_CLOSED_LOOP.lock().unwrap_or_else(|e| e.into_inner());
    let lp = closed_loop(0.02, 7);
    let _load = SwingingLoad::start(0.3, 0.9, Duration::from_secs(40));
    lp.wait_for_predictions();
    let threshold = 0.05;
    let recal = lp.recalibrate(&[
        &format!("--threshold={threshold}"),
        // Long enough after the crossing that the refit window (40 s ending one rate window
        // ago) holds no sample from before the drift, however late the crossing is seen.
        "--for=50s",
        "--error-window=20s",
        // One whole period of the swinging load: the fitted and the held-out rows then span
        // its range. With 20 s (half a period) the 6 held-out rows sat on one slope and a
        // right correction was refused once on a loaded machine (held-out 6.2 against 4.9 %).
        "--refit-window=40s",
        // The validation traces are undrifted, so a right correction of a +15 % dynamic gain
        // itself costs them about 10-14 points; the guard is for refits far worse than that.
        "--validation-margin=25",
    ]);
    // Before the drift the model is the meter's own function: well under the threshold.
    std::thread::sleep(Duration::from_secs(25));
    let (before, _) = lp
        .live("emu-board", "20s")
        .expect("live error before the drift");
    assert!(before < threshold, "live MAPE {before} before any drift");
    assert_eq!(recal.metric(rc::REFITS_TOTAL, ""), 0.0, "{}", recal.log());

    // +15 % dynamic power.
    let drift_at = Instant::now();
    lp.meter.set(|f| f.dynamic_scale = 1.15);
    let peak = wait_for(Duration::from_secs(60), || {
        lp.live("emu-board", "20s")
            .map(|l| l.0)
            .filter(|e| *e > threshold)
    })
    .unwrap_or_else(|| panic!("live error never crossed {threshold}:\n{}", recal.log()));
    wait_for(Duration::from_secs(90), || {
        (recal.metric(rc::REFITS_TOTAL, "outcome=\"accepted\"") >= 1.0).then_some(())
    })
    .unwrap_or_else(|| panic!("no accepted refit:\n{}", recal.log()));
    let to_accepted = drift_at.elapsed();
    // serve switches to version 2 by itself (the file appeared in its directory).
    wait_for(Duration::from_secs(30), || {
        lp.live("emu-board@v2", "20s").filter(|(_, n)| *n >= 15.0)
    })
    .unwrap_or_else(|| panic!("serve never predicted with v2:\n{}", lp.serve.log()));
    // The refit learned the drift: the meter is `idle + 1.15 · dynamic` of the old model, so
    // both a dynamic gain and an affine correction have gain 1.15 (an offset would have 1).
    let report = std::fs::read_to_string(lp.dir.path().join("recalibrate.out")).unwrap();
    let accepted: serde_json::Value = report
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON report line"))
        .find(|r| r["outcome"] == "accepted")
        .unwrap_or_else(|| panic!("no accepted report line: {report}"));
    let gain = accepted["gain"]
        .as_f64()
        .expect("an accepted refit has a gain");
    assert!(
        (1.07..=1.25).contains(&gain),
        "gain {gain} does not recover the +15 % drift: {accepted}"
    );
    let triggered = accepted["live_mape_ratio"].as_f64().unwrap();
    // With v2 the live error falls back below the threshold. Measured over 30 s, not one error
    // window: on a loaded machine a burst of other work puts the meter's trailing window and
    // the rate() out of step for a few seconds whatever the model (the no-drift test's caveat).
    wait_for(Duration::from_secs(30), || {
        lp.live("emu-board@v2", "30s").filter(|(_, n)| *n >= 28.0)
    })
    .unwrap_or_else(|| panic!("v2 never predicted for 30 s:\n{}", lp.serve.log()));
    let (after, _) = lp.live("emu-board@v2", "30s").expect("live error of v2");
    assert!(
        after < threshold && after < triggered,
        "live MAPE {after} with the recalibrated model (was {peak} when the drift was first \
         seen, {triggered} when the refit was triggered; before the drift {before})"
    );
    // No further refit: the new version is under the threshold, the old one is no longer used.
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(
        recal.metric(rc::REFITS_TOTAL, ""),
        1.0,
        "one refit for one drift:\n{}",
        recal.log()
    );
    let ticks = power_ticks(&lp.prom, NODE, "10m");
    let changes = assert_every_tick_once(&ticks, 1);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].1, "emu-board@v2");
    let cpu = recal.metric(&format!("{}_sum", rc::REFIT_CPU_SECONDS), "");
    assert!(report.contains(&format!("\"node\":\"{NODE}\"")), "{report}");
    eprintln!(
        "drift figures: live MAPE before {before:.4}, after drift {peak:.4} (at the refit \
         {triggered:.4}), gain {gain:.4}, with v2 {after:.4}; \
         drift to accepted {to_accepted:?}; refit CPU {cpu:.6} s; swap at tick {} with {} ticks \
         stored, none missing or duplicated\nreport: {report}",
        changes[0].0,
        ticks.len()
    );
}
