//! Per-container on-CPU time, page-cache, block and network activity from the BPF programs of
//! `bpf/accounting.bpf.c` (see docs/ebpf.md), `source="bpf"`.
//!
//! The kernel side keeps raw per-cgroup counters; this side turns them into per-container
//! counters that only go up: it adds each cgroup's growth since the previous tick to its
//! container's total, so a cgroup removed or evicted from the bounded map never makes a total
//! drop, and it adds the slices still running on each CPU, so a container that never leaves the
//! CPU shows smooth usage rather than lumps at each context switch.
//!
//! With `--collector.ebpf.per-process` the same programs also account per process; the
//! per-process series are in [`processes`].//!
//! Split by role: [`ledger`] (per-owner monotonic totals), [`slices`] (on-CPU time of the slices
//! still running), [`emit`] (the declared families); this file loads the programs and ticks.

mod emit;
mod ledger;
pub mod processes;
mod slices;

use emit::CONTAINER_FAMILIES;
pub(crate) use emit::{emit_counters, Families};
pub use ledger::{Ledger, Owner, Totals};
use slices::READ_ATTEMPTS;
pub use slices::{held_ns, no_flush_between, open_ns, running_ns, schedstat_runtime};

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use greenpipe_common::contract;
use greenpipe_common::names::{label, source, SYSTEM_CONTAINER};
use tracing::warn;

use super::{CollectError, Collector, Context, Failure, OptionsError, Report, Spec};
use crate::bpf::abi::{CgroupCounters, RunningSlice};
use crate::bpf::{self, Accounting, LoadError, Options, PROGRAMS};
use crate::cgroup_ids::{mounted_v2_root, CgroupIndex};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "ebpf",
    default_enabled: true,
    help: "Per-container on-CPU time, page-cache hits, block and network bytes from eBPF programs (root, BTF)",
    build,
};

/// `--collector.ebpf.*`, `[ebpf]`.
#[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EbpfOptions {
    /// eBPF: also account CPU, page cache, disk and network per process and export the top-N
    /// (--collector.process.top-n) with source="bpf".
    #[arg(long = "collector.ebpf.per-process")]
    #[serde(default)]
    pub per_process: bool,
    /// eBPF per-process map bound (LRU; the least recently active process is evicted beyond
    /// it) [default: 8192].
    #[arg(long = "collector.ebpf.max-processes")]
    pub max_processes: Option<u32>,
}

impl EbpfOptions {
    /// The per-process map bound.
    pub fn max_processes(&self) -> u32 {
        self.max_processes.unwrap_or(bpf::DEFAULT_MAX_PROCESSES)
    }
}

impl super::CollectorOptions for EbpfOptions {
    fn merge(self, file: Self) -> Self {
        EbpfOptions {
            per_process: self.per_process || file.per_process,
            max_processes: self.max_processes.or(file.max_processes),
        }
    }

    fn validate(&self, enabled: &[&'static str]) -> Result<(), OptionsError> {
        if self.max_processes() == 0 {
            return Err(OptionsError::TooSmall {
                flag: "--collector.ebpf.max-processes",
                min: 1,
            });
        }
        if self.per_process && !enabled.contains(&SPEC.name) {
            // It would do nothing: say so rather than let the operator wait for series that never come.
            return Err(OptionsError::NeedsCollector {
                option: "per-process eBPF accounting (--collector.ebpf.per-process / [ebpf] per_process)",
                collector: SPEC.name,
            });
        }
        Ok(())
    }
}

/// Ticks between two sweeps of the per-process map for processes that exited.
const SWEEP_EVERY_TICKS: u64 = 10;

/// Longest `reason` label; the full message is logged.
const REASON_MAX: usize = 240;

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let root = mounted_v2_root(&ctx.paths.cgroupfs).map_err(CollectError::Unavailable)?;
    let options = Options {
        per_process: ctx.options.ebpf.per_process,
        max_processes: ctx.options.ebpf.max_processes(),
    };
    let accounting = Accounting::load_with(bpf::ACCOUNTING_OBJECT, options).map_err(|e| {
        let full = e.to_string();
        warn!(error = %full, "eBPF accounting unavailable; procfs and cgroup collectors go on");
        CollectError::Unavailable(short_reason(&e))
    })?;
    for (program, error) in &accounting.programs {
        if let Some(error) = error {
            warn!(program, %error, "BPF program not attached; its signal is not exported");
        }
    }
    // One --collector.process.top-n bounds both per-process exports (a shared setting).
    let processes = options
        .per_process
        .then(|| processes::Processes::new(&ctx.paths.procfs, ctx.shared.processes_top_n));
    Ok(Box::new(EbpfCollector {
        accounting,
        procfs: ctx.paths.procfs.clone(),
        index: CgroupIndex::new(root),
        ledger: Ledger::default(),
        processes,
        ticks: 0,
    }))
}

/// The head of the message and the verifier's verdict: the last line of its log before the
/// statistics it appends (`verification time`, `stack depth`, `processed N insns`).
pub fn short_reason(err: &LoadError) -> String {
    shorten(&err.to_string())
}

/// [`short_reason`] of any error text.
fn shorten(text: &str) -> String {
    let (head, log) = match text.split_once("Verifier output:") {
        Some((head, log)) => (head.trim().trim_end_matches('.'), log),
        None => (text.lines().next().unwrap_or_default(), ""),
    };
    let is_stats = |l: &str| {
        l.starts_with("verification time")
            || l.starts_with("stack depth")
            || l.starts_with("processed ")
    };
    let verdict = log
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !is_stats(l));
    let mut reason = match verdict {
        Some(v) => format!("{head}: verifier: {v}"),
        None => head.to_string(),
    };
    if reason.len() > REASON_MAX {
        let mut cut = REASON_MAX;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    reason
}

struct EbpfCollector {
    accounting: Accounting,
    /// Where the running tasks' scheduler runtimes are read.
    procfs: PathBuf,
    index: CgroupIndex,
    ledger: Ledger,
    /// Per-process export, when per-process accounting is on.
    processes: Option<processes::Processes>,
    ticks: u64,
}

type Reading = (
    Vec<(u64, CgroupCounters)>,
    Vec<(u32, CgroupCounters)>,
    Vec<RunningSlice>,
);

impl EbpfCollector {
    fn failed(e: crate::bpf::MapError) -> CollectError {
        Failure::from(e).into()
    }

    /// The maps, then the slices. Time a CPU holds moves into a map now and then; if it moved
    /// while the maps were being read, it could be in neither read or in both, so the read is
    /// retaken (a busy process holds seconds, and a map of hundreds of processes takes a
    /// millisecond to read). After the last attempt, whatever was read is used: at worst a
    /// share of held time shows one tick late.
    fn consistent_read(&self) -> Result<Reading, CollectError> {
        let mut before = self.accounting.running().map_err(Self::failed)?;
        for attempt in 1..=READ_ATTEMPTS {
            let raw = self.accounting.counters().map_err(Self::failed)?;
            let process_raw = match self.processes {
                Some(_) => self.accounting.process_counters().map_err(Self::failed)?,
                None => Vec::new(),
            };
            let slices = self.accounting.running().map_err(Self::failed)?;
            if attempt == READ_ATTEMPTS || no_flush_between(&before, &slices) {
                return Ok((raw, process_raw, slices));
            }
            before = slices;
        }
        unreachable!("the last attempt returns")
    }
}

impl Collector for EbpfCollector {
    fn collect(&mut self, out: &mut MetricSet, _report: &mut Report) -> Result<(), CollectError> {
        let (raw, process_raw, slices) = self.consistent_read()?;
        let now_ns = bpf::monotonic_ns();
        let open = open_ns(&slices, now_ns, |tid| schedstat_runtime(&self.procfs, tid));
        let running = running_ns(&slices, &open);
        self.ticks += 1;
        let unknown = raw
            .iter()
            .map(|(id, _)| id)
            .chain(running.keys())
            .any(|id| self.index.get(*id).is_none());
        // A walk is what finds removed cgroups, whose map entries are then deleted: after any
        // change to the tree, or when the map holds a cgroup the last walk did not see.
        let walked = unknown || self.index.changed();
        if walked {
            self.index.walk().map_err(|error| Failure::Walk {
                root: self.index.root().to_path_buf(),
                error,
            })?;
        }
        let mut live = BTreeSet::new();
        let mut ids = HashSet::with_capacity(raw.len());
        for (id, counters) in &raw {
            let entry = self.index.get(*id).map(|e| e.container.clone());
            let removed = walked && entry.is_none();
            let owner = self.ledger.record(*id, entry, *counters);
            if removed {
                // Its last growth is in; free the slot so the map holds live cgroups only.
                self.accounting.forget(*id).map_err(Self::failed)?;
            } else {
                ids.insert(*id);
                live.insert(owner);
            }
        }
        self.ledger.retain_ids(|id| ids.contains(&id));
        let mut running_by_owner: BTreeMap<Owner, u64> = BTreeMap::new();
        for (id, ns) in running {
            let owner = self.index.get(id).and_then(|e| e.container.clone());
            *running_by_owner.entry(owner.clone()).or_default() += ns;
            live.insert(owner);
        }
        self.ledger.retain_owners(&live);
        // A cgroup can have run without ever reaching the map: the BPF side flushes a CPU's
        // held slices only when another cgroup runs there, so on a host where every task sits
        // in one cgroup its time exists only as running/held slices.
        for owner in running_by_owner.keys() {
            self.ledger.ensure_owner(owner);
        }
        let owners: Vec<Owner> = self.ledger.owners().map(|(o, _)| o.clone()).collect();
        for owner in owners {
            let running = running_by_owner.get(&owner).copied().unwrap_or(0);
            let cpu_ns = self.ledger.cpu_ns(&owner, running);
            let counters = self.ledger.totals[&owner].counters;
            self.emit(out, &owner, cpu_ns, &counters);
        }
        // What the map holds once this tick's removed cgroups are deleted.
        self.self_metrics(out, ids.len());
        if let Some(processes) = &mut self.processes {
            let sweep = self.ticks % SWEEP_EVERY_TICKS == 1;
            processes
                .collect(
                    &mut self.accounting,
                    &process_raw,
                    &slices,
                    &open,
                    sweep,
                    out,
                )
                .map_err(Self::failed)?;
        }
        Ok(())
    }
}

impl EbpfCollector {
    fn emit(&self, out: &mut MetricSet, owner: &Owner, cpu_ns: u64, c: &CgroupCounters) {
        let (id, pod) = match owner {
            Some(r) => (r.container_id.as_str(), r.pod_uid.as_str()),
            None => (SYSTEM_CONTAINER, ""),
        };
        let base = [
            (label::CONTAINER_ID, id),
            (label::POD_UID, pod),
            (label::SOURCE, source::BPF),
        ];
        emit_counters(out, &self.accounting, &CONTAINER_FAMILIES, &base, cpu_ns, c);
    }

    fn self_metrics(&self, out: &mut MetricSet, cgroups: usize) {
        for (program, _, _) in PROGRAMS {
            let error = self.accounting.programs.get(program).cloned().flatten();
            let reason = error.map(|e| shorten(&e)).unwrap_or_default();
            out.push(
                &contract::exporter::BPF_PROGRAM_ATTACHED,
                &[(label::PROGRAM, program), (label::REASON, &reason)],
                if reason.is_empty() { 1.0 } else { 0.0 },
            );
        }
        out.push(
            &contract::exporter::BPF_CGROUPS_TRACKED,
            &[],
            cgroups as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::container_id::ContainerRef;

    fn cpu(ns: u64) -> CgroupCounters {
        CgroupCounters {
            cpu_ns: ns,
            ..Default::default()
        }
    }

    fn container(id: char) -> Owner {
        Some(ContainerRef {
            container_id: id.to_string().repeat(64),
            pod_uid: String::new(),
        })
    }

    #[test]
    fn totals_add_growth_and_survive_removal_and_eviction() {
        let mut ledger = Ledger::default();
        let (a, sys) = (container('a'), None);
        // Two host cgroups and one container cgroup.
        ledger.record(1, Some(sys.clone()), cpu(100));
        ledger.record(2, Some(sys.clone()), cpu(50));
        ledger.record(3, Some(a.clone()), cpu(10));
        assert_eq!(ledger.cpu_ns(&sys, 0), 150);
        // Host cgroup 2 is removed after growing by 5: the growth lands, the total stays.
        ledger.record(1, Some(sys.clone()), cpu(120));
        ledger.record(2, None, cpu(55));
        ledger.retain_ids(|id| id != 2);
        assert_eq!(ledger.cpu_ns(&sys, 0), 175);
        // Cgroup 1 is evicted and recreated: its new value is all growth.
        ledger.record(1, Some(sys.clone()), cpu(3));
        assert_eq!(ledger.cpu_ns(&sys, 0), 178);
        assert_eq!(ledger.cpu_ns(&a, 0), 10);
    }

    #[test]
    fn running_slices_smooth_cpu_time_and_never_lower_it() {
        let mut ledger = Ledger::default();
        let a = container('a');
        ledger.record(3, Some(a.clone()), cpu(1_000));
        // Half a second running, not yet switched out.
        assert_eq!(ledger.cpu_ns(&a, 500), 1_500);
        // The slice ended slightly before the clock read of the previous tick.
        ledger.record(3, Some(a.clone()), cpu(1_490));
        assert_eq!(ledger.cpu_ns(&a, 0), 1_500);
        ledger.record(3, Some(a.clone()), cpu(1_600));
        assert_eq!(ledger.cpu_ns(&a, 0), 1_600);
    }

    #[test]
    fn owner_seen_only_in_running_slices_is_exported() {
        // Every task in the root cgroup: nothing was ever flushed to the map.
        let mut ledger = Ledger::default();
        ledger.ensure_owner(&None);
        assert_eq!(ledger.owners().count(), 1);
        assert_eq!(ledger.cpu_ns(&None, 500), 500);
        assert_eq!(ledger.cpu_ns(&None, 900), 900);
    }

    #[test]
    fn removed_containers_are_dropped_but_the_host_stays() {
        let mut ledger = Ledger::default();
        ledger.record(1, Some(None), cpu(1));
        ledger.record(3, Some(container('a')), cpu(1));
        ledger.retain_owners(&BTreeSet::new());
        let owners: Vec<_> = ledger.owners().map(|(o, _)| o.clone()).collect();
        assert_eq!(owners, vec![None]);
    }

    #[test]
    fn running_time_per_cgroup_adds_pending_and_skips_idle_and_future_slices() {
        let slice = |start_ns, cgroup_id, pending_cgroup, pending_ns| RunningSlice {
            start_ns,
            cgroup_id,
            pending_cgroup,
            pending_ns,
            // The idle task is pid 0; any other id will do.
            pid: cgroup_id,
            ..Default::default()
        };
        let slices = [
            slice(100, 7, 0, 0),
            slice(50, 7, 9, 40),
            // Idle now, with 5 ns of cgroup 7 finished but not flushed.
            slice(10, 0, 7, 5),
            // Switched in after the clock read.
            slice(300, 8, 0, 0),
        ];
        let r = running_ns(&slices, &open_ns(&slices, 200, |_| None));
        assert_eq!(r.get(&7), Some(&255));
        assert_eq!(r.get(&9), Some(&40));
        assert_eq!(r.get(&8), None);
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn open_slices_use_the_tasks_runtime_capped_by_the_wall_clock() {
        let slice = |pid, start_runtime_ns| RunningSlice {
            start_ns: 1_000,
            start_runtime_ns,
            pid,
            cgroup_id: 5,
            ..Default::default()
        };
        let slices = [slice(10, 500), slice(11, 500), slice(12, 500), slice(0, 0)];
        let runtime = |tid| match tid {
            10 => Some(800),   // ran 300 ns of the 1,000 ns since switch-in (the rest stolen)
            11 => Some(5_000), // more than the wall clock: not this slice's task
            12 => Some(100),   // below the switch-in runtime: another task with this id
            _ => None,
        };
        assert_eq!(open_ns(&slices, 2_000, runtime), vec![300, 1_000, 1_000, 0]);
        // Without procfs, the wall clock.
        assert_eq!(open_ns(&slices[..1], 2_000, |_| None), vec![1_000]);
    }

    #[test]
    fn reasons_keep_the_verifier_verdict_and_stay_short() {
        let err = LoadError::Program {
            program: "on_sched_switch",
            tracepoint: "sched_switch",
            message: format!(
                "load failed. Verifier output: 0: R1=ctx\n{}\nR6 invalid mem access 'scalar'\n\
                 verification time 267 usec\nstack depth 8\nprocessed 9 insns (limit 1000000)\n",
                "x".repeat(1000)
            ),
        };
        let r = short_reason(&err);
        assert_eq!(
            r,
            "program on_sched_switch (sched_switch): load failed: verifier: R6 invalid mem access 'scalar'"
        );
        let long = LoadError::Object("y".repeat(1000));
        assert!(short_reason(&long).len() <= REASON_MAX);
    }
}
