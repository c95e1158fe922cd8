//! Cost of the eBPF accounting under a context-switch storm, and the exporter's CPU share.
//!
//! Run with: `cargo bench -p greenpipe-exporter --bench ebpf_overhead` (as root; needs
//! stress-ng). Optional: `EBPF_BENCH_SECONDS=20` per phase (default 10).
//!
//! Three phases of `stress-ng --switch 1`:
//! 1. without our programs: switches per second and system CPU per switch;
//! 2. with the exporter's collectors sampling at 1 Hz: the same figures, and the exporter's
//!    own CPU time (its share of one core);
//! 3. with kernel BPF run-time statistics on: the mean run time of each of our programs, the
//!    direct cost per context switch (statistics are off in phase 2 because they add their own
//!    clock reads to every run).
//!
//! Phases 1 and 2 measure the whole machine and are noisy on a shared host; phase 3 is the
//! program's own cost, measured by the kernel.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

fn switch_storm(seconds: u64) -> Load {
    let (c0, b0) = proc_stat();
    let t0 = Instant::now();
    let status = Command::new("stress-ng")
        .args([
            "--switch",
            "1",
            "--timeout",
            &format!("{seconds}s"),
            "--quiet",
        ])
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

    let base = switch_storm(seconds);

    let before = sched_switch_programs();
    let config = Config::for_paths(Paths::default(), "bench");
    let mut sampler = Sampler::new(config).expect("sampler");
    let ours: Vec<u32> = sched_switch_programs()
        .difference(&before)
        .copied()
        .collect();
    assert!(
        !ours.is_empty(),
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
            sampler,
        )
    });
    let with = switch_storm(seconds);
    stop.store(true, Ordering::Relaxed);
    let (exporter_cpu, exporter_wall, ticks, sampler) = exporter.join().unwrap();

    // Phase 3: the kernel's own accounting of our programs' run time, next to the floor of
    // an empty program and a clock read on the same tracepoint.
    let floor_btf = aya::Btf::from_sys_fs().expect("BTF");
    let mut floor =
        aya::Ebpf::load(FLOOR_OBJECT).expect("bench_floor object (GREENPIPE_BUILD_BPF=1)");
    for name in ["floor_empty", "floor_ktime"] {
        let p: &mut aya::programs::BtfTracePoint =
            floor.program_mut(name).unwrap().try_into().unwrap();
        p.load("sched_switch", &floor_btf).unwrap();
        p.attach().unwrap();
    }
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).expect("BPF_ENABLE_STATS");
    let snapshot = || -> Vec<(String, u32, u64, Duration)> {
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
    };
    let s0 = snapshot();
    let timed = switch_storm(seconds.min(5));
    let s1 = snapshot();
    drop(stats);
    drop(floor);
    drop(sampler);

    println!(
        "stress-ng --switch 1, {seconds} s per phase, {} CPUs",
        parse_stat(&std::fs::read_to_string("/proc/stat").unwrap())
            .0
            .cpus
    );
    println!(
        "without programs: {:>10.0} switches/s, {:>6.0} ns busy CPU per switch",
        base.per_second(),
        base.busy_ns_per_switch()
    );
    println!(
        "with programs:    {:>10.0} switches/s, {:>6.0} ns busy CPU per switch ({:+.0} ns, whole machine, noisy)",
        with.per_second(),
        with.busy_ns_per_switch(),
        with.busy_ns_per_switch() - base.busy_ns_per_switch()
    );
    println!(
        "exporter at 1 Hz: {:.3} CPU-s over {:.1} s, {ticks} ticks = {:.3} % of one core, {:.2} ms per tick",
        exporter_cpu,
        exporter_wall,
        100.0 * exporter_cpu / exporter_wall,
        1e3 * exporter_cpu / ticks.max(1) as f64
    );
    println!(
        "kernel BPF stats over {:.1} s ({:.0} switches/s):",
        timed.seconds,
        timed.per_second()
    );
    let floor_ids: Vec<u32> = s1
        .iter()
        .filter(|(n, _, _, _)| n.starts_with("floor_"))
        .map(|(_, id, _, _)| *id)
        .max()
        .map(|max| vec![max - 1, max])
        .unwrap_or_default();
    for (name, id, count, time) in &s1 {
        let mine = if name.starts_with("floor_") {
            floor_ids.contains(id)
        } else {
            name != "on_sched_switch" || ours.contains(id)
        };
        if !mine {
            continue;
        }
        let Some((_, _, c0, t0)) = s0.iter().find(|(_, i, _, _)| i == id) else {
            continue;
        };
        let runs = count - c0;
        if runs == 0 {
            continue;
        }
        let ns = (time.as_nanos() - t0.as_nanos()) as f64 / runs as f64;
        println!("  {name:<22} id {id:>6}: {runs:>10} runs, {ns:>6.1} ns per run");
    }
}
