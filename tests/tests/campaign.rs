//! `greenpipe-campaign run` end to end on this machine: the exporter (with a closed-loop
//! emulated UM25C — a test fixture whose power follows this machine's real load), a real
//! Prometheus scraping it every second, and the CI plan's real workloads in pod-shaped cgroups;
//! then the traces, model, validation, energy and report it writes. A second test interrupts a
//! campaign, resumes it, and checks that a failing step and windows without meter data are
//! reported and skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_tests::closed_loop_meter::{ClosedLoopMeter, LoopSettings, PowerFunction};
use greenpipe_tests::{free_port, wait_for, workspace_binary, workspace_root, Guard, Prometheus};

/// Starts the exporter (with the meter, if given) and a Prometheus scraping it every second.
fn stack(dir: &Path, node: &str, meter: Option<&Path>) -> (Guard, Prometheus) {
    let port = free_port();
    let mut cmd = Command::new(workspace_binary("greenpipe-exporter"));
    cmd.args([
        "--web.listen-address",
        &format!("127.0.0.1:{port}"),
        "--node-name",
        node,
    ]);
    if let Some(link) = meter {
        cmd.args(["--meter", &format!("um25c:{}", link.display())])
            .args(["--meter.timeout", "900ms"]);
    }
    let exporter = cmd
        .stderr(std::fs::File::create(dir.join("exporter.log")).unwrap())
        .spawn()
        .expect("starting the exporter");
    let exporter = Guard::new("exporter", exporter);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    let q = format!("greenpipe_node_cpu_seconds_total{{node=\"{node}\"}}");
    wait_for(Duration::from_secs(60), || {
        (!prom.query(&q).ok()?.is_empty()).then_some(())
    })
    .expect("the exporter's series reach Prometheus");
    (exporter, prom)
}

/// `run --plan plan --node node --prometheus-url url`.
fn run_args<'a>(plan: &'a Path, node: &'a str, prometheus_url: &'a str) -> [&'a str; 7] {
    [
        "run",
        "--plan",
        plan.to_str().expect("a UTF-8 plan path"),
        "--node",
        node,
        "--prometheus-url",
        prometheus_url,
    ]
}

fn campaign(args: &[&str], out: &Path) -> Command {
    let mut cmd = Command::new(workspace_binary("greenpipe-campaign"));
    cmd.args(args).arg("--out").arg(out);
    cmd
}

/// `csv` rows as maps keyed by its header.
fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &BTreeMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?} in {row:?}", row[key]))
}

fn windows(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("windows.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The CI plan's steps: (name, tag).
fn ci_steps() -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(workspace_root().join("deploy/profiling/plans/ci.toml")).unwrap();
    let plan: toml::Value = toml::from_str(&text).unwrap();
    plan["step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["tag"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The emulated meter's function (a test fixture): 3 W idle, 2.5 W per busy CPU, 1 W per
/// 50 MB/s of disk traffic, 20 mW of noise; rates over a trailing 5 s like the model's features.
const EMULATED: PowerFunction = PowerFunction {
    idle_watts: 3.0,
    watts_per_cpu: 2.5,
    watts_per_disk_byte: 2e-8,
    dynamic_scale: 1.0,
    noise_watts: 0.02,
};

/// The bound on the selected model's validation MAPE against the emulated meter. The meter is
/// linear in busy CPU time and disk bytes, both of which the exporter measures, so a model can
/// learn it almost exactly; what is left is (a) the 20 mW noise (< 0.7 % of the ≥ 3 W power),
/// (b) the meter's 5 s trailing window not lining up with the exporter's scrapes to the second,
/// so load changes on this shared machine (other builds and tests run beside this one) show up
/// as error for a second or two, and (c) tree models' step-wise fits. 10 % leaves room for (b)
/// under heavy background load while failing a model that has not learnt the CPU term (a
/// constant-power model is off by 30–60 % between idle and loaded windows).
const MAPE_BOUND_PERCENT: f64 = 10.0;

// The emulated meter follows the whole host's load, and so does the model's input: other tests
// beside it shift the windows' load under the campaign's steps (validation MAPE 11–20 % in two
// full runs of 2026-12-06, 0.3–0.5 % alone).
#[test]
#[ignore = "reads the whole host's load: scripts/test.sh runs it alone, after the other tests"]
fn ci_plan_end_to_end_with_the_closed_loop_meter() {
    // Built before the clock starts: the campaign finds it beside the estimator.
    workspace_binary("greenpipe-workload");
    let dir = tempfile::tempdir().unwrap();
    let node = "campaign-ci";
    let link = dir.path().join("rfcomm-campaign");
    let _meter = ClosedLoopMeter::start(&link, EMULATED, LoopSettings::default())
        .expect("closed-loop meter");
    let (_exporter, prom) = stack(dir.path(), node, Some(&link));
    let out = dir.path().join("campaign");
    let plan = workspace_root().join("deploy/profiling/plans/ci.toml");
    let started = std::time::Instant::now();
    let status = campaign(&run_args(&plan, node, &prom.url), &out)
        .status()
        .expect("running campaign run");
    eprintln!(
        "CI plan wall time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(status.success(), "campaign run failed: {status}");

    // Every step ran to the end and has its trace; the model file exists.
    let steps = ci_steps();
    let records = windows(&out);
    for (name, tag) in &steps {
        let w = records
            .iter()
            .rev()
            .find(|w| w["workload"] == name.as_str())
            .unwrap_or_else(|| panic!("no window for {name}"));
        assert_eq!(w["status"], "complete", "{name}: {w}");
        assert!(w["end"].as_f64().unwrap() > w["start"].as_f64().unwrap());
        let trace = out.join("traces").join(tag).join(format!("{name}.csv"));
        assert!(trace.exists(), "no trace {}", trace.display());
    }
    let model: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.json")).unwrap()).unwrap();
    let model_name = model["models"][0]["name"].as_str().unwrap().to_string();

    // Validation rows for every validate step, for the model and both baselines.
    let summary = csv_rows(&out.join("summary.csv"));
    let validate: Vec<&String> = steps
        .iter()
        .filter(|(_, t)| t == "validate")
        .map(|(n, _)| n)
        .collect();
    for name in &validate {
        for m in [
            model_name.as_str(),
            "baseline_cpu_linear",
            "baseline_stress_trained",
        ] {
            assert!(
                summary
                    .iter()
                    .any(|r| r["workload"] == **name && r["model"] == m),
                "no validation row for {name} / {m}: {summary:?}"
            );
        }
    }
    let all = summary
        .iter()
        .find(|r| r["workload"] == "ALL" && r["model"] == model_name)
        .expect("an ALL row for the model");
    let mape = num(all, "mape_percent");
    eprintln!("validation MAPE against the emulated meter: {mape:.2} %");
    assert!(
        mape < MAPE_BOUND_PERCENT,
        "validation MAPE {mape} % >= {MAPE_BOUND_PERCENT} %"
    );

    // The latency-energy table and the plots.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    // The report's figures in the test log (`--nocapture`): the tempdir goes with the test.
    eprintln!("{report}");
    assert!(
        report.contains("## Latency and energy per inference"),
        "{report}"
    );
    assert!(report.contains("% MAPE"), "{report}");
    // The exporter's own power, from its CPU time, as a share of node power: above zero (it
    // ran) and far below the node's (the 2 % budget is stated on real boards, not asserted on a
    // shared test machine).
    let overhead = report
        .lines()
        .find(|l| l.starts_with("| predicted |") && report.contains("## Monitoring overhead"))
        .unwrap_or_else(|| panic!("no monitoring-overhead row:\n{report}"));
    let share: f64 = overhead.split('|').nth(5).unwrap().trim().parse().unwrap();
    assert!(
        share > 0.0 && share < 50.0,
        "exporter share {share} %: {overhead}"
    );
    for plot in ["energy_vs_latency.png", "error_by_threads.png"] {
        let bytes = std::fs::read(out.join(plot)).unwrap_or_default();
        assert!(bytes.starts_with(b"\x89PNG"), "{plot} is not a PNG");
    }
    for name in &validate {
        let png = out
            .join("validate")
            .join(format!("{node}__{name}__validate.png"));
        assert!(png.exists(), "no {}", png.display());
    }

    // Energy: one meter and one predicted row per inference step, with latency; energy per
    // inference × inferences is the container's energy.
    let energy = csv_rows(&out.join("energy.csv"));
    for name in &validate {
        for source in ["meter", "predicted"] {
            let r = energy
                .iter()
                .find(|r| r["workload"] == **name && r["power_source"] == source)
                .unwrap_or_else(|| panic!("no {source} energy row for {name}: {energy:?}"));
            let inferences = num(r, "inferences");
            assert!(inferences > 0.0, "{r:?}");
            assert!(num(r, "latency_p50_seconds") > 0.0);
            assert!(num(r, "latency_p95_seconds") >= num(r, "latency_p50_seconds"));
            let container = num(r, "container_energy_joules");
            assert!(
                container > 0.0 && container < num(r, "node_energy_joules"),
                "{r:?}"
            );
            let jpi = num(r, "joules_per_inference");
            assert!(
                (jpi * inferences - container).abs() <= 1e-4 * container + 1e-3,
                "{jpi} J × {inferences} vs {container} J"
            );
        }
    }
    // Conservation: the containers of every window add up to the node.
    let containers = csv_rows(&out.join("containers.csv"));
    let mut sums: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for r in &containers {
        let e = sums
            .entry((r["workload"].clone(), r["power_source"].clone()))
            .or_insert((0.0, num(r, "node_energy_joules")));
        e.0 += num(r, "energy_joules");
    }
    assert!(sums.len() >= 2 * steps.len(), "{sums:?}");
    for ((w, s), (sum, node_j)) in &sums {
        assert!(
            (sum - node_j).abs() <= 1e-6 * node_j + 1e-4,
            "{w}/{s}: containers {sum} J vs node {node_j} J"
        );
    }

    // The report is rebuilt from the directory alone.
    std::fs::remove_file(out.join("report.md")).unwrap();
    let status = campaign(&["report"], &out).status().unwrap();
    assert!(status.success());
    assert!(out.join("report.md").exists());
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn interrupted_campaign_resumes_and_failures_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let node = "campaign-resume";
    // No meter: every window lacks meter data.
    let (_exporter, prom) = stack(dir.path(), node, None);
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"
[campaign]
warmup_seconds = 1
idle_seconds = 1
step_seconds = 4

[[step]]
name = "one"
group = "micro"
tag = "train"
[[step.process]]
command = "stress-ng"
args = ["--cpu", "1", "--timeout", "{timeout}"]

[[step]]
name = "two-fails"
group = "micro"
tag = "train"
[[step.process]]
command = "sh"
args = ["-c", "echo broken >&2; exit 3"]

[[step]]
name = "three"
group = "combined"
tag = "validate"
[[step.process]]
command = "stress-ng"
args = ["--cpu", "1", "--vm", "1", "--vm-bytes", "32M", "--timeout", "{timeout}"]
"#,
    )
    .unwrap();
    let out: PathBuf = dir.path().join("campaign");
    let args = run_args(&plan, node, &prom.url);
    // First run: interrupted with SIGINT once step one is recorded.
    let child = campaign(&args, &out).stderr(Stdio::null()).spawn().unwrap();
    let mut first = Guard::new("campaign", child);
    wait_for(Duration::from_secs(120), || {
        (!windows(&out).is_empty()).then_some(())
    })
    .expect("step one is recorded");
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(first.pid() as i32, libc::SIGINT);
    }
    let status = first
        .wait_exit(Duration::from_secs(60))
        .expect("the campaign stops on SIGINT");
    assert!(
        !status.success(),
        "an interrupted campaign does not report success"
    );
    let after_first = windows(&out);
    assert_eq!(after_first[0]["workload"], "one");
    assert_eq!(after_first[0]["status"], "complete");
    assert!(
        after_first
            .iter()
            .skip(1)
            .all(|w| w["status"] == "interrupted"),
        "{after_first:?}"
    );
    // The interrupted step's processes are gone.
    let stale: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .map(|c| c.contains(&format!("greenpipe-campaign-{}", first.pid())))
                .unwrap_or(false)
        })
        .filter(|pid| pid_alive(*pid))
        .collect();
    assert!(
        stale.is_empty(),
        "processes of the interrupted step survive: {stale:?}"
    );

    // Rerun: only the remaining steps run; the failing one is recorded and skipped.
    let rerun = campaign(&args, &out).output().unwrap();
    let stderr = String::from_utf8_lossy(&rerun.stderr);
    assert!(rerun.status.success(), "rerun failed:\n{stderr}");
    assert!(
        stderr.contains("resuming: 1 of 3 steps already done"),
        "{stderr}"
    );
    let all = windows(&out);
    let runs = |name: &str| all.iter().filter(|w| w["workload"] == name).count();
    assert_eq!(runs("one"), 1, "step one ran again: {all:?}");
    let last = |name: &str| {
        all.iter()
            .rev()
            .find(|w| w["workload"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(last("two-fails")["status"], "failed");
    assert!(last("two-fails")["error"]
        .as_str()
        .unwrap()
        .contains("exited with"));
    assert_eq!(last("three")["status"], "complete");
    // The report names the failure and the windows without meter data.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| two-fails | micro | train | failed |"),
        "{report}"
    );
    assert!(report.contains("no meter data in the window"), "{report}");
    // A third run has nothing left to do.
    let again = campaign(&args, &out).output().unwrap();
    assert!(again.status.success());
    assert_eq!(windows(&out).len(), all.len());
}
