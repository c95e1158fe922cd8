//! Per-owner totals that only go up, built from raw per-cgroup readings that can drop (a cgroup
//! removed, or evicted from the bounded map).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::bpf::abi::CgroupCounters;
use greenpipe_common::container_id::ContainerRef;

/// Who a cgroup's usage is exported under: a container, or `None` for the host ("system").
pub type Owner = Option<ContainerRef>;

/// Per-owner monotonic totals built from raw per-cgroup readings.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Last raw reading of each cgroup id, and its owner when it was last seen live.
    last: HashMap<u64, (Owner, CgroupCounters)>,
    pub(super) totals: BTreeMap<Owner, Totals>,
}

/// One owner's totals.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Totals {
    /// Sum of the growth of every cgroup of the owner.
    pub counters: CgroupCounters,
    /// CPU nanoseconds last exported (finished + running slices), never exported lower.
    pub cpu_exported_ns: u64,
}

impl Ledger {
    /// Records a raw reading of cgroup `id`. `owner` is `None` when the cgroup is no longer
    /// live: its final growth goes to the owner it had when last seen.
    pub fn record(&mut self, id: u64, owner: Option<Owner>, raw: CgroupCounters) -> Owner {
        let (owner, growth) = match self.last.get(&id) {
            Some((known, prev)) => (
                owner.unwrap_or_else(|| known.clone()),
                raw.growth_since(prev),
            ),
            None => (owner.flatten(), raw),
        };
        self.totals
            .entry(owner.clone())
            .or_default()
            .counters
            .add(&growth);
        self.last.insert(id, (owner.clone(), raw));
        owner
    }

    /// Forgets cgroup ids for which `keep` is false (deleted or evicted from the map).
    pub fn retain_ids(&mut self, keep: impl Fn(u64) -> bool) {
        self.last.retain(|id, _| keep(*id));
    }

    /// Drops containers with no live cgroup (the host total stays).
    pub fn retain_owners(&mut self, live: &BTreeSet<Owner>) {
        self.totals
            .retain(|owner, _| owner.is_none() || live.contains(owner));
    }

    /// Exports an owner's CPU time: finished slices plus `running_ns` of open slices, never
    /// below what was exported before (a slice read as running can end a few microseconds
    /// before the tick's clock reading).
    pub fn cpu_ns(&mut self, owner: &Owner, running_ns: u64) -> u64 {
        let totals = self.totals.entry(owner.clone()).or_default();
        let now = totals.counters.cpu_ns + running_ns;
        totals.cpu_exported_ns = totals.cpu_exported_ns.max(now);
        totals.cpu_exported_ns
    }

    /// Makes `owner` exported even before any of its cgroups reached the counters map.
    pub fn ensure_owner(&mut self, owner: &Owner) {
        self.totals.entry(owner.clone()).or_default();
    }

    /// Owners with totals.
    pub fn owners(&self) -> impl Iterator<Item = (&Owner, &Totals)> {
        self.totals.iter()
    }
}
