//! A workload inside a pod-shaped cgroup under a running exporter: the container's CPU seconds
//! on the exporter rise while `greenpipe-workload` runs, and the run's window lands in the
//! campaign log carrying the same container id and pod UID the exporter labels it with (both
//! come from one parser). A benchmark stopped by SIGTERM still writes its window, marked
//! incomplete.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::exporter_cgroup::container_cpu;
use greenpipe_common::names::{container, exporter};
use greenpipe_tests::cgroup::{container_id, unified_root, usage_seconds, TestCgroup};
use greenpipe_tests::scrape::{fetch, sample};
use greenpipe_tests::{free_port, start_exporter, wait_for, workspace_binary, Guard};

const POD_UID: &str = "4f3e2d1c-0b0a-4987-8654-3210fedcba98";

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A page collected after this call (two collection cycles later).
fn fresh(url: &str) -> String {
    let start = sample(&fetch(url).unwrap(), exporter::COLLECTIONS_TOTAL, &[]).unwrap_or(0.0);
    wait_for(Duration::from_secs(20), || {
        let text = fetch(url).ok()?;
        (sample(&text, exporter::COLLECTIONS_TOTAL, &[])? >= start + 2.0).then_some(text)
    })
    .expect("exporter keeps collecting")
}

fn windows(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("campaign log lines are JSON"))
        .collect()
}

/// Starts the workload with `args` inside the cgroup directory `dir`.
fn in_cgroup(dir: &Path, bin: &Path, args: &[&str]) -> Guard {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} {}",
            dir.display(),
            bin.display(),
            quoted.join(" ")
        ))
        .stdout(Stdio::null())
        .spawn()
        .expect("starting greenpipe-workload");
    Guard::new("greenpipe-workload", child)
}

#[test]
fn workload_in_a_pod_cgroup_is_seen_by_the_exporter_and_logged() {
    let root = unified_root().expect("a cgroup v2 hierarchy (Debian 12 mounts one)");
    // A parent of its own: the other cgroup tests of this binary run in the same process.
    let mut cg = TestCgroup::create(
        vec![root],
        &format!("greenpipe-workload-{}", std::process::id()),
    )
    .expect("creating the test cgroup (tests run as root)");
    let id = container_id(7);
    let rel = cg.add_pod_container(POD_UID, &id).unwrap();
    let dir = cg.dir(&rel);

    let workload = workspace_binary("greenpipe-workload");
    let (_exporter, url) = start_exporter("workload-test", &[]);
    let before = wait_for(Duration::from_secs(30), || {
        container_cpu(&fetch(&url).ok()?, &id)
    })
    .expect("the exporter reports the pod's container");

    let logdir = tempfile::tempdir().unwrap();
    let log = logdir.path().join("campaign.jsonl");
    let log_s = log.to_str().unwrap();
    let web_port = free_port();
    let web = format!("127.0.0.1:{web_port}");
    let kernel_before = usage_seconds(&dir);
    let spawned_at = unix_now();
    let mut infer = in_cgroup(
        &dir,
        &workload,
        &[
            "infer",
            "--model",
            "mobilenet_v2",
            "--image-size",
            "64",
            "--duration",
            "4s",
            "--web.listen-address",
            &web,
            "--campaign-log",
            log_s,
            "--node",
            "workload-test",
        ],
    );
    let status = infer.wait_exit(Duration::from_secs(180));
    assert!(
        status.is_some_and(|s| s.success()),
        "infer failed: {status:?}"
    );

    let exited_at = unix_now();
    // The cgroup holds only the workload: what the kernel counted while it ran is its CPU.
    let kernel_after = usage_seconds(&dir);
    let used = kernel_after - kernel_before;
    assert!(used > 0.1, "the workload used {used} CPU seconds");
    let after_text = fresh(&url);
    let after = container_cpu(&after_text, &id).unwrap();
    let kernel = usage_seconds(&dir);
    // Collected after the exit, the exporter has all of it (cpu.stat in microseconds).
    assert!(
        after - before >= used - 1e-3,
        "container CPU {before} -> {after} s on the exporter, the kernel counted {used} s"
    );
    assert!(
        after <= kernel + 1e-6,
        "exported {after} s above the kernel's {kernel} s"
    );
    let pod_label = after_text
        .lines()
        .find(|l| l.starts_with(container::CPU_SECONDS_TOTAL) && l.contains(id.as_str()))
        .expect("the container's CPU line");
    assert!(pod_label.contains(POD_UID), "pod UID label: {pod_label}");

    let w = windows(&log);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["workload"], "infer");
    assert_eq!(w[0]["group"], "inference");
    assert_eq!(w[0]["container_id"], id.as_str());
    assert_eq!(w[0]["pod_uid"], POD_UID);
    assert_eq!(w[0]["node"], "workload-test");
    assert_eq!(w[0]["complete"], true);
    assert_eq!(w[0]["config"]["mode"], "local");
    assert!(w[0]["inferences"].as_u64().unwrap() > 0);
    let (start, end) = (
        w[0]["start"].as_f64().unwrap(),
        w[0]["end"].as_f64().unwrap(),
    );
    assert!(
        end - start >= 4.0,
        "window {start}..{end} shorter than --duration 4s"
    );
    assert!(
        spawned_at <= start && end <= exited_at,
        "window {start}..{end} outside the process's life {spawned_at}..{exited_at}"
    );

    // A benchmark cut short by SIGTERM: its window is written, marked incomplete.
    let cpu_before = usage_seconds(&dir);
    let mut bench = in_cgroup(
        &dir,
        &workload,
        &[
            "bench",
            "micro",
            "--only",
            "cpu-int",
            "--levels",
            "100",
            "--step",
            "10m",
            "--threads",
            "1",
            "--web.listen-address",
            &web,
            "--campaign-log",
            log_s,
        ],
    );
    // SIGTERM once the benchmark has counted work (its signal handler is installed before).
    let ops_url = format!("http://{web}/metrics");
    wait_for(Duration::from_secs(60), || {
        let ops = sample(
            &fetch(&ops_url).ok()?,
            "greenpipe_workload_operations_total",
            &[("workload", "cpu-int")],
        )?;
        (ops > 0.0).then_some(())
    })
    .expect("the benchmark counts operations");
    let status = bench.terminate();
    assert!(status.is_some_and(|s| s.success()), "bench exit {status:?}");
    assert!(
        usage_seconds(&dir) > cpu_before,
        "the benchmark used no CPU"
    );
    let w = windows(&log);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[1]["workload"], "cpu-int");
    assert_eq!(w[1]["group"], "micro");
    assert_eq!(w[1]["complete"], false);
    assert_eq!(w[1]["config"]["level"], 100);
    assert!(w[1]["operations"].as_u64().unwrap() > 0);
    assert_eq!(w[1]["container_id"], id.as_str());
}
