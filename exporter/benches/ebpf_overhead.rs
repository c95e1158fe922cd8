//! Cost of the eBPF accounting under a context-switch storm, and the exporter's CPU share.
//!
//! Run with: `cargo bench -p greenpipe-exporter --bench ebpf_overhead` (as root; needs
//! stress-ng). Optional: `EBPF_BENCH_SECONDS=20` per phase (default 10).
//!
//! Phases of `stress-ng --switch 1`:
//! 1. without our programs: switches per second and system CPU per switch;
//! 2. with the exporter's collectors sampling at 1 Hz, per-process accounting off, then on:
//!    the same figures, and the exporter's own CPU time (its share of one core);
//! 3. with kernel BPF run-time statistics on: the mean run time of each of our programs, with
//!    per-process accounting off and on loaded side by side, once with the switching pair
//!    spread over the CPUs and once pinned to one CPU (every switch changes process: the worst
//!    case for per-process holding). Statistics are off in phase 2 because they add their own
//!    clock reads to every run.
//!
//! Phases 1 and 2 measure the whole machine and are noisy on a shared host; phase 3 is the
//! program's own cost, measured by the kernel.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenpipe_exporter::bpf::{self, Accounting, Options};
use greenpipe_exporter::collector::cpu::parse_stat;
use greenpipe_exporter::config::Config;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;
use greenpipe_exporter::selfstat;

static FLOOR_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bench_floor.bpf.o"));

struct Load {
    seconds: f64,
    switches: u64,
    busy_seconds: f64,
}

impl Load {
    fn per_second(&self) -> f64 {
        self.switches as f64 / self.seconds
    }
    fn busy_ns_per_switch(&self) -> f64 {
        self.busy_seconds * 1e9 / self.switches as f64
    }
}

fn proc_stat() -> (u64, f64) {
    let (stat, _) = parse_stat(&std::fs::read_to_string("/proc/stat").unwrap());
    // user nice system idle iowait irq softirq steal: everything but idle and iowait.
    let m = stat.modes;
    let busy = m[0] + m[1] + m[2] + m[5] + m[6] + m[7];
    (
        stat.context_switches.unwrap_or(0),
        busy as f64 / selfstat::clock_ticks_per_second(),
    )
}

fn switch_storm(seconds: u64, pin_cpu: Option<u32>) -> Load {
    let (c0, b0) = proc_stat();
    let t0 = Instant::now();
    let timeout = format!("{seconds}s");
    let stress = [
        "stress-ng",
        "--switch",
        "1",
        "--timeout",
        &timeout,
        "--quiet",
    ];
    let mut command = match pin_cpu {
        // Both processes of the pair on one CPU: every switch changes process, the worst case
        // for per-process holding.
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()]).args(stress);
            c
        }
        None => {
            let mut c = Command::new(stress[0]);
            c.args(&stress[1..]);
            c
        }
    };
    let status = command
        .status()
        .expect("stress-ng (scripts/setup.sh installs it)");
    assert!(status.success(), "stress-ng: {status}");
    let (c1, b1) = proc_stat();
    Load {
        seconds: t0.elapsed().as_secs_f64(),
        switches: c1 - c0,
        busy_seconds: b1 - b0,
    }
}

fn sched_switch_programs() -> BTreeSet<u32> {
    aya::programs::loaded_programs()
        .flatten()
        .filter(|p| p.name_as_str() == Some("on_sched_switch"))
        .map(|p| p.id())
        .collect()
}

/// The exporter's collectors sampling at 1 Hz in a thread while `stress-ng --switch` runs.
struct ExporterRun {
    load: Load,
    cpu_seconds: f64,
    wall_seconds: f64,
    ticks: u64,
}

impl ExporterRun {
    fn print(&self, what: &str) {
        println!(
            "exporter at 1 Hz ({what}): {:.3} CPU-s over {:.1} s, {} ticks = {:.3} % of one core, {:.2} ms per tick",
            self.cpu_seconds,
            self.wall_seconds,
            self.ticks,
            100.0 * self.cpu_seconds / self.wall_seconds,
            1e3 * self.cpu_seconds / self.ticks.max(1) as f64
        );
    }
}

fn exporter_during_storm(config: Config, seconds: u64) -> ExporterRun {
    let before = sched_switch_programs();
    let mut sampler = Sampler::new(config).expect("sampler");
    assert!(
        sched_switch_programs().difference(&before).next().is_some(),
        "the ebpf collector did not attach (see its warning)"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let exporter = std::thread::spawn(move || {
        let cpu0 = selfstat::cpu_seconds();
        let t0 = Instant::now();
        let mut next = Instant::now();
        let mut ticks = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            let _ = sampler.sample_text();
            ticks += 1;
            next += Duration::from_secs(1);
            while Instant::now() < next && !stop2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        (
            selfstat::cpu_seconds() - cpu0,
            t0.elapsed().as_secs_f64(),
            ticks,
        )
    });
    let load = switch_storm(seconds, None);
    stop.store(true, Ordering::Relaxed);
    let (cpu_seconds, wall_seconds, ticks) = exporter.join().unwrap();
    ExporterRun {
        load,
        cpu_seconds,
        wall_seconds,
        ticks,
    }
}

/// (name, id, run count, run time) of our programs and the floor programs.
fn snapshot() -> Vec<(String, u32, u64, Duration)> {
    aya::programs::loaded_programs()
        .flatten()
        .filter(|p| {
            p.name_as_str()
                .is_some_and(|n| n.starts_with("on_") || n.starts_with("floor_"))
        })
        .map(|p| {
            (
                p.name_as_str().unwrap_or("").to_string(),
                p.id(),
                p.run_count(),
                p.run_time(),
            )
        })
        .collect()
}

/// Kernel-measured mean run time of each program in `ids` (label → id) over one storm.
fn timed_storm(seconds: u64, pin_cpu: Option<u32>, ids: &[(String, u32)]) {
    let s0 = snapshot();
    let timed = switch_storm(seconds, pin_cpu);
    let s1 = snapshot();
    println!(
        "kernel BPF stats, stress-ng --switch 1{} for {:.1} s ({:.0} switches/s):",
        pin_cpu.map_or(String::new(), |c| format!(" pinned to CPU {c}")),
        timed.seconds,
        timed.per_second()
    );
    for (label, id) in ids {
        let (Some((_, _, c0, t0)), Some((_, _, c1, t1))) = (
            s0.iter().find(|(_, i, _, _)| i == id),
            s1.iter().find(|(_, i, _, _)| i == id),
        ) else {
            continue;
        };
        let runs = c1 - c0;
        if runs == 0 {
            continue;
        }
        let ns = (t1.as_nanos() - t0.as_nanos()) as f64 / runs as f64;
        println!("  {label:<34} id {id:>6}: {runs:>10} runs, {ns:>6.1} ns per run");
    }
}

/// Loads the accounting programs with `options`; returns them and (label, id) of each.
fn load_accounting(options: Options, suffix: &str) -> (Accounting, Vec<(String, u32)>) {
    let before: BTreeSet<u32> = snapshot().iter().map(|(_, id, _, _)| *id).collect();
    let accounting = Accounting::load_with(bpf::ACCOUNTING_OBJECT, options).expect("accounting");
    let ids = snapshot()
        .into_iter()
        .filter(|(_, id, _, _)| !before.contains(id))
        .map(|(name, id, _, _)| (format!("{name} ({suffix})"), id))
        .collect();
    (accounting, ids)
}

fn instructions(id: u32) -> String {
    aya::programs::loaded_programs()
        .flatten()
        .find(|p| p.id() == id)
        .map(|p| {
            format!(
                "{} insns verified, {} translated",
                p.verified_instruction_count().unwrap_or(0),
                p.size_translated().unwrap_or(0) / 8
            )
        })
        .unwrap_or_default()
}

/// CPU per tick of the collectors with per-process accounting on while `extra` more sleeping
/// processes are in the per-process map (each process in the map costs two map system calls
/// per tick).
fn tick_with_processes(extra: usize) -> (usize, f64) {
    let mut config = Config::for_paths(Paths::default(), "bench");
    config.options.ebpf.per_process = true;
    let mut sampler = Sampler::new(config).expect("sampler");
    // Their own process group, so they all go with one kill of that group's id.
    let mut sleepers = std::os::unix::process::CommandExt::process_group(
        Command::new("sh").arg("-c").arg(format!(
            "i=0; while [ $i -lt {extra} ]; do sleep 30 & i=$((i+1)); done; wait"
        )),
        0,
    )
    .spawn()
    .expect("sh");
    let tracked = |text: &str| -> usize {
        text.lines()
            .find_map(|l| l.strip_prefix("greenpipe_exporter_bpf_processes_tracked{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0) as usize
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut in_map = 0;
    while Instant::now() < deadline {
        let text = String::from_utf8_lossy(&sampler.sample_text()).into_owned();
        in_map = tracked(&text);
        if in_map >= extra {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let ticks = 10;
    let cpu0 = selfstat::cpu_seconds();
    for _ in 0..ticks {
        let _ = sampler.sample_text();
    }
    let per_tick = (selfstat::cpu_seconds() - cpu0) / ticks as f64;
    // SAFETY: kill of the process group we created above.
    unsafe { libc::kill(-(sleepers.id() as i32), libc::SIGKILL) };
    let _ = sleepers.wait();
    (in_map, per_tick)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("ebpf_overhead: needs root to load BPF programs; skipped");
        return;
    }
    let seconds: u64 = std::env::var("EBPF_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);

    let base = switch_storm(seconds, None);
    let off = exporter_during_storm(Config::for_paths(Paths::default(), "bench"), seconds);
    let mut config = Config::for_paths(Paths::default(), "bench");
    config.options.ebpf.per_process = true;
    let on = exporter_during_storm(config, seconds);

    // The kernel's own accounting of our programs' run time, per-process off and on side by
    // side under the same storm, next to the floor of an empty program and a clock read on the
    // same tracepoint.
    let floor_btf = aya::Btf::from_sys_fs().expect("BTF");
    let before_floor: BTreeSet<u32> = snapshot().iter().map(|(_, id, _, _)| *id).collect();
    let mut floor =
        aya::Ebpf::load(FLOOR_OBJECT).expect("bench_floor object (GREENPIPE_BUILD_BPF=1)");
    for name in ["floor_empty", "floor_ktime"] {
        let p: &mut aya::programs::BtfTracePoint =
            floor.program_mut(name).unwrap().try_into().unwrap();
        p.load("sched_switch", &floor_btf).unwrap();
        p.attach().unwrap();
    }
    let floor_ids: Vec<(String, u32)> = snapshot()
        .into_iter()
        .filter(|(_, id, _, _)| !before_floor.contains(id))
        .map(|(name, id, _, _)| (name, id))
        .collect();
    let (off_programs, off_ids) = load_accounting(Options::default(), "per-process off");
    let (on_programs, on_ids) = load_accounting(
        Options {
            per_process: true,
            ..Options::default()
        },
        "per-process on",
    );
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).expect("BPF_ENABLE_STATS");
    let ids: Vec<(String, u32)> = off_ids
        .iter()
        .chain(&on_ids)
        .chain(&floor_ids)
        .cloned()
        .collect();
    let timed_seconds = seconds.min(5);
    let cpus = parse_stat(&std::fs::read_to_string("/proc/stat").unwrap())
        .0
        .cpus;
    println!("stress-ng --switch 1, {seconds} s per phase, {cpus} CPUs");
    println!(
        "without programs:      {:>10.0} switches/s, {:>6.0} ns busy CPU per switch",
        base.per_second(),
        base.busy_ns_per_switch()
    );
    for (what, run) in [("per-process off", &off), ("per-process on", &on)] {
        println!(
            "with {what:<17} {:>10.0} switches/s, {:>6.0} ns busy CPU per switch ({:+.0} ns, whole machine, noisy)",
            run.load.per_second(),
            run.load.busy_ns_per_switch(),
            run.load.busy_ns_per_switch() - base.busy_ns_per_switch()
        );
    }
    off.print("cpu, ebpf, perf collectors; per-process off");
    on.print("cpu, ebpf, perf collectors; per-process on");
    timed_storm(timed_seconds, None, &ids);
    timed_storm(timed_seconds, Some(0), &ids);
    drop(stats);
    for (label, id) in off_ids.iter().chain(&on_ids) {
        if label.starts_with("on_sched_switch") {
            println!("{label}: {}", instructions(*id));
        }
    }
    drop(floor);
    drop(off_programs);
    drop(on_programs);
    let (in_map, per_tick) = tick_with_processes(1000);
    println!(
        "exporter tick with per-process on and {in_map} processes in the map: {:.2} ms CPU",
        per_tick * 1e3
    );
}
