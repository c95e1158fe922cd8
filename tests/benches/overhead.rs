//! Overhead benchmark (not a test: it prints figures, it asserts nothing about time).
//!
//! Run as root with `cargo bench -p greenpipe-tests --bench overhead`.
//!
//! Creates 100 container-shaped cgroups (`greenpipe-bench-<pid>/docker-<64 hex>.scope`, in the v2
//! hierarchy and, on hybrid hosts, in the v1 cpuacct/memory/blkio hierarchies like a
//! systemd-driver runtime) holding 1,000 idle `sleep` processes, then measures:
//! 1. CPU time per collection cycle (collect + encode, default collectors), in process, with
//!    `getrusage(RUSAGE_THREAD)` around N cycles; and the same with `--collector.process`;
//! 2. the release binary's CPU per scrape (collection interval 1 h, so scrapes are all it does)
//!    and its resident memory after 15 one-second cycles;
//! 3. Debian's `prometheus-node-exporter` (default collectors) on a loopback port: CPU per
//!    scrape, from `/proc/<pid>/stat` before and after N scrapes; and the ratio.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenpipe_exporter::config::Config;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;
use greenpipe_tests::cgroup::{container_id, unified_root, v1_roots, TestCgroup};
use greenpipe_tests::scrape::fetch;
use greenpipe_tests::{free_port, wait_for, workspace_root, Guard};

const CONTAINERS: u32 = 100;
const PROCESSES_PER_CONTAINER: u32 = 10;
const CYCLES: u32 = 200;
const SCRAPES: u32 = 300;

fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// utime + stime of another process, in seconds (clock-tick resolution).
fn process_cpu_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11] + f[12]) as f64 / hz
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn in_process_cycle_cost(process_collector: bool) -> (f64, f64, usize) {
    let mut config = Config::for_paths(Paths::default(), "bench");
    if process_collector {
        config.collectors.push("process");
    }
    let mut sampler = Sampler::new(config).expect("collectors build");
    let mut bytes = 0;
    for _ in 0..5 {
        bytes = sampler.sample_text().len();
    }
    let (cpu0, wall0) = (thread_cpu_seconds(), Instant::now());
    for _ in 0..CYCLES {
        std::hint::black_box(sampler.sample_text());
    }
    let cpu = (thread_cpu_seconds() - cpu0) / CYCLES as f64;
    let wall = wall0.elapsed().as_secs_f64() / CYCLES as f64;
    (cpu, wall, bytes)
}

/// CPU seconds per scrape of a running exporter, from its /proc/<pid>/stat.
fn scrape_cost(pid: u32, url: &str) -> f64 {
    let client = reqwest::blocking::Client::new();
    let get = || {
        client
            .get(url)
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.bytes())
            .expect("scrape")
    };
    for _ in 0..3 {
        get();
    }
    let cpu0 = process_cpu_seconds(pid);
    for _ in 0..SCRAPES {
        get();
    }
    (process_cpu_seconds(pid) - cpu0) / SCRAPES as f64
}

fn spawn(name: &str, cmd: &mut Command) -> Guard {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    Guard::new(name, child)
}

fn main() {
    let Some(v2) = unified_root() else {
        eprintln!("overhead bench needs a cgroup v2 hierarchy");
        return;
    };
    let mut roots = vec![v2];
    roots.extend(v1_roots());
    println!(
        "hierarchies: {}",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut cg = TestCgroup::create(roots, &format!("greenpipe-bench-{}", std::process::id()))
        .expect("creating bench cgroups (run as root)");
    let mut sleepers: Vec<Child> = Vec::new();
    for c in 0..CONTAINERS {
        let rel = cg.add_container(&container_id(c)).unwrap();
        for _ in 0..PROCESSES_PER_CONTAINER {
            let child = Command::new("sleep")
                .arg("3600")
                .spawn()
                .expect("spawning sleep");
            cg.attach(&rel, child.id()).unwrap();
            sleepers.push(child);
        }
    }
    println!("{CONTAINERS} cgroups, {} idle processes", sleepers.len());

    let (cpu, wall, bytes) = in_process_cycle_cost(false);
    println!(
        "cycle (default collectors): {:.3} ms CPU, {:.3} ms wall, {} KiB exposition",
        cpu * 1e3,
        wall * 1e3,
        bytes / 1024
    );
    let (cpu_p, wall_p, _) = in_process_cycle_cost(true);
    println!(
        "cycle (+ process collector, top 10): {:.3} ms CPU, {:.3} ms wall",
        cpu_p * 1e3,
        wall_p * 1e3
    );

    let root = workspace_root();
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--quiet",
            "--bin",
            "greenpipe-exporter",
        ])
        .current_dir(&root)
        .status()
        .expect("cargo build --release");
    assert!(status.success(), "building the release exporter failed");
    let binary = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release/greenpipe-exporter");

    // RSS after 15 one-second cycles.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let exp = spawn(
        "greenpipe-exporter",
        Command::new(&binary).args(["--web.listen-address", &format!("127.0.0.1:{port}")]),
    );
    wait_for(Duration::from_secs(30), || fetch(&url).ok()).expect("exporter up");
    std::thread::sleep(Duration::from_secs(15));
    let rss = rss_mib(exp.pid());
    drop(exp);

    // Scrape cost alone: one cycle at start, then only scrapes.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let exp = spawn(
        "greenpipe-exporter",
        Command::new(&binary).args([
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--collection.interval",
            "1h",
        ]),
    );
    wait_for(Duration::from_secs(30), || fetch(&url).ok()).expect("exporter up");
    let ours_scrape = scrape_cost(exp.pid(), &url);
    drop(exp);

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let ne = spawn(
        "prometheus-node-exporter",
        Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
    );
    wait_for(Duration::from_secs(30), || fetch(&url).ok()).expect("node exporter up");
    let ne_scrape = scrape_cost(ne.pid(), &url);
    let ne_rss = rss_mib(ne.pid());
    drop(ne);

    println!("greenpipe-exporter RSS after 15 cycles: {rss:.1} MiB");
    println!(
        "greenpipe-exporter CPU per scrape (encoded sample served): {:.3} ms",
        ours_scrape * 1e3
    );
    println!(
        "prometheus-node-exporter CPU per scrape (collects on scrape): {:.3} ms, RSS {ne_rss:.1} MiB",
        ne_scrape * 1e3
    );
    let ours_total = cpu + ours_scrape;
    println!(
        "ratio node-exporter scrape / greenpipe (cycle + scrape): {:.1}x; / greenpipe scrape alone: {:.1}x",
        ne_scrape / ours_total,
        ne_scrape / ours_scrape.max(1e-9)
    );
    for mut s in sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
}
