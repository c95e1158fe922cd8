//! The exporter, scraped by a real Prometheus: its series arrive with the `node` label.

use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_tests::{free_port, wait_for, workspace_binary, Guard, Prometheus};

#[test]
fn prometheus_scrapes_exporter_series() {
    let port = free_port();
    let exporter = Command::new(workspace_binary("greenpipe-exporter"))
        .args([
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--node-name",
            "e2e-node",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("starting exporter");
    let _exporter = Guard::new("exporter", exporter);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    let busy = wait_for(Duration::from_secs(30), || {
        prom.query_scalar("sum(greenpipe_node_cpu_seconds_total{node=\"e2e-node\"})")
            .ok()
            .flatten()
    })
    .expect("cpu seconds of e2e-node reach Prometheus");
    assert!(busy > 0.0);
}
