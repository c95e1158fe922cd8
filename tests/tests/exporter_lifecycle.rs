//! The real exporter binary on this host: a missing source makes one collector unavailable with
//! a reason while the others go on, its live `/metrics` passes `promtool check metrics`, and
//! SIGTERM stops it with exit status 0.

use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_common::names::{exporter, label, node};
use greenpipe_tests::scrape::{fetch, promtool_check, sample};
use greenpipe_tests::{free_port, wait_for, workspace_binary, Guard};

fn start(extra: &[&str]) -> (Guard, String) {
    let port = free_port();
    let child = Command::new(workspace_binary("greenpipe-exporter"))
        .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
        .args(["--node-name", "lifecycle"])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the exporter");
    let url = format!("http://127.0.0.1:{port}/metrics");
    (Guard::new("exporter", child), url)
}

fn first_page(url: &str) -> String {
    wait_for(Duration::from_secs(30), || fetch(url).ok()).expect("exporter serves /metrics")
}

#[test]
fn missing_source_is_reported_and_others_go_on_then_sigterm_exits_zero() {
    let empty_sys = tempfile::tempdir().unwrap();
    let (mut guard, url) = start(&["--path.sysfs", empty_sys.path().to_str().unwrap()]);
    let text = first_page(&url);
    let available = |c: &str| {
        sample(
            &text,
            exporter::COLLECTOR_AVAILABLE,
            &[(label::COLLECTOR, c)],
        )
    };
    assert_eq!(available("diskstats"), Some(0.0), "{text}");
    let reason_line = text
        .lines()
        .find(|l| {
            l.starts_with(exporter::COLLECTOR_AVAILABLE) && l.contains("collector=\"diskstats\"")
        })
        .unwrap();
    assert!(
        reason_line.contains(&format!("{}/block", empty_sys.path().display())),
        "reason names the missing path: {reason_line}"
    );
    assert_eq!(available("cpu"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            exporter::COLLECTOR_SUCCESS,
            &[(label::COLLECTOR, "cpu")]
        ),
        Some(1.0)
    );
    assert!(sample(&text, node::CPU_SECONDS_TOTAL, &[(label::MODE, "user")]).unwrap() > 0.0);
    assert!(sample(&text, node::MEMORY_BYTES, &[(label::STATE, "total")]).unwrap() > 0.0);

    let status = guard.terminate().expect("exporter exits after SIGTERM");
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status:?}"
    );
}

#[test]
fn live_metrics_pass_promtool() {
    // Every collector on, per-process metrics included, so all families are checked.
    let (_guard, url) = start(&["--collector.process", "--collector.netdev.include-loopback"]);
    let text = wait_for(Duration::from_secs(30), || {
        let t = fetch(&url).ok()?;
        (sample(&t, exporter::COLLECTIONS_TOTAL, &[])? >= 2.0).then_some(t)
    })
    .expect("two collection cycles");
    assert!(text.contains("greenpipe_process_cpu_seconds_total{"));
    assert!(text.contains("greenpipe_container_cpu_seconds_total{"));
    if let Err(problems) = promtool_check(&text) {
        panic!("promtool check metrics: {problems}");
    }
}
