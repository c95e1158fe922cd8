//! Slice arithmetic: the on-CPU time of slices still running, and of finished slices the BPF
//! side holds per CPU, which the counters map does not have yet.

use std::collections::HashMap;
use std::path::Path;

use crate::bpf::abi::RunningSlice;

/// How long each CPU's open slice has run at `now_ns`: the running task's scheduler runtime
/// since it was switched in (`runtime_of(tid)`, from `/proc/<tid>/schedstat`), which leaves
/// out what the hypervisor stole and interrupts took, as finished slices and `cpu.stat` do;
/// capped by the wall-clock time, which is used alone when the task is gone or is another
/// task (procfs of another pid namespace, a reused id).
pub fn open_ns(
    slices: &[RunningSlice],
    now_ns: u64,
    runtime_of: impl Fn(u64) -> Option<u64>,
) -> Vec<u64> {
    slices
        .iter()
        .map(|s| {
            if s.start_ns == 0 || now_ns <= s.start_ns || s.pid == 0 {
                return 0;
            }
            let wall = now_ns - s.start_ns;
            match runtime_of(s.pid) {
                Some(runtime) if runtime >= s.start_runtime_ns => {
                    wall.min(runtime - s.start_runtime_ns)
                }
                _ => wall,
            }
        })
        .collect()
}

/// A thread's scheduler runtime in nanoseconds: the first field of `/proc/<tid>/schedstat`
/// (updated at every switch and scheduler tick).
pub fn schedstat_runtime(procfs: &Path, tid: u64) -> Option<u64> {
    let text = std::fs::read_to_string(procfs.join(tid.to_string()).join("schedstat")).ok()?;
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// On-CPU nanoseconds of each cgroup not yet in the counters map: slices still running
/// (`open`, per slice, from [`open_ns`]), and finished slices the BPF side holds per CPU until
/// another cgroup runs there.
pub fn running_ns(slices: &[RunningSlice], open: &[u64]) -> HashMap<u64, u64> {
    held_ns(slices, open, |s| {
        (s.cgroup_id, [(s.pending_cgroup, s.pending_ns), (0, 0)])
    })
}

/// [`running_ns`] for any owner key: `fields` gives a slice's running owner and its held
/// (owner, ns) pairs; owner 0 is nobody (the idle task, an empty slot).
pub fn held_ns(
    slices: &[RunningSlice],
    open: &[u64],
    fields: impl Fn(&RunningSlice) -> (u64, [(u64, u64); 2]),
) -> HashMap<u64, u64> {
    let mut out: HashMap<u64, u64> = HashMap::new();
    for (s, open) in slices.iter().zip(open) {
        let (running, held) = fields(s);
        if running != 0 && *open != 0 {
            *out.entry(running).or_default() += open;
        }
        for (owner, ns) in held {
            if owner != 0 && ns != 0 {
                *out.entry(owner).or_default() += ns;
            }
        }
    }
    out
}

/// Attempts at reading the maps while no CPU moves held time into them.
pub(super) const READ_ATTEMPTS: usize = 3;

/// True when no CPU moved held time into a counters map between the two slice reads.
pub fn no_flush_between(before: &[RunningSlice], after: &[RunningSlice]) -> bool {
    before.len() == after.len()
        && before
            .iter()
            .zip(after)
            .all(|(b, a)| b.flushes == a.flushes)
}
