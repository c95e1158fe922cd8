//! The offline pipeline end to end through a real Prometheus: known series are written into its
//! TSDB, `dataset` range-queries them into trace CSVs, `train` fits a model file on two workloads
//! and `validate` scores it on the third; the model file then loads and predicts in the online
//! estimator's reader (`greenpipe_common::model`).
//!
//! The series go in through Prometheus's own backfill (`promtool tsdb create-blocks-from
//! openmetrics`) rather than remote write: backfill takes samples with any past timestamp (remote
//! write refuses samples older than the head block), needs no protobuf/snappy writer in the test,
//! and ships with the Debian package the tests already use.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use greenpipe_common::features::{trace_header, Feature, FeatureValues};
use greenpipe_common::model::ModelFile;
use greenpipe_common::trace::parse_trace;
use greenpipe_tests::{workspace_binary, Prometheus};

const NODE: &str = "rt-node";
/// Seconds per workload run and between runs.
const RUN: i64 = 600;
const GAP: i64 = 100;
/// Seconds a load level holds (long against the 5 s rate window, so most rows are steady).
const LEVEL: i64 = 60;

/// Deterministic load levels: CPU seconds per second and disk bytes per second.
fn levels(workload: usize, t: i64) -> (f64, f64) {
    let k = (t / LEVEL) as u64 + 31 * workload as u64;
    let h = k.wrapping_mul(2_654_435_761) % 1000;
    let cpu = 0.2 + 3.6 * (h as f64 / 1000.0);
    let disk = 5e7 * (((h * 7 + workload as u64 * 3) % 10) as f64 / 10.0);
    (cpu, disk)
}

fn true_power(cpu: f64, disk: f64) -> f64 {
    30.0 + 8.0 * cpu + 2e-7 * disk
}

/// Metric family → (type, series labels → (timestamp, value) points).
type Families<'a> = BTreeMap<&'a str, (&'a str, Vec<(String, Vec<(i64, f64)>)>)>;

/// OpenMetrics text of three workload runs starting at `t0`.
fn openmetrics(t0: i64) -> String {
    let mut families: Families = BTreeMap::new();
    let series = |labels: &str| format!("{{node=\"{NODE}\",{labels}}}");
    let mut user = Vec::new();
    let mut idle = Vec::new();
    let mut disk_c = Vec::new();
    let mut cycles = Vec::new();
    let mut power = Vec::new();
    let (mut u, mut i, mut d, mut c) = (0.0, 0.0, 0.0, 0.0);
    for w in 0..3 {
        let start = t0 + w as i64 * (RUN + GAP);
        for t in start..start + RUN {
            let (cpu, disk) = levels(w, t - start);
            u += cpu;
            i += 4.0 - cpu;
            d += disk;
            c += 2e9 * cpu + 1e8 * ((t % 5) as f64);
            user.push((t, u));
            idle.push((t, i));
            disk_c.push((t, d));
            cycles.push((t, c));
            power.push((t, true_power(cpu, disk)));
        }
    }
    families.insert(
        "greenpipe_node_cpu_seconds",
        (
            "counter",
            vec![
                (series("mode=\"user\""), user),
                (series("mode=\"idle\""), idle),
            ],
        ),
    );
    families.insert(
        "greenpipe_node_disk_bytes",
        (
            "counter",
            vec![(series("device=\"sda\",direction=\"read\""), disk_c)],
        ),
    );
    families.insert(
        "greenpipe_container_cpu_cycles",
        (
            "counter",
            vec![(
                series("container_id=\"system\",pod_uid=\"\",source=\"perf\""),
                cycles,
            )],
        ),
    );
    families.insert(
        "greenpipe_meter_power_watts",
        (
            "gauge",
            vec![(series("meter=\"m0\",kind=\"um25c\""), power)],
        ),
    );
    let mut out = String::new();
    for (family, (kind, series)) in families {
        let _ = writeln!(out, "# TYPE {family} {kind}");
        let sample = if kind == "counter" {
            format!("{family}_total")
        } else {
            family.to_string()
        };
        for (labels, points) in series {
            for (t, v) in points {
                let _ = writeln!(out, "{sample}{labels} {v} {t}");
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

fn estimator(args: &[&str]) -> Output {
    let out = Command::new(workspace_binary("greenpipe-estimator"))
        .args(args)
        .output()
        .expect("running greenpipe-estimator");
    eprintln!(
        "greenpipe-estimator {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ok(args: &[&str]) {
    assert!(estimator(args).status.success(), "{args:?} failed");
}

#[test]
fn dataset_train_validate_round_trip_through_prometheus() {
    // Four hours back: inside the 1 d retention, older than anything in the head block.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t0 = now - 4 * 3600;
    let mut prom = Prometheus::start(&[], "1s").expect("prometheus");
    prom.stop();
    let input = prom.dir.path().join("backfill.om");
    std::fs::write(&input, openmetrics(t0)).unwrap();
    let status = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
        .arg(&input)
        .arg(prom.dir.path().join("data"))
        .status()
        .expect("running promtool (scripts/setup.sh installs prometheus)");
    assert!(status.success(), "promtool backfill failed");
    prom.spawn()
        .expect("prometheus restarts on the backfilled data");

    let work = tempfile::tempdir().unwrap();
    let traces = work.path().join("traces");
    let names = ["alpha", "beta", "gamma"];
    for (w, name) in names.iter().enumerate() {
        let start = t0 + w as i64 * (RUN + GAP);
        ok(&[
            "dataset",
            "--prometheus-url",
            &prom.url,
            "--node",
            NODE,
            "--from",
            &(start + 10).to_string(),
            "--to",
            &(start + RUN - 1).to_string(),
            "--step",
            "1s",
            "--workload",
            name,
            "--out",
            traces.to_str().unwrap(),
        ]);
    }
    // The trace is in the canonical format and carries the series' values.
    let alpha = traces.join("alpha.csv");
    let text = std::fs::read_to_string(&alpha).unwrap();
    assert_eq!(text.lines().next(), Some(trace_header().as_str()));
    let rows = parse_trace("alpha.csv", &text).unwrap();
    assert!(rows.len() >= (RUN - 12) as usize, "{} rows", rows.len());
    // A steady row: 30 s into the second level, well past the 5 s rate window.
    let steady = t0 + LEVEL + 30;
    let row = rows
        .iter()
        .find(|r| r.timestamp == steady as f64)
        .expect("a row at every step");
    let (cpu, disk) = levels(0, LEVEL + 30);
    let got_cpu = row.features.get(Feature::CpuSecondsPerSecond).unwrap();
    assert!((got_cpu - cpu).abs() < 1e-6 * cpu, "{got_cpu} vs {cpu}");
    let got_disk = row.features.get(Feature::DiskBytesPerSecond).unwrap();
    assert!(
        (got_disk - disk).abs() <= 1e-6 * disk.max(1.0),
        "{got_disk} vs {disk}"
    );
    assert_eq!(row.power_watts, Some(true_power(cpu, disk)));
    assert!(row.features.get(Feature::CpuCyclesPerSecond).is_some());
    assert_eq!(row.features.get(Feature::MemoryUsedBytes), None);
    // Series the exporter did not write stay empty cells rather than 0: instructions, cache
    // misses, page cache, network, memory and frequency.
    let cells: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    for empty in [6, 7, 8, 9, 11, 12] {
        assert_eq!(cells[empty], "", "cell {empty} of {cells:?}");
    }

    // Train on alpha and beta, validate on gamma.
    let model = work.path().join("model.json");
    let train_report = work.path().join("train-report");
    ok(&[
        "train",
        "--traces",
        traces.join("alpha.csv").to_str().unwrap(),
        traces.join("beta.csv").to_str().unwrap(),
        "--out",
        model.to_str().unwrap(),
        "--report",
        train_report.to_str().unwrap(),
        "--models",
        "ols,ridge,gradient_boosting",
    ]);
    let report = work.path().join("validate-report");
    ok(&[
        "validate",
        "--model",
        model.to_str().unwrap(),
        "--traces",
        traces.join("gamma.csv").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let summary = std::fs::read_to_string(report.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    assert_eq!(
        lines.next(),
        Some("node,workload,samples,model,mape_percent,mae_watts,rmse_watts,r2")
    );
    let all: Vec<&str> = summary
        .lines()
        .find(|l| l.starts_with(&format!("{NODE},ALL,")))
        .expect("an ALL row")
        .split(',')
        .collect();
    let mape: f64 = all[4].parse().unwrap();
    // Only the rows of a level change (5 of every 60 s) carry error.
    assert!(mape < 3.0, "validation MAPE {mape} %");
    // The CPU-only baseline, trained by `train` and stored in the model file, is scored beside
    // the model on the same unseen trace; it cannot see the disk term of the true power.
    let baseline: f64 = summary
        .lines()
        .find(|l| l.starts_with(&format!("{NODE},ALL,")) && l.contains(",baseline_cpu_linear,"))
        .expect("a baseline_cpu_linear ALL row beside the model")
        .split(',')
        .nth(4)
        .unwrap()
        .parse()
        .unwrap();
    eprintln!("validation MAPE: model {mape:.3} %, CPU-only baseline {baseline:.3} %");
    assert!(baseline > mape, "baseline {baseline} % vs model {mape} %");
    assert!(report.join("report.md").exists());
    assert!(train_report.join("summary.csv").exists());

    // The model file loads in the online estimator's reader and predicts from raw features.
    let file = ModelFile::from_json(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let m = file
        .select(NODE, &BTreeMap::new())
        .expect("model for the node");
    assert!(m
        .attribution_weights
        .iter()
        .all(|w| w.watts_per_unit >= 0.0));
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(2.0));
    x.set(Feature::DiskBytesPerSecond, Some(2e7));
    x.set(Feature::CpuCyclesPerSecond, Some(4.2e9));
    let watts = m.predict(&x).unwrap();
    let want = true_power(2.0, 2e7);
    assert!((watts - want).abs() < 0.05 * want, "{watts} vs {want}");
    assert!(
        (m.idle_power_watts - 30.0).abs() < 3.0,
        "idle {}",
        m.idle_power_watts
    );
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bad_traces_are_refused_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let h = trace_header();
    let good_row = |t: i64| format!("{t},n,w,10,1,,,,,,,,");
    let cases = [
        (
            "header.csv",
            format!("timestamp,power\n{}\n", good_row(1)),
            "header.csv:1:",
        ),
        (
            "cell.csv",
            format!("{h}\n{}\n1,n,w,ten,1,,,,,,,,\n", good_row(0)),
            "cell.csv:3: column power_watts",
        ),
        (
            "back.csv",
            format!("{h}\n{}\n{}\n{}\n", good_row(5), good_row(6), good_row(4)),
            "back.csv:4: timestamp 4 goes backwards",
        ),
        (
            "short.csv",
            format!("{h}\n{}\n", good_row(1)),
            "short.csv: 1 data rows",
        ),
    ];
    let out_model = dir.path().join("m.json");
    for (name, body, expected) in cases {
        let path = write(dir.path(), name, &body);
        let out = estimator(&[
            "train",
            "--traces",
            &path,
            "--out",
            out_model.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!out_model.exists(), "{name}: a model was written");
    }
    // Constant and empty columns are reported, not fatal; one feature that varies is enough.
    let mut body = format!("{h}\n");
    for (w, name) in ["a", "b"].iter().enumerate() {
        for t in 0..20 {
            let cpu = (t % 4) as f64 + w as f64;
            let _ = writeln!(
                body,
                "{},n,{name},{},{cpu},,,,,,,8e9,",
                t + 100 * w,
                10.0 + 2.0 * cpu
            );
        }
    }
    let path = write(dir.path(), "const.csv", &body);
    let report = dir.path().join("r");
    let out = estimator(&[
        "train",
        "--traces",
        &path,
        "--out",
        out_model.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--models",
        "ols",
    ]);
    // Two workloads in one file is itself refused: one workload per trace.
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one workload per trace"));
    let (a, b): (Vec<&str>, Vec<&str>) = body.lines().skip(1).partition(|l| l.contains(",a,"));
    let pa = write(dir.path(), "a.csv", &format!("{h}\n{}\n", a.join("\n")));
    let pb = write(dir.path(), "b.csv", &format!("{h}\n{}\n", b.join("\n")));
    let out = estimator(&[
        "train",
        "--traces",
        &pa,
        &pb,
        "--out",
        out_model.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--models",
        "ols",
    ]);
    assert!(out.status.success());
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("memory_used_bytes is constant"), "{md}");
    assert!(
        md.contains("cpu_cycles_per_second is empty in every trace"),
        "{md}"
    );
    let file = ModelFile::from_json(&std::fs::read_to_string(&out_model).unwrap()).unwrap();
    assert_eq!(
        file.models[0].required_features(),
        vec![Feature::CpuSecondsPerSecond]
    );
}

/// One trace row: cpu (s/s), cycles, disk (B/s), frequency (Hz), power (W).
fn row(t: usize, workload: &str, v: [f64; 5]) -> String {
    let [cpu, cycles, disk, freq, power] = v;
    format!("{t},board,{workload},{power},{cpu},{cycles},,,,,{disk},,{freq}\n")
}

fn summary_row<'a>(summary: &'a str, workload: &str, model: &str) -> Option<Vec<&'a str>> {
    summary
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|c| c.len() == 8 && c[1] == workload && c[3] == model)
}

#[test]
fn one_trace_trains_with_blocked_time_series_cv() {
    let dir = tempfile::tempdir().unwrap();
    // A single recorded run (one workload): CPU and disk levels change every 20 s.
    let mut body = format!("{}\n", trace_header());
    for t in 0..500 {
        let cpu = 0.3 + ((t / 20 * 7) % 11) as f64 * 0.35;
        let disk = ((t / 20 * 3) % 5) as f64 * 1e7;
        let power = 4.0 + 1.5 * cpu + 5e-8 * disk;
        body.push_str(&row(
            1000 + t,
            "stress_run",
            [cpu, 2e9 * cpu + 1e7 * (t % 3) as f64, disk, 1.5e9, power],
        ));
    }
    let trace = write(dir.path(), "one.csv", &body);
    let model = dir.path().join("model.json");
    let report = dir.path().join("report");
    ok(&[
        "train",
        "--traces",
        &trace,
        "--out",
        model.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--models",
        "ols,ridge,random_forest",
    ]);
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("blocked time-series CV (5 contiguous time blocks of one workload"),
        "{md}"
    );
    // Every block is scored once, for the candidates and both baselines kept.
    let summary = std::fs::read_to_string(report.join("summary.csv")).unwrap();
    for b in 1..=5 {
        let block = format!("stress_run#{b}");
        let r =
            summary_row(&summary, &block, "ols").unwrap_or_else(|| panic!("{block}: {summary}"));
        assert!(r[4].parse::<f64>().unwrap() < 1.0, "{r:?}");
        for baseline in ["baseline_cpu_linear", "baseline_stress_trained"] {
            assert!(
                summary_row(&summary, &block, baseline).is_some(),
                "{baseline} {block}"
            );
        }
    }
    let file = ModelFile::from_json(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let m = &file.models[0];
    assert_eq!(m.scores.extra.get("cv_time_blocks"), Some(&5.0));
    let cv = m.scores.cv_mape_percent.unwrap();
    assert!(cv.is_finite() && cv < 2.0, "blocked CV MAPE {cv}");
    let names: Vec<&str> = m.baselines.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["baseline_cpu_linear", "baseline_stress_trained"]);
    // `crossval` of the same single trace: the nested selection over the blocks.
    let cv_report = dir.path().join("cv");
    ok(&[
        "crossval",
        "--traces",
        &trace,
        "--report",
        cv_report.to_str().unwrap(),
        "--models",
        "ols,ridge",
    ]);
    let summary = std::fs::read_to_string(cv_report.join("summary.csv")).unwrap();
    assert!(
        summary_row(&summary, "ALL", "selected").is_some(),
        "{summary}"
    );
    assert!(std::fs::read_to_string(cv_report.join("report.md"))
        .unwrap()
        .contains("blocked time-series CV"));
}

/// The metered-run case of issue 17: a stress-trained baseline fitted on CPU steps, where the
/// frequency and the disk are constant and the cycles follow the CPU exactly, then applied to a
/// board doing disk work at another frequency.
#[test]
fn constant_and_collinear_training_features_give_bounded_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let h = trace_header();
    let power = |cpu: f64, disk: f64, freq: f64| 3.0 + 0.4 * cpu + 2e-8 * disk + 1e-9 * freq;
    let trace = |name: &str, t0: usize, f: &dyn Fn(usize) -> [f64; 3]| {
        let mut body = format!("{h}\n");
        for t in 0..200 {
            let [cpu, disk, freq] = f(t);
            let cycles = 1e9 * cpu * freq / 1.5e9;
            body.push_str(&row(
                t0 + t,
                name,
                [cpu, cycles, disk, freq, power(cpu, disk, freq)],
            ));
        }
        write(dir.path(), &format!("{name}.csv"), &body)
    };
    let level = |t: usize, n: usize| ((t / 10 * 7) % n) as f64 / (n - 1) as f64;
    let cpu_steps = trace("cpu_steps", 0, &|t| [0.2 + 3.8 * level(t, 9), 0.0, 1.5e9]);
    let disk = trace("disk_steps", 1000, &|t| {
        [
            0.1 + 0.2 * level(t, 3),
            6e7 * level(t, 7),
            0.6e9 + 0.9e9 * level(t, 4),
        ]
    });
    let idle = trace("idle", 2000, &|t| {
        [0.05 + 0.05 * level(t, 5), 1e5 * level(t, 3), 0.6e9]
    });
    // Validation: a CPU + disk mix at a middle frequency, then a stretch far above anything in
    // training (60 CPU-seconds per second on this board), which linear models extrapolate.
    let mut mix = format!("{h}\n");
    for t in 0..200 {
        let cpu = if t < 150 {
            1.0 + 2.0 * level(t, 5)
        } else {
            60.0
        };
        let (disk, freq) = (3e7 * level(t, 4), 0.8e9 + 0.4e9 * level(t, 3));
        let cycles = 1e9 * cpu * freq / 1.5e9;
        mix.push_str(&row(
            5000 + t,
            "mix",
            [cpu, cycles, disk, freq, power(cpu.min(4.0), disk, freq)],
        ));
    }
    let mix = write(dir.path(), "mix.csv", &mix);
    let model = dir.path().join("model.json");
    ok(&[
        "train",
        "--traces",
        &cpu_steps,
        &disk,
        &idle,
        "--out",
        model.to_str().unwrap(),
        "--models",
        "ols,ridge",
    ]);
    let file = ModelFile::from_json(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let m = &file.models[0];
    let stress = m
        .baselines
        .iter()
        .find(|b| b.name == "baseline_stress_trained")
        .expect("cpu_steps matches the stress pattern");
    // Only the CPU varies independently in the CPU steps: frequency and disk are constant there,
    // the cycles follow the CPU.
    let inputs: Vec<Feature> = stress.features.iter().map(|s| s.feature).collect();
    assert_eq!(inputs, [Feature::CpuSecondsPerSecond], "{stress:?}");
    let bounds = stress.power_bounds.expect("stored bounds");
    assert!(bounds.max_watts < 10.0, "{bounds:?}");
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(2.0));
    x.set(Feature::DiskBytesPerSecond, Some(3e7));
    x.set(Feature::CpuFrequencyHertz, Some(1e9));
    x.set(Feature::CpuCyclesPerSecond, Some(1.3e9));
    let watts = stress.predict(&x).unwrap();
    assert!((2.0..10.0).contains(&watts), "{watts}");

    let report = dir.path().join("val");
    ok(&[
        "validate",
        "--model",
        model.to_str().unwrap(),
        "--traces",
        &mix,
        "--report",
        report.to_str().unwrap(),
    ]);
    let summary = std::fs::read_to_string(report.join("summary.csv")).unwrap();
    let r = summary_row(&summary, "ALL", "baseline_stress_trained").expect("baseline scored");
    let mape: f64 = r[4].parse().unwrap();
    assert!(mape < 60.0, "stress-trained baseline MAPE {mape} %");
    // The 50 overload rows leave the training power range widened by its width: clamped and
    // counted, for the model and for the CPU-only baseline alike.
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let counted = md
        .lines()
        .find(|l| l.starts_with("Clamped predictions: "))
        .expect("clamp count in the report");
    let n: usize = counted["Clamped predictions: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n >= 100, "{counted}");
    assert!(md.contains("| baseline_cpu_linear | 50 | 200 |"), "{md}");
}
