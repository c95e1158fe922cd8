//! The exporter, scraped by a real Prometheus: its series arrive with the `node` label.

use std::time::Duration;

use greenpipe_tests::{free_port, spawn_exporter, wait_for, Prometheus};

#[test]
fn prometheus_scrapes_exporter_series() {
    let port = free_port();
    let _exporter = spawn_exporter("e2e-node", port, &[], None);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    let busy = wait_for(Duration::from_secs(30), || {
        prom.query_scalar("sum(greenpipe_node_cpu_seconds_total{node=\"e2e-node\"})")
            .ok()
            .flatten()
    })
    .expect("cpu seconds of e2e-node reach Prometheus");
    assert!(busy > 0.0);
}
