//! The live view (`greenpipe-estimator view`) in a real terminal: tmux, over a real Prometheus
//! holding the quick start demo's series (`system`, five pods, the gRPC server and its client).
//! At 140×40 and at 80×24 every one of the eight is on screen, no line wraps, and the order is
//! by name, not by power.

use std::process::Command;
use std::time::Duration;

use greenpipe_common::names::{component, container, estimate, label, SYSTEM_CONTAINER};
use greenpipe_tests::{gauge_series, now_ms, remote_write, wait_for, workspace_binary, Prometheus};

const PODS: [&str; 7] = [
    "cpu-burner",
    "memory-stream",
    "disk-writer",
    "infer-f32",
    "infer-int8",
    "infer-server",
    "infer-client",
];

/// A tmux server of the test's own, killed on drop.
struct Tmux(String);

impl Tmux {
    /// One server per screen size: a server whose last session was killed exits, and a
    /// `new-session` that reaches it while it exits fails with "server exited unexpectedly".
    fn new(size: &str) -> Tmux {
        Tmux(format!("greenpipe-view-{}-{size}", std::process::id()))
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .expect("running tmux (Debian package tmux)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .status();
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn every_demo_container_is_on_screen_at_140_by_40_and_at_80_by_24() {
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    let now = now_ms();
    let window = (now - 30_000, now, 1000);
    let node = [(label::NODE, "my-host"), (label::MODEL, "uncalibrated-vm")];
    let mut series = vec![
        gauge_series(estimate::NODE_POWER_WATTS, &node, 3.1, window),
        gauge_series(estimate::NODE_IDLE_POWER_WATTS, &node, 1.53, window),
    ];
    let mut pod_names = Vec::new();
    let containers = std::iter::once((SYSTEM_CONTAINER.to_string(), String::new(), 0.1)).chain(
        PODS.iter().enumerate().map(|(i, pod)| {
            let uid = format!("7a3c9e10-0000-4000-8000-00000000000{i}");
            pod_names.push(format!("{uid}={pod}"));
            // Power rising against the name order, so an order by power would differ.
            (format!("{i}").repeat(64), uid, 0.2 * (i + 1) as f64)
        }),
    );
    for (id, uid, dynamic) in containers {
        let processes = [
            (label::NODE, "my-host"),
            (label::CONTAINER_ID, id.as_str()),
            (label::POD_UID, uid.as_str()),
        ];
        let count = if uid.is_empty() { 140.0 } else { 2.0 };
        series.push(gauge_series(
            container::PROCESSES,
            &processes,
            count,
            window,
        ));
        for (part, watts) in [(component::IDLE, 0.01), (component::DYNAMIC, dynamic)] {
            let labels = [
                (label::NODE, "my-host"),
                (label::MODEL, "uncalibrated-vm"),
                (label::CONTAINER_ID, id.as_str()),
                (label::POD_UID, uid.as_str()),
                (label::COMPONENT, part),
            ];
            series.push(gauge_series(
                estimate::CONTAINER_POWER_WATTS,
                &labels,
                watts,
                window,
            ));
        }
    }
    remote_write(&prom.remote_write_url(), series).expect("remote write");

    let estimator = workspace_binary("greenpipe-estimator");
    let mut command = format!(
        "{} view --prometheus-url {} --duration 60",
        shell_quote(&estimator.to_string_lossy()),
        shell_quote(&prom.url)
    );
    for name in &pod_names {
        command.push_str(&format!(" --pod-name {}", shell_quote(name)));
    }
    for (columns, rows) in [(140, 40), (80, 24)] {
        let session = format!("view-{columns}x{rows}");
        let tmux = Tmux::new(&session);
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            &columns.to_string(),
            "-y",
            &rows.to_string(),
            &command,
        ]);
        let screen = wait_for(Duration::from_secs(30), || {
            let screen = tmux.run(&["capture-pane", "-p", "-t", &session]);
            PODS.iter().all(|p| screen.contains(p)).then_some(screen)
        })
        .unwrap_or_else(|| {
            panic!(
                "{columns}x{rows}: not every demo container on screen:\n{}",
                tmux.run(&["capture-pane", "-p", "-t", &session])
            )
        });
        let lines: Vec<&str> = screen.lines().collect();
        assert!(lines.len() <= rows, "{columns}x{rows}:\n{screen}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= columns),
            "{columns}x{rows}:\n{screen}"
        );
        assert!(screen.contains("  system "), "{columns}x{rows}:\n{screen}");
        assert!(!screen.contains("not shown"), "{columns}x{rows}:\n{screen}");
        assert!(screen.contains("uncalibrated-vm"), "{screen}");
        assert!(screen.contains("140 of 154 processes"), "{screen}");
        let order: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
            .filter(|n| *n == "system" || PODS.contains(n))
            .collect();
        let mut sorted = PODS.to_vec();
        sorted.sort_unstable();
        sorted.insert(0, "system");
        assert_eq!(order, sorted, "{columns}x{rows}:\n{screen}");
        eprintln!("{columns}x{rows}:\n{screen}");
    }
}
