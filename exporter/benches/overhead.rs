//! Overhead benchmark (not a test: it prints figures, it asserts nothing about time).
//!
//! Run as root (needs Debian's prometheus-node-exporter) with `cargo bench -p greenpipe-exporter --bench overhead`.
//!
//! The setup is the light-exporter bar's: 100 pod-shaped cgroups
//! (`greenpipe-bench-<pid>/pod<uid>/docker-<64 hex>.scope`, in the v2 hierarchy and, on hybrid
//! hosts, in the v1 cpuacct/memory/blkio hierarchies as the kubelet's cgroupfs driver makes them)
//! holding 1,000 idle `sleep` processes, the default collectors (eBPF included). Then:
//! 1. in process: CPU time, heap allocations and bytes allocated per collection cycle
//!    (collect + encode), with `getrusage(RUSAGE_THREAD)` and a counting allocator around N
//!    cycles; the same with `--collector.process`;
//! 2. the bar: the release exporter at 1 s collection and Debian's `prometheus-node-exporter`
//!    (default collectors; it collects on scrape), both scraped once a second for
//!    `GREENPIPE_BENCH_SECONDS` (60) in the same loop: each one's CPU per second from
//!    its own v2 cgroup's `cpu.stat`, the ratio, and each one's resident memory at the end and at its peak;
//! 3. the release exporter's CPU per scrape alone (collection interval 1 h).
//!
//! `GREENPIPE_BENCH_PHASE=cycles` runs the setup and `GREENPIPE_BENCH_CYCLES` (200) cycles only,
//! inside `profiled_cycles`: `scripts/profile-exporter-cycle.sh` runs that under callgrind with
//! collection on in that function alone, so the instruction profile is one steady-state cycle's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use greenpipe_exporter::config::Config;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

const CONTAINERS: u32 = 100;
const PROCESSES_PER_CONTAINER: u32 = 10;
const SCRAPES: u32 = 300;

/// The system allocator, counting calls and bytes so a cycle's allocations are a figure.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counters are side effects.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for alloc.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as for alloc.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The bench's pods: `<root>/greenpipe-bench-<pid>/pod<uid>/docker-<id>.scope` in the v2
/// hierarchy and every v1 one the host mounts; members killed and directories removed on drop,
/// a panic included.
struct PodCgroups {
    roots: Vec<PathBuf>,
    dirs: Vec<String>,
    sleepers: Vec<Child>,
}

impl PodCgroups {
    fn create() -> PodCgroups {
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("cgroup.controllers").exists())
            .expect("the overhead bench needs a cgroup v2 hierarchy");
        let v1 = ["cpuacct", "memory", "blkio"]
            .iter()
            .map(|c| Path::new("/sys/fs/cgroup").join(c))
            .filter(|p| p.join("cgroup.procs").exists() && !p.join("cgroup.controllers").exists());
        let mut pods = PodCgroups {
            roots: std::iter::once(v2).chain(v1).collect(),
            dirs: Vec::new(),
            sleepers: Vec::new(),
        };
        pods.mkdir(format!("greenpipe-bench-{}", std::process::id()));
        pods
    }

    fn mkdir(&mut self, rel: String) {
        for root in &self.roots {
            let dir = root.join(&rel);
            std::fs::create_dir(&dir)
                .unwrap_or_else(|e| panic!("creating {} (run as root): {e}", dir.display()));
        }
        self.dirs.push(rel);
    }

    /// A pod with one container holding `processes` idle processes.
    fn add_pod(&mut self, index: u32, processes: u32) {
        let pod = format!("{}/pod5d1e0b7c-0000-4000-8000-{index:012x}", self.dirs[0]);
        let container = format!(
            "{pod}/docker-{:08x}{:056x}.scope",
            std::process::id(),
            index
        );
        self.mkdir(pod);
        self.mkdir(container.clone());
        for _ in 0..processes {
            let child = Command::new("sleep")
                .arg("3600")
                .spawn()
                .expect("spawning sleep");
            for root in &self.roots {
                std::fs::write(
                    root.join(&container).join("cgroup.procs"),
                    child.id().to_string(),
                )
                .expect("moving a sleeper into its cgroup");
            }
            self.sleepers.push(child);
        }
    }
}

impl Drop for PodCgroups {
    fn drop(&mut self) {
        for s in &mut self.sleepers {
            let _ = s.kill();
            let _ = s.wait();
        }
        for rel in self.dirs.iter().rev() {
            for root in &self.roots {
                let _ = std::fs::remove_dir(root.join(rel));
            }
        }
    }
}

/// A child process killed when dropped.
struct Guard(Child);

impl Guard {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn scrape(agent: &ureq::Agent, url: &str) -> Result<Vec<u8>, ureq::Error> {
    agent.get(url).call()?.body_mut().read_to_vec()
}

/// Waits up to 30 s for a first successful scrape.
fn wait_up(agent: &ureq::Agent, name: &str, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while scrape(agent, url).is_err() {
        assert!(Instant::now() < deadline, "{name} did not come up on {url}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// A v2 cgroup holding one measured process, for its CPU time to the microsecond, every thread
/// included (`/proc/<pid>/stat` counts in 10 ms clock ticks: a few dozen over a minute here).
/// Removed on drop; declare it after the process's `Guard` so the process is gone first.
struct CpuMeter(PathBuf);

impl CpuMeter {
    fn around(pid: u32, name: &str) -> CpuMeter {
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("cgroup.controllers").exists())
            .expect("the overhead bench needs a cgroup v2 hierarchy");
        let dir = v2.join(format!("greenpipe-bench-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {name} into {}: {e}", dir.display()));
        CpuMeter(dir)
    }

    /// CPU seconds the cgroup's processes used since they entered it.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(self.0.join("cpu.stat")).expect("cpu.stat");
        let usec: f64 = stat
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.parse().ok())
            .expect("usage_usec in cpu.stat");
        usec / 1e6
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A `/proc/<pid>/status` field in MiB (`VmRSS` now, `VmHWM` the peak).
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb / 1024.0
}

/// The default collectors, eBPF included, as the exporter runs without flags.
fn sampler(process_collector: bool) -> Sampler {
    let mut config = Config::for_paths(Paths::default(), "bench");
    if process_collector {
        config.collectors.push("process");
    }
    Sampler::new(config).expect("collectors build")
}

/// The cycles the instruction profile counts (callgrind's `--toggle-collect` names this).
#[inline(never)]
fn profiled_cycles(sampler: &mut Sampler, cycles: u32) {
    for _ in 0..cycles {
        std::hint::black_box(sampler.sample_text());
    }
}

struct CycleCost {
    cpu_seconds: f64,
    allocations: f64,
    allocated_bytes: f64,
    exposition_bytes: usize,
}

fn in_process_cycle_cost(process_collector: bool, cycles: u32) -> CycleCost {
    let mut sampler = sampler(process_collector);
    let mut exposition_bytes = 0;
    for _ in 0..5 {
        exposition_bytes = sampler.sample_text().len();
    }
    let (allocs0, bytes0) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        ALLOCATED_BYTES.load(Ordering::Relaxed),
    );
    let cpu0 = thread_cpu_seconds();
    profiled_cycles(&mut sampler, cycles);
    let per_cycle = |v: f64| v / cycles as f64;
    CycleCost {
        cpu_seconds: per_cycle(thread_cpu_seconds() - cpu0),
        allocations: per_cycle((ALLOCATIONS.load(Ordering::Relaxed) - allocs0) as f64),
        allocated_bytes: per_cycle((ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes0) as f64),
        exposition_bytes,
    }
}

/// CPU seconds per scrape of a running exporter.
fn scrape_cost(agent: &ureq::Agent, meter: &CpuMeter, url: &str) -> f64 {
    for _ in 0..3 {
        scrape(agent, url).expect("scrape");
    }
    let cpu0 = meter.cpu_seconds();
    for _ in 0..SCRAPES {
        scrape(agent, url).expect("scrape");
    }
    (meter.cpu_seconds() - cpu0) / SCRAPES as f64
}

fn spawn(name: &str, cmd: &mut Command) -> Guard {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    Guard(child)
}

/// One exporter in the bar run.
struct Scraped {
    name: &'static str,
    process: Guard,
    meter: CpuMeter,
    url: String,
    cpu0: f64,
}

impl Scraped {
    fn start(name: &'static str, port: u16, cmd: &mut Command) -> Scraped {
        let process = spawn(name, cmd);
        let meter = CpuMeter::around(process.pid(), name);
        Scraped {
            name,
            process,
            meter,
            url: format!("http://127.0.0.1:{port}/metrics"),
            cpu0: 0.0,
        }
    }
}

/// Both exporters scraped once a second, in the same loop, for `seconds`: CPU per second of
/// each over the same window, then resident memory now and at the peak.
fn bar_run(agent: &ureq::Agent, seconds: u32) {
    let ours_port = free_port();
    let theirs_port = free_port();
    let mut all = [
        Scraped::start(
            "greenpipe-exporter",
            ours_port,
            Command::new(env!("CARGO_BIN_EXE_greenpipe-exporter")).args([
                "--web.listen-address",
                &format!("127.0.0.1:{ours_port}"),
                "--log.level",
                "warn",
            ]),
        ),
        Scraped::start(
            "prometheus-node-exporter",
            theirs_port,
            Command::new("prometheus-node-exporter")
                .arg(format!("--web.listen-address=127.0.0.1:{theirs_port}")),
        ),
    ];
    for s in &all {
        wait_up(agent, s.name, &s.url);
    }
    // Past start-up (eBPF load, the first cycles) before the window opens.
    std::thread::sleep(Duration::from_secs(5));
    for s in &mut all {
        s.cpu0 = s.meter.cpu_seconds();
    }
    let started = Instant::now();
    for tick in 1..=seconds {
        for s in &all {
            scrape(agent, &s.url).unwrap_or_else(|e| panic!("scraping {}: {e}", s.name));
        }
        if let Some(wait) = Duration::from_secs(tick as u64).checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let window = started.elapsed().as_secs_f64();
    let mut cpu_ms_per_s = Vec::new();
    for s in &all {
        let pid = s.process.pid();
        let cpu = (s.meter.cpu_seconds() - s.cpu0) * 1e3 / window;
        cpu_ms_per_s.push(cpu);
        println!(
            "bar: {} CPU {cpu:.2} ms/s over {window:.0} s of 1 s scrapes, RSS {:.1} MiB (peak {:.1} MiB)",
            s.name,
            status_mib(pid, "VmRSS"),
            status_mib(pid, "VmHWM"),
        );
    }
    println!(
        "bar: greenpipe-exporter CPU / prometheus-node-exporter CPU = {:.2}",
        cpu_ms_per_s[0] / cpu_ms_per_s[1]
    );
}

fn main() {
    let mut pods = PodCgroups::create();
    for c in 0..CONTAINERS {
        pods.add_pod(c, PROCESSES_PER_CONTAINER);
    }
    println!(
        "{CONTAINERS} pod-shaped cgroups in {}, {} idle processes",
        pods.roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        pods.sleepers.len()
    );
    let cycles = env_u32("GREENPIPE_BENCH_CYCLES", 200);

    if std::env::var("GREENPIPE_BENCH_PHASE").as_deref() == Ok("cycles") {
        let mut sampler = sampler(false);
        for _ in 0..5 {
            sampler.sample_text();
        }
        profiled_cycles(&mut sampler, cycles);
        println!("{cycles} cycles profiled");
    } else {
        let c = in_process_cycle_cost(false, cycles);
        println!(
            "cycle (default collectors, eBPF included): {:.3} ms CPU, {:.0} allocations, {:.0} KiB allocated, {} KiB exposition",
            c.cpu_seconds * 1e3,
            c.allocations,
            c.allocated_bytes / 1024.0,
            c.exposition_bytes / 1024
        );
        let p = in_process_cycle_cost(true, cycles);
        println!(
            "cycle (+ process collector, top 10): {:.3} ms CPU, {:.0} allocations",
            p.cpu_seconds * 1e3,
            p.allocations
        );

        let agent = ureq::Agent::new_with_defaults();
        bar_run(&agent, env_u32("GREENPIPE_BENCH_SECONDS", 60));

        // Scrape cost alone: one cycle at start, then only scrapes.
        let port = free_port();
        let exp = Scraped::start(
            "greenpipe-exporter",
            port,
            Command::new(env!("CARGO_BIN_EXE_greenpipe-exporter")).args([
                "--web.listen-address",
                &format!("127.0.0.1:{port}"),
                "--collection.interval",
                "1h",
            ]),
        );
        wait_up(&agent, exp.name, &exp.url);
        println!(
            "greenpipe-exporter CPU per scrape (the encoded sample served): {:.3} ms",
            scrape_cost(&agent, &exp.meter, &exp.url) * 1e3
        );
    }
}
