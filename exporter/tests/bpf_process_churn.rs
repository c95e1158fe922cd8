//! Process churn with per-process accounting on: 10,000 short-lived processes. The BPF side
//! deletes a process's entry when it exits, the collector sweeps the rare leftover, so the
//! per-process map holds live processes only afterwards and the collector's memory does not
//! grow with what came and went. It runs in a process of its own, so the RSS measured is the
//! collector's.

use std::time::Duration;

use crate::kernel_support::{build_with, collect, require_root, value, TestCgroup};
use greenpipe_common::names::exporter;
use greenpipe_exporter::bpf::{self, Accounting, Options};
use greenpipe_exporter::collector::ebpf;
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::selfstat::resident_bytes;

fn tracked(set: &MetricSet) -> f64 {
    value(set, exporter::BPF_PROCESSES_TRACKED, &[]).expect("processes tracked gauge")
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn live_processes() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count()
}

#[test]
fn per_process_map_and_memory_stay_bounded_under_process_churn() {
    crate::kernel_support::alone_in_process(
        module_path!(),
        "per_process_map_and_memory_stay_bounded_under_process_churn",
        per_process_map_and_memory_stay_bounded_under_process_churn_alone,
    );
}

fn per_process_map_and_memory_stay_bounded_under_process_churn_alone() {
    require_root();
    let mut collector = build_with(&ebpf::SPEC, |c| c.options.ebpf.per_process = true);
    // A second copy of the programs whose map nobody sweeps: what the BPF exit program
    // alone leaves behind.
    let unswept = Accounting::load_with(
        bpf::ACCOUNTING_OBJECT,
        Options {
            per_process: true,
            ..Options::default()
        },
    )
    .expect("load");
    // Warm up: allocator pools, the first cgroup walk, the host's processes entering the map.
    for _ in 0..3 {
        collect(collector.as_mut());
        std::thread::sleep(Duration::from_millis(200));
    }
    let tracked_before = tracked(&collect(collector.as_mut()));
    let rss_before = resident_bytes().unwrap();
    let mut peak = tracked_before;

    let spawned = 10_000;
    let procs = TestCgroup::new();
    let mut churn = procs.spawn(&format!(
        "for j in 1 2 3 4; do (i=0; while [ $i -lt {} ]; do /bin/true; i=$((i+1)); done) & done; wait",
        spawned / 4
    ));
    while churn.try_wait().unwrap().is_none() {
        peak = peak.max(tracked(&collect(collector.as_mut())));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(churn.wait().unwrap().success());
    drop(procs);
    // Let slices held on idle CPUs flush, then count what the exit program left.
    std::thread::sleep(Duration::from_millis(500));
    let entries = unswept.process_counters().unwrap();
    let leftover = entries.iter().filter(|(pid, _)| !alive(*pid)).count();
    // Enough ticks for the periodic sweep.
    let mut after = 0.0;
    for _ in 0..12 {
        after = tracked(&collect(collector.as_mut()));
    }
    let live = live_processes();
    let rss_after = resident_bytes().unwrap();
    eprintln!(
        "{spawned} processes: tracked before {tracked_before}, peak {peak}, after {after} \
         ({live} live processes on the host); without the sweep {} entries, {leftover} of exited \
         processes; RSS before {rss_before} B, after {rss_after} B",
        entries.len()
    );
    assert!(
        leftover <= spawned / 100,
        "the exit program deletes exited processes: {leftover} of {spawned} left"
    );
    assert!(
        after <= live as f64,
        "the map holds live processes only: {after} entries, {live} processes"
    );
    assert!(
        peak < tracked_before + spawned as f64 / 10.0,
        "exited processes do not pile up between sweeps: peak {peak}"
    );
    assert!(
        rss_after < rss_before + 8 * 1024 * 1024,
        "collector memory grew by {} bytes",
        rss_after - rss_before
    );
}
