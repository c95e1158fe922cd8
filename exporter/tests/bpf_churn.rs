//! Process and cgroup churn: 10,000 short-lived processes and 200 short-lived container
//! cgroups. The BPF map must hold live cgroups only afterwards and the collector's memory must
//! not grow with what came and went. It runs in a process of its own, so the RSS
//! measured is the collector's and not another test's.

use std::time::Duration;

use crate::kernel_support::{build, collect, require_root, value, TestCgroup};
use greenpipe_common::names::exporter;
use greenpipe_exporter::collector::ebpf;
use greenpipe_exporter::selfstat::resident_bytes;

fn tracked(set: &greenpipe_exporter::metrics::MetricSet) -> f64 {
    value(set, exporter::BPF_CGROUPS_TRACKED, &[]).expect("tracked gauge")
}

#[test]
fn maps_and_memory_stay_bounded_under_churn() {
    crate::kernel_support::alone_in_process(
        module_path!(),
        "maps_and_memory_stay_bounded_under_churn",
        maps_and_memory_stay_bounded_under_churn_alone,
    );
}

fn maps_and_memory_stay_bounded_under_churn_alone() {
    require_root();
    let mut collector = build(&ebpf::SPEC);
    // Warm up: allocator pools, the first cgroup walk.
    for _ in 0..3 {
        collect(collector.as_mut());
    }
    let tracked_before = tracked(&collect(collector.as_mut()));
    let rss_before = resident_bytes().unwrap();
    let mut peak = tracked_before;

    let procs = TestCgroup::new();
    let mut churn = procs.spawn(
        "for j in 1 2 3 4; do (i=0; while [ $i -lt 2500 ]; do /bin/true; i=$((i+1)); done) & done; wait",
    );
    while churn.try_wait().unwrap().is_none() {
        peak = peak.max(tracked(&collect(collector.as_mut())));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(churn.wait().unwrap().success());
    drop(procs);

    for i in 0..200 {
        let cg = TestCgroup::new();
        cg.run("/bin/true");
        drop(cg);
        if i % 10 == 0 {
            peak = peak.max(tracked(&collect(collector.as_mut())));
        }
    }
    // Ticks for the walk after the removals and for map updates of the last exits.
    let mut after = 0.0;
    for _ in 0..12 {
        after = tracked(&collect(collector.as_mut()));
    }
    let rss_after = resident_bytes().unwrap();
    eprintln!(
        "cgroups tracked: before {tracked_before}, peak {peak}, after {after}; \
         RSS before {rss_before} B, after {rss_after} B"
    );
    assert!(peak > tracked_before, "churn cgroups were seen in the map");
    assert!(
        after <= tracked_before + 2.0,
        "removed cgroups are deleted from the map: {after} vs {tracked_before}"
    );
    assert!(
        rss_after < rss_before + 8 * 1024 * 1024,
        "collector memory grew by {} bytes",
        rss_after - rss_before
    );
}
