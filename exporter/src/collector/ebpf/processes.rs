//! Per-process series of the `ebpf` collector (`--collector.ebpf.per-process`, off by default):
//! CPU time, page-cache, block and network activity per process (tgid), `source="bpf"`, for the
//! top N processes by recent CPU — the same N, ranking and labels as the procfs `process`
//! collector ([`super::super::process::top_n`], [`Labeler`]).
//!
//! The BPF side deletes a process's entry when its last thread exits. A finished slice still
//! held on another CPU when the process died can recreate the entry afterwards; every few ticks
//! this side deletes entries whose process is gone from procfs, so the map holds live processes
//! only.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use greenpipe_common::contract;
use greenpipe_common::names::source;

use super::{emit_counters, Families};
use crate::bpf::abi::{CgroupCounters, RunningSlice};
use crate::bpf::Accounting;
use crate::collector::process::{labels, top_n, Labeler};
use crate::metrics::MetricSet;

/// What was exported for one process at the previous tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Seen {
    /// Finished-slice CPU of its map entry (going down means a new entry: pid reuse).
    finished_ns: u64,
    /// CPU exported (finished + running), never exported lower for the same entry.
    exported_ns: u64,
}

/// One process of this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Process id (tgid).
    pub tgid: u32,
    /// CPU nanoseconds to export.
    pub cpu_ns: u64,
    /// CPU nanoseconds since the previous tick (the ranking key).
    pub recent_ns: u64,
    /// The other counters (their `cpu_ns` is the finished part only).
    pub counters: CgroupCounters,
}

/// Per-process CPU totals that never go down for one process and restart for a new one.
#[derive(Debug, Default)]
pub struct ProcessLedger {
    seen: HashMap<u32, Seen>,
}

impl ProcessLedger {
    /// Rows of this tick from the map's entries and the CPU still running or held per CPU;
    /// forgets processes that appear in neither (so memory follows the map, not the churn).
    pub fn rows(&mut self, raw: &[(u32, CgroupCounters)], running: &HashMap<u64, u64>) -> Vec<Row> {
        let mut rows = Vec::with_capacity(raw.len() + running.len());
        let mut seen = HashMap::with_capacity(raw.len() + running.len());
        let mut push = |tgid: u32, counters: CgroupCounters, running_ns: u64| {
            let now = counters.cpu_ns + running_ns;
            let (exported_ns, recent_ns) = match self.seen.get(&tgid) {
                Some(prev) if counters.cpu_ns >= prev.finished_ns => {
                    let exported = now.max(prev.exported_ns);
                    (exported, exported - prev.exported_ns)
                }
                _ => (now, now),
            };
            seen.insert(
                tgid,
                Seen {
                    finished_ns: counters.cpu_ns,
                    exported_ns,
                },
            );
            rows.push(Row {
                tgid,
                cpu_ns: exported_ns,
                recent_ns,
                counters,
            });
        };
        for (tgid, counters) in raw {
            let running_ns = running.get(&u64::from(*tgid)).copied().unwrap_or(0);
            push(*tgid, *counters, running_ns);
        }
        // Processes whose time so far is all in running or held slices (no entry yet).
        let in_map: HashSet<u32> = raw.iter().map(|(t, _)| *t).collect();
        for (tgid, ns) in running {
            let Ok(tgid) = u32::try_from(*tgid) else {
                continue;
            };
            if !in_map.contains(&tgid) {
                push(tgid, CgroupCounters::default(), *ns);
            }
        }
        self.seen = seen;
        rows
    }

    /// Processes remembered (bounded by the map size plus the CPUs).
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when no process is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// On-CPU nanoseconds of each process (tgid) not yet in the per-process map: its running
/// slices (`open`, per slice, from [`super::open_ns`]) and the finished ones held in either
/// per-CPU slot.
pub fn running_ns(slices: &[RunningSlice], open: &[u64]) -> HashMap<u64, u64> {
    super::held_ns(slices, open, |s| {
        (
            s.tgid,
            [
                (s.pending_tgid, s.pending_process_ns),
                (s.pending_tgid_older, s.pending_process_ns_older),
            ],
        )
    })
}

/// The per-process part of the collector.
#[derive(Debug)]
pub struct Processes {
    top_n: usize,
    procfs: PathBuf,
    labeler: Labeler,
    ledger: ProcessLedger,
}

impl Processes {
    /// Exports the top `top_n` processes, labelled from `procfs`.
    pub fn new(procfs: &Path, top_n: usize) -> Processes {
        Processes {
            top_n,
            procfs: procfs.to_path_buf(),
            labeler: Labeler::new(procfs),
            ledger: ProcessLedger::default(),
        }
    }

    /// Emits this tick's series from the map's entries `raw`, the per-CPU `slices` read after
    /// them and their `open` times. With `sweep`, entries of processes gone from procfs are
    /// deleted.
    pub fn collect(
        &mut self,
        accounting: &mut Accounting,
        raw: &[(u32, CgroupCounters)],
        slices: &[RunningSlice],
        open: &[u64],
        sweep: bool,
        out: &mut MetricSet,
    ) -> Result<(), crate::bpf::MapError> {
        let running = running_ns(slices, open);
        let mut rows = self.ledger.rows(raw, &running);
        let mut tracked = raw.len();
        if sweep {
            for (tgid, _) in raw {
                if !self.procfs.join(tgid.to_string()).exists() {
                    accounting.forget_process(*tgid)?;
                    tracked -= 1;
                }
            }
        }
        top_n(&mut rows, self.top_n, |r| (r.recent_ns, r.cpu_ns, r.tgid));
        for row in &rows {
            // Gone since the map was read (or a leftover entry the next sweep deletes).
            let Some(comm) = self.labeler.comm(row.tgid) else {
                continue;
            };
            let container = self.labeler.container(row.tgid);
            let pid = row.tgid.to_string();
            emit_counters(
                out,
                accounting,
                &PROCESS_FAMILIES,
                &labels(&pid, &comm, &container, source::BPF),
                row.cpu_ns,
                &row.counters,
            );
        }
        out.push(
            &contract::exporter::BPF_PROCESSES_TRACKED,
            &[],
            tracked as f64,
        );
        Ok(())
    }
}

const PROCESS_FAMILIES: Families = Families {
    cpu_seconds: &contract::process::CPU_SECONDS_TOTAL,
    page_cache_hits: &contract::process::PAGE_CACHE_HITS_TOTAL,
    page_cache_additions: &contract::process::PAGE_CACHE_ADDITIONS_TOTAL,
    disk_bytes: &contract::process::DISK_BYTES_TOTAL,
    network_bytes: &contract::process::NETWORK_BYTES_TOTAL,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(ns: u64) -> CgroupCounters {
        CgroupCounters {
            cpu_ns: ns,
            ..Default::default()
        }
    }

    #[test]
    fn cpu_never_goes_down_for_a_process_and_restarts_for_a_reused_pid() {
        let mut ledger = ProcessLedger::default();
        let running = |pairs: &[(u64, u64)]| pairs.iter().copied().collect::<HashMap<_, _>>();
        let r = ledger.rows(&[(10, cpu(1_000))], &running(&[(10, 500)]));
        assert_eq!((r[0].cpu_ns, r[0].recent_ns), (1_500, 1_500));
        // The open slice ended just before the previous read: no step down.
        let r = ledger.rows(&[(10, cpu(1_490))], &running(&[]));
        assert_eq!((r[0].cpu_ns, r[0].recent_ns), (1_500, 0));
        let r = ledger.rows(&[(10, cpu(1_700))], &running(&[]));
        assert_eq!((r[0].cpu_ns, r[0].recent_ns), (1_700, 200));
        // Exited, and the pid reused by a new process: its own time, not the old maximum.
        let r = ledger.rows(&[(10, cpu(30))], &running(&[]));
        assert_eq!((r[0].cpu_ns, r[0].recent_ns), (30, 30));
    }

    #[test]
    fn both_held_slots_and_the_running_slice_count_per_process() {
        let slice = RunningSlice {
            start_ns: 100,
            pid: 70,
            tgid: 7,
            pending_tgid: 7,
            pending_process_ns: 30,
            pending_tgid_older: 9,
            pending_process_ns_older: 20,
            // The cgroup fields are not per-process.
            cgroup_id: 1,
            pending_cgroup: 1,
            pending_ns: 1_000,
            ..Default::default()
        };
        let running = running_ns(&[slice], &super::super::open_ns(&[slice], 150, |_| None));
        assert_eq!(running.get(&7), Some(&80));
        assert_eq!(running.get(&9), Some(&20));
        assert_eq!(running.len(), 2);
    }

    #[test]
    fn processes_only_running_are_rows_and_gone_ones_are_forgotten() {
        let mut ledger = ProcessLedger::default();
        let running: HashMap<u64, u64> = [(7, 40), (8, 5)].into_iter().collect();
        let mut r = ledger.rows(&[(7, cpu(60))], &running);
        r.sort_by_key(|r| r.tgid);
        assert_eq!(
            r.iter().map(|r| (r.tgid, r.cpu_ns)).collect::<Vec<_>>(),
            vec![(7, 100), (8, 5)]
        );
        assert_eq!(ledger.len(), 2);
        ledger.rows(&[], &HashMap::new());
        assert!(ledger.is_empty(), "exited processes are not remembered");
    }
}
