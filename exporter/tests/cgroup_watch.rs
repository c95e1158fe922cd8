//! The cgroup collector walks the real cgroup tree only after inotify reports a change: a
//! container cgroup made or removed on the real cgroupfs between two ticks is found, or dropped,
//! at the next tick.

use crate::kernel_support::{build, collect, require_root, value, TestCgroup};
use greenpipe_common::names::{container, label};
use greenpipe_exporter::collector::cgroup;

fn processes(set: &greenpipe_exporter::metrics::MetricSet, id: &str) -> Option<f64> {
    value(set, container::PROCESSES, &[(label::CONTAINER_ID, id)])
}

#[test]
fn a_container_cgroup_made_or_removed_between_ticks_is_seen_at_the_next() {
    require_root();
    let mut collector = build(&cgroup::SPEC);
    // The first tick walks; the second finds nothing changed and does not.
    collect(collector.as_mut());
    collect(collector.as_mut());

    let cg = TestCgroup::new();
    let id = cg.container_id.clone();
    let first = collect(collector.as_mut());
    assert!(
        processes(&first, &id).is_some(),
        "a cgroup made after the walk is found at the next tick"
    );
    let mut sleeper = cg.spawn("exec sleep 30");
    let mut found = None;
    // The shell moves itself in asynchronously.
    for _ in 0..50 {
        let set = collect(collector.as_mut());
        found = processes(&set, &id);
        if found == Some(1.0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(found, Some(1.0), "the new cgroup and its one process");

    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    drop(cg);
    let set = collect(collector.as_mut());
    assert_eq!(
        processes(&set, &id),
        None,
        "a removed cgroup is dropped at the next tick"
    );
}
