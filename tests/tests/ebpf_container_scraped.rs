//! End to end: a busy process in a Docker-shaped cgroup v2, the exporter binary's eBPF collector,
//! and a real Prometheus scraping it. The container's CPU time arrives under its container id with
//! `source="bpf"` and grows by at most one core for `stress-ng --cpu 1`. (The precise comparison
//! with the kernel's `cpu.stat` is `exporter/tests/bpf_accounting.rs`.) With
//! `--collector.ebpf.per-process`, the busy process's own series arrive too, under its pid and
//! container, and the page passes `promtool check metrics`.

use std::process::Command;
use std::time::Duration;

use greenpipe_tests::scrape::{fetch, promtool_check};
use greenpipe_tests::{free_port, spawn_exporter, wait_for, Guard, Prometheus};

/// A cgroup v2 directory named like a Docker container scope; killed and removed on drop.
struct ContainerCgroup {
    dir: std::path::PathBuf,
}

impl Drop for ContainerCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn usage_seconds(dir: &std::path::Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).unwrap();
    let usec: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    usec / 1e6
}

/// A Docker-shaped cgroup running `stress-ng --cpu 1`, and its container id.
fn busy_container() -> (ContainerCgroup, Guard, String) {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "needs root (BPF, cgroups)");
    let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .map(std::path::Path::new)
        .find(|d| d.join("cgroup.controllers").is_file())
        .expect("a cgroup v2 hierarchy");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let id = format!(
        "{:032x}{:032x}",
        nanos,
        std::process::id() as u128 * 0x9e37_79b9
    );
    let cgroup = ContainerCgroup {
        dir: root.join(format!("docker-{id}.scope")),
    };
    std::fs::create_dir(&cgroup.dir).unwrap();
    let stress = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec stress-ng --cpu 1 --timeout 120s --quiet",
            cgroup.dir.display()
        ))
        .spawn()
        .unwrap();
    (cgroup, Guard::new("stress-ng", stress), id)
}

/// The exporter binary on a free port with `extra` flags.
fn exporter(extra: &[&str]) -> (Guard, u16) {
    let port = free_port();
    (spawn_exporter("ebpf-node", port, extra, None), port)
}

#[test]
fn busy_container_cpu_reaches_prometheus_with_source_bpf() {
    let (cgroup, _stress, id) = busy_container();
    let (_exporter, port) = exporter(&[]);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    let series = format!(
        "greenpipe_container_cpu_seconds_total{{node=\"ebpf-node\",source=\"bpf\",container_id=\"{id}\"}}"
    );
    let Some(first) = wait_for(Duration::from_secs(60), || {
        prom.query_scalar(&series).ok().flatten()
    }) else {
        let seen = prom.query("greenpipe_container_cpu_seconds_total");
        panic!("{series} did not reach Prometheus; it has {seen:?}");
    };
    let kernel0 = usage_seconds(&cgroup.dir);
    let t0 = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let kernel = usage_seconds(&cgroup.dir) - kernel0;
    let last = prom.query_scalar(&series).unwrap().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let grown = last - first;
    eprintln!("bpf via Prometheus grew {grown:.3} s; cpu.stat {kernel:.3} s in {wall:.1} s");
    assert!(grown > 0.0, "the counter grows");
    // One single-threaded worker: at most one core over the window (+ one scrape interval on
    // each side, as scrapes are not aligned with our clock). Double counting would exceed it.
    assert!(grown <= wall + 2.0, "bpf grew {grown} s in {wall} s");
}

#[test]
fn busy_process_series_reach_prometheus_with_source_bpf_and_pass_promtool() {
    let (cgroup, stress, id) = busy_container();
    // The worker is stress-ng's child; the parent only waits.
    let worker = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(cgroup.dir.join("cgroup.procs"))
            .ok()?
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .find(|p| *p != stress.pid())
    })
    .expect("stress-ng worker in the cgroup");
    let (_exporter, port) = exporter(&["--collector.ebpf.per-process"]);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    let series = format!(
        "greenpipe_process_cpu_seconds_total{{node=\"ebpf-node\",source=\"bpf\",pid=\"{worker}\",container_id=\"{id}\"}}"
    );
    let Some(first) = wait_for(Duration::from_secs(60), || {
        prom.query_scalar(&series).ok().flatten()
    }) else {
        let seen = prom.query("greenpipe_process_cpu_seconds_total");
        panic!("{series} did not reach Prometheus; it has {seen:?}");
    };
    let t0 = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let last = prom.query_scalar(&series).unwrap().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let grown = last - first;
    eprintln!("worker {worker}: bpf via Prometheus grew {grown:.3} s in {wall:.1} s");
    assert!(grown > 0.0, "the counter grows");
    assert!(grown <= wall + 2.0, "bpf grew {grown} s in {wall} s");

    let text = fetch(&format!("http://127.0.0.1:{port}/metrics")).unwrap();
    for name in [
        "greenpipe_process_page_cache_hits_total",
        "greenpipe_process_disk_bytes_total",
        "greenpipe_process_network_bytes_total",
        "greenpipe_exporter_bpf_processes_tracked",
    ] {
        assert!(text.contains(&format!("# TYPE {name} ")), "{name} missing");
    }
    // Cardinality: the default top-N (10) processes, not every process of the node.
    let exported = text
        .lines()
        .filter(|l| l.starts_with("greenpipe_process_cpu_seconds_total{"))
        .filter(|l| l.contains("source=\"bpf\""))
        .count();
    assert!(
        (1..=10).contains(&exported),
        "{exported} processes exported"
    );
    if let Err(problems) = promtool_check(&text) {
        panic!("promtool check metrics: {problems}");
    }
}
