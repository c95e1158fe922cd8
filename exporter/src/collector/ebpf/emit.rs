//! The declared families of the eBPF counters and how one owner's counters are emitted.

use greenpipe_common::contract::{self, Family};
use greenpipe_common::names::label;

use crate::bpf::abi::CgroupCounters;
use crate::bpf::{Accounting, Signal};
use crate::metrics::MetricSet;

/// The declared families of one owner kind's counters (per container, or per process).
pub(crate) struct Families {
    pub cpu_seconds: &'static Family,
    pub page_cache_hits: &'static Family,
    pub page_cache_additions: &'static Family,
    pub disk_bytes: &'static Family,
    pub network_bytes: &'static Family,
}

pub(super) const CONTAINER_FAMILIES: Families = Families {
    cpu_seconds: &contract::container::CPU_SECONDS_TOTAL,
    page_cache_hits: &contract::container::PAGE_CACHE_HITS_TOTAL,
    page_cache_additions: &contract::container::PAGE_CACHE_ADDITIONS_TOTAL,
    disk_bytes: &contract::container::DISK_BYTES_TOTAL,
    network_bytes: &contract::container::NETWORK_BYTES_TOTAL,
};

/// The counters of one owner (labels `base`) that this kernel's programs provide.
pub(crate) fn emit_counters(
    out: &mut MetricSet,
    accounting: &Accounting,
    families: &Families,
    base: &[(&'static str, &str)],
    cpu_ns: u64,
    c: &CgroupCounters,
) {
    let has = |s| accounting.has(s);
    let with = |direction: &'static str| {
        let mut labels = base.to_vec();
        labels.push((label::DIRECTION, direction));
        labels
    };
    let mut put = |family: &'static Family, labels: &[(&'static str, &str)], v: f64| {
        out.push(family, labels, v)
    };
    if has(Signal::CpuTime) {
        put(families.cpu_seconds, base, cpu_ns as f64 / 1e9);
    }
    if has(Signal::PageCacheHits) {
        put(families.page_cache_hits, base, c.page_cache_hits as f64);
    }
    if has(Signal::PageCacheAdditions) {
        put(
            families.page_cache_additions,
            base,
            c.page_cache_additions as f64,
        );
    }
    if has(Signal::DiskBytes) {
        for (direction, bytes) in [("read", c.disk_read_bytes), ("write", c.disk_write_bytes)] {
            put(families.disk_bytes, &with(direction), bytes as f64);
        }
    }
    for (signal, direction, bytes) in [
        (Signal::NetworkReceive, "receive", c.net_rx_bytes),
        (Signal::NetworkTransmit, "transmit", c.net_tx_bytes),
    ] {
        if has(signal) {
            put(families.network_bytes, &with(direction), bytes as f64);
        }
    }
}
