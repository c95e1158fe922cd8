//! Rust mirrors of the map layouts in `bpf/include/greenpipe.h`.

/// Per-CPU counters of one cgroup v2 (`struct cgroup_counters`); the same struct holds one
/// process's counters in the per-process map.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CgroupCounters {
    /// On-CPU time of finished slices, nanoseconds.
    pub cpu_ns: u64,
    /// Pages `read()` found in the page cache.
    pub page_cache_hits: u64,
    /// Pages added to the page cache.
    pub page_cache_additions: u64,
    /// Bytes of read bios queued to request-based block devices.
    pub disk_read_bytes: u64,
    /// Bytes of write bios queued to request-based block devices.
    pub disk_write_bytes: u64,
    /// Payload bytes sent on inet sockets.
    pub net_tx_bytes: u64,
    /// Payload bytes received on inet sockets.
    pub net_rx_bytes: u64,
}

// SAFETY: repr(C), only u64 fields, no padding; any bit pattern is valid.
unsafe impl aya::Pod for CgroupCounters {}

/// Per-CPU scheduling state (`struct running_slice`): the open slice, and finished slices not
/// yet added to the cgroup's counters.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunningSlice {
    /// Switch-in time, `bpf_ktime_get_ns` (CLOCK_MONOTONIC).
    pub start_ns: u64,
    /// cgroup v2 id of the running task; 0 for the idle task.
    pub cgroup_id: u64,
    /// cgroup whose finished slices `pending_ns` holds.
    pub pending_cgroup: u64,
    /// Finished on-CPU nanoseconds of `pending_cgroup` not yet in its counters.
    pub pending_ns: u64,
    /// The running task's scheduler runtime at switch-in (BPF side only).
    pub start_runtime_ns: u64,
    /// Process (tgid) of the running task; 0 for the idle task or with per-process off.
    pub tgid: u64,
    /// Process whose finished slices `pending_process_ns` holds (the most recent of two).
    pub pending_tgid: u64,
    /// Finished on-CPU nanoseconds of `pending_tgid` not yet in its process counters.
    pub pending_process_ns: u64,
    /// The other held process.
    pub pending_tgid_older: u64,
    /// Finished on-CPU nanoseconds of `pending_tgid_older` not yet in its process counters.
    pub pending_process_ns_older: u64,
    /// Times held time moved from this CPU into a counters map.
    pub flushes: u64,
    /// Thread id of the running task (0 for the idle task).
    pub pid: u64,
}

// SAFETY: repr(C), only u64 fields, no padding; any bit pattern is valid.
unsafe impl aya::Pod for RunningSlice {}

impl CgroupCounters {
    fn fields(&self) -> [u64; 7] {
        [
            self.cpu_ns,
            self.page_cache_hits,
            self.page_cache_additions,
            self.disk_read_bytes,
            self.disk_write_bytes,
            self.net_tx_bytes,
            self.net_rx_bytes,
        ]
    }

    fn from_fields(f: [u64; 7]) -> Self {
        CgroupCounters {
            cpu_ns: f[0],
            page_cache_hits: f[1],
            page_cache_additions: f[2],
            disk_read_bytes: f[3],
            disk_write_bytes: f[4],
            net_tx_bytes: f[5],
            net_rx_bytes: f[6],
        }
    }

    /// Field-wise wrapping sum (per-CPU values of one key).
    pub fn add(&mut self, other: &CgroupCounters) {
        let (a, b) = (self.fields(), other.fields());
        *self = Self::from_fields(std::array::from_fn(|i| a[i].wrapping_add(b[i])));
    }

    /// Growth since `prev`. A field that went down means the entry was evicted and recreated
    /// (LRU) since `prev`: everything it holds is new, so its whole value is the growth.
    pub fn growth_since(&self, prev: &CgroupCounters) -> CgroupCounters {
        let (now, before) = (self.fields(), prev.fields());
        let reset = now.iter().zip(before).any(|(n, b)| *n < b);
        if reset {
            *self
        } else {
            Self::from_fields(std::array::from_fn(|i| now[i] - before[i]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Field names of a struct in the C header, in order.
    fn c_fields(header: &str, name: &str) -> Vec<String> {
        let start = header
            .find(&format!("struct {name} {{"))
            .expect("struct in header");
        let body = &header[start..header[start..].find("};").unwrap() + start];
        body.lines()
            .filter_map(|l| l.trim().strip_prefix("__u64 "))
            .map(|l| l.split(';').next().unwrap().trim().to_string())
            .collect()
    }

    #[test]
    fn layout_matches_the_c_header() {
        let header = include_str!("../../../bpf/include/greenpipe.h");
        assert_eq!(
            c_fields(header, "cgroup_counters"),
            [
                "cpu_ns",
                "page_cache_hits",
                "page_cache_additions",
                "disk_read_bytes",
                "disk_write_bytes",
                "net_tx_bytes",
                "net_rx_bytes"
            ]
        );
        assert_eq!(std::mem::size_of::<CgroupCounters>(), 7 * 8);
        assert_eq!(
            c_fields(header, "running_slice"),
            [
                "start_ns",
                "cgroup_id",
                "pending_cgroup",
                "pending_ns",
                "start_runtime_ns",
                "tgid",
                "pending_tgid",
                "pending_process_ns",
                "pending_tgid_older",
                "pending_process_ns_older",
                "flushes",
                "pid"
            ]
        );
        assert_eq!(std::mem::size_of::<RunningSlice>(), 96);
    }

    #[test]
    fn growth_is_fieldwise_and_resets_restart_from_zero() {
        let prev = CgroupCounters {
            cpu_ns: 100,
            net_tx_bytes: 10,
            ..Default::default()
        };
        let now = CgroupCounters {
            cpu_ns: 150,
            net_tx_bytes: 30,
            ..Default::default()
        };
        let g = now.growth_since(&prev);
        assert_eq!((g.cpu_ns, g.net_tx_bytes), (50, 20));
        let evicted = CgroupCounters {
            cpu_ns: 7,
            net_tx_bytes: 40,
            ..Default::default()
        };
        assert_eq!(evicted.growth_since(&prev), evicted);
    }
}
