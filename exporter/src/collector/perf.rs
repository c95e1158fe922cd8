//! Hardware counters per container — cycles, instructions, cache misses — from perf events,
//! `source="perf"`.
//!
//! One counter group (cycles leading instructions and cache misses) per container cgroup and
//! online CPU, opened in cgroup mode (`PERF_FLAG_PID_CGROUP`): the kernel counts only while a
//! task of that cgroup (or a descendant) runs, with no BPF and no per-switch work of ours. A
//! group is read with its enabled and running times; when the PMU has fewer counters than
//! groups the kernel multiplexes them and each interval's counts are scaled by
//! enabled/running, as `perf stat` does.
//!
//! Many boards and VMs have no PMU (`perf_event_open` fails with ENOENT); a probe at start
//! reports the collector unavailable with the reason, and nothing else changes. A PMU may also
//! lack some generic events (QEMU's ARMv8 PMU has cycles but no cache misses): each event is
//! probed on its own at start, a missing one is logged once and left out of the groups, and its
//! family is not exported, rather than one absent event losing the others or turning into zeros.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use greenpipe_common::contract;
use greenpipe_common::names::{label, source};
#[cfg(not(target_arch = "arm"))]
use perf_event_open_sys as sys;
use tracing::warn;

use super::{CollectError, Collector, Context, Failure, Report, Spec};
use crate::cgroup_ids::{mounted_v2_root, CgroupIndex};
use crate::metrics::MetricSet;
use greenpipe_common::container_id::ContainerRef;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "perf",
    default_enabled: true,
    help: "Per-container CPU cycles, instructions and cache misses from hardware perf events (needs a PMU)",
    build,
};

/// The hardware events of a group, leader first: cycles must exist, the others are counted
/// where the PMU has them.
const EVENTS: [u64; 3] = [
    sys::bindings::PERF_COUNT_HW_CPU_CYCLES as u64,
    sys::bindings::PERF_COUNT_HW_INSTRUCTIONS as u64,
    sys::bindings::PERF_COUNT_HW_CACHE_MISSES as u64,
];

/// The perf name of each of [`EVENTS`], for messages.
const EVENT_NAMES: [&str; 3] = ["cycles", "instructions", "cache-misses"];

/// Which of [`EVENTS`] this PMU counts, in [`EVENTS`] order; cycles (index 0) always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSet([bool; 3]);

impl EventSet {
    /// Every event.
    pub const ALL: EventSet = EventSet([true; 3]);

    /// The set with the given events; cycles are in it whatever `present[0]` says.
    pub fn new(present: [bool; 3]) -> EventSet {
        EventSet([true, present[1], present[2]])
    }

    /// Indices into [`EVENTS`] of the events in the set, leader first.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        (0..EVENTS.len()).filter(|&i| self.0[i])
    }

    /// Whether event `i` of [`EVENTS`] is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.0[i]
    }

    /// How many events the set holds (at least 1: cycles).
    pub fn count(&self) -> usize {
        self.indices().count()
    }
}

/// Most file descriptors the collector holds (up to 3 per container and CPU); containers past it are
/// skipped with a warning rather than exhausting the exporter's descriptors.
const MAX_FDS: usize = 3072;

/// One group read: `PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GroupReading {
    /// Nanoseconds the group was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds it was actually on the PMU.
    pub running_ns: u64,
    /// Raw counts, in [`EVENTS`] order; 0 for an event not in the group's [`EventSet`].
    pub values: [u64; 3],
}

/// Parses the words `read(2)` returns for a group of `events`: `nr, time_enabled,
/// time_running, value*nr`, the values in group order.
pub fn parse_group_read(words: &[u64], events: EventSet) -> Option<GroupReading> {
    let (&nr, rest) = words.split_first()?;
    let n = events.count();
    if nr as usize != n || rest.len() < 2 + n {
        return None;
    }
    let mut values = [0; 3];
    for (slot, &value) in events.indices().zip(&rest[2..2 + n]) {
        values[slot] = value;
    }
    Some(GroupReading {
        enabled_ns: rest[0],
        running_ns: rest[1],
        values,
    })
}

/// Counts of the interval between two readings, scaled for multiplexing: the group ran for
/// Δrunning of Δenabled nanoseconds, so its counts are extrapolated by Δenabled/Δrunning.
/// An interval in which the group never ran yields zero (nothing was measured, so nothing is
/// invented). Counters that went backwards (never, short of a bug) also yield zero.
pub fn scaled_delta(prev: &GroupReading, now: &GroupReading) -> [f64; 3] {
    let enabled = now.enabled_ns.saturating_sub(prev.enabled_ns);
    let running = now.running_ns.saturating_sub(prev.running_ns);
    if running == 0 {
        return [0.0; 3];
    }
    let scale = enabled.max(running) as f64 / running as f64;
    std::array::from_fn(|i| now.values[i].saturating_sub(prev.values[i]) as f64 * scale)
}

/// One counter group: a cgroup on one CPU.
struct Group {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    last: GroupReading,
}

impl Group {
    fn read(&self, events: EventSet) -> std::io::Result<GroupReading> {
        let mut words = [0u64; 3 + EVENTS.len()];
        // SAFETY: reads at most size_of_val(words) bytes into the buffer we own.
        let n = unsafe {
            libc::read(
                self.leader.as_raw_fd(),
                words.as_mut_ptr().cast(),
                std::mem::size_of_val(&words),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        parse_group_read(&words[..n as usize / 8], events).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "short perf group read")
        })
    }
}

fn attr(config: u64, leader: bool) -> sys::bindings::perf_event_attr {
    let mut a = sys::bindings::perf_event_attr {
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        type_: sys::bindings::PERF_TYPE_HARDWARE,
        config,
        ..Default::default()
    };
    if leader {
        a.read_format = (sys::bindings::PERF_FORMAT_GROUP
            | sys::bindings::PERF_FORMAT_TOTAL_TIME_ENABLED
            | sys::bindings::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    }
    a.set_exclude_hv(1);
    a
}

fn open(
    attr: &mut sys::bindings::perf_event_attr,
    pid: i32,
    cpu: i32,
    group: i32,
    flags: u32,
) -> std::io::Result<OwnedFd> {
    // SAFETY: attr is a valid, sized perf_event_attr; the returned fd is owned by us.
    let fd = unsafe {
        sys::perf_event_open(
            attr,
            pid,
            cpu,
            group,
            (flags | sys::bindings::PERF_FLAG_FD_CLOEXEC) as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens event `config` for this process on any CPU, disabled: whether the PMU has it.
fn probe_event(config: u64) -> std::io::Result<()> {
    let mut a = attr(config, false);
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    open(&mut a, 0, -1, -1, 0).map(drop)
}

/// The events this host's PMU counts, each logged once when missing; the reason if it cannot
/// count cycles at all.
pub fn probe_events(sysfs: &Path) -> Result<EventSet, String> {
    probe_pmu(sysfs)?;
    let mut present = [true; 3];
    for (i, &config) in EVENTS.iter().enumerate().skip(1) {
        if let Err(e) = probe_event(config) {
            warn!(
                event = EVENT_NAMES[i],
                error = %e,
                "perf: this PMU does not count the event; its family is not exported"
            );
            present[i] = false;
        }
    }
    Ok(EventSet::new(present))
}

/// Whether this host can count hardware cycles at all; the reason if not.
pub fn probe_pmu(sysfs: &Path) -> Result<(), String> {
    match probe_event(EVENTS[0]) {
        Ok(()) => Ok(()),
        Err(e) => {
            let pmu = sysfs.join("bus/event_source/devices/cpu");
            let pmu_note = if pmu.exists() {
                String::new()
            } else {
                format!("; {} absent", pmu.display())
            };
            Err(match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
                    format!("no hardware PMU: perf_event_open(cycles) failed with {e}{pmu_note}")
                }
                Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "perf_event_open(cycles) not permitted ({e}): needs CAP_PERFMON or root, see /proc/sys/kernel/perf_event_paranoid"
                ),
                _ => format!("perf_event_open(cycles) failed: {e}{pmu_note}"),
            })
        }
    }
}

fn online_cpus(sysfs: &Path) -> Result<Vec<i32>, String> {
    let path = sysfs.join("devices/system/cpu/online");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_cpu_list(&text).ok_or_else(|| format!("{}: malformed {text:?}", path.display()))
}

/// Parses a kernel CPU list (`0-3,6,8-9`).
pub fn parse_cpu_list(text: &str) -> Option<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (i32, i32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let events = probe_events(&ctx.paths.sysfs).map_err(CollectError::Unavailable)?;
    let root = mounted_v2_root(&ctx.paths.cgroupfs).map_err(CollectError::Unavailable)?;
    let cpus = online_cpus(&ctx.paths.sysfs).map_err(CollectError::Unavailable)?;
    Ok(Box::new(PerfCollector {
        index: CgroupIndex::new(root),
        events,
        cpus,
        groups: HashMap::new(),
        totals: BTreeMap::new(),
        ticks: 0,
        fd_limit_warned: false,
    }))
}

struct PerfCollector {
    index: CgroupIndex,
    /// The events each group counts.
    events: EventSet,
    cpus: Vec<i32>,
    /// Per container cgroup (path): its container and one group per CPU.
    groups: HashMap<PathBuf, (ContainerRef, Vec<Group>)>,
    /// Scaled counts per container since the exporter started.
    totals: BTreeMap<ContainerRef, [f64; 3]>,
    ticks: u64,
    fd_limit_warned: bool,
}

impl PerfCollector {
    /// Opens groups for new container cgroups and closes those of removed ones. Only the
    /// outermost cgroup of a container gets counters: perf cgroup events include descendants.
    fn sync(&mut self) -> Result<(), CollectError> {
        self.index.walk().map_err(|error| Failure::Walk {
            root: self.index.root().to_path_buf(),
            error,
        })?;
        let mut wanted: HashMap<PathBuf, ContainerRef> = HashMap::new();
        let by_path: HashMap<&str, &Option<ContainerRef>> = self
            .index
            .iter()
            .map(|(_, e)| (e.path.as_str(), &e.container))
            .collect();
        for (_, entry) in self.index.iter() {
            let Some(c) = &entry.container else { continue };
            let parent = entry.path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
            let parent_same = by_path.get(parent).is_some_and(|p| p.as_ref() == Some(c));
            if !parent_same {
                wanted.insert(
                    self.index.root().join(entry.path.trim_start_matches('/')),
                    c.clone(),
                );
            }
        }
        self.groups.retain(|path, _| wanted.contains_key(path));
        for (path, container) in wanted {
            if self.groups.contains_key(&path) {
                continue;
            }
            if (self.groups.len() + 1) * self.cpus.len() * self.events.count() > MAX_FDS {
                if !self.fd_limit_warned {
                    warn!(
                        max = MAX_FDS,
                        "perf: descriptor budget reached; more containers are not counted"
                    );
                    self.fd_limit_warned = true;
                }
                break;
            }
            match self.open_cgroup(&path) {
                Ok(groups) => {
                    self.groups.insert(path, (container, groups));
                }
                // Removed between the walk and the open: the directory is gone, or perf found
                // the cgroup offline (ENOENT too). An ENOENT while the directory is still there
                // is perf's, and reported.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !path.exists() => {}
                Err(error) => {
                    return Err(Failure::PerfOpen {
                        cgroup: path,
                        error,
                    }
                    .into())
                }
            }
        }
        let live: std::collections::BTreeSet<&ContainerRef> =
            self.groups.values().map(|(c, _)| c).collect();
        self.totals.retain(|c, _| live.contains(c));
        Ok(())
    }

    fn open_cgroup(&self, path: &Path) -> std::io::Result<Vec<Group>> {
        let dir = File::open(path)?;
        let mut groups = Vec::with_capacity(self.cpus.len());
        for &cpu in &self.cpus {
            let flags = sys::bindings::PERF_FLAG_PID_CGROUP;
            let leader = open(&mut attr(EVENTS[0], true), dir.as_raw_fd(), cpu, -1, flags)?;
            let mut members = Vec::new();
            for i in self.events.indices().skip(1) {
                members.push(open(
                    &mut attr(EVENTS[i], false),
                    dir.as_raw_fd(),
                    cpu,
                    leader.as_raw_fd(),
                    flags,
                )?);
            }
            let mut group = Group {
                leader,
                _members: members,
                last: GroupReading::default(),
            };
            group.last = group.read(self.events)?;
            groups.push(group);
        }
        Ok(groups)
    }
}

impl Collector for PerfCollector {
    fn collect(&mut self, out: &mut MetricSet, _report: &mut Report) -> Result<(), CollectError> {
        // New and removed containers: walked in the tick after the tree changes (inotify).
        if self.index.changed() {
            self.sync()?;
        }
        self.ticks += 1;
        for (container, groups) in self.groups.values_mut() {
            let total = self.totals.entry(container.clone()).or_insert([0.0; 3]);
            for group in groups.iter_mut() {
                let now = group.read(self.events).map_err(Failure::PerfRead)?;
                let delta = scaled_delta(&group.last, &now);
                group.last = now;
                for (t, d) in total.iter_mut().zip(delta) {
                    *t += d;
                }
            }
        }
        for (c, total) in &self.totals {
            let labels = [
                (label::CONTAINER_ID, c.container_id.as_str()),
                (label::POD_UID, c.pod_uid.as_str()),
                (label::SOURCE, source::PERF),
            ];
            for (i, family) in [
                &contract::container::CPU_CYCLES_TOTAL,
                &contract::container::CPU_INSTRUCTIONS_TOTAL,
                &contract::container::CACHE_MISSES_TOTAL,
            ]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| self.events.contains(*i))
            {
                out.push(family, &labels, total[i].round());
            }
        }
        let fds: usize = self
            .groups
            .values()
            .map(|(_, g)| g.len() * self.events.count())
            .sum();
        out.push(&contract::exporter::PERF_EVENTS_OPEN, &[], fds as f64);
        Ok(())
    }
}

/// perf-event-open-sys has no bindings for 32-bit ARM (armv7 boards on a 32-bit OS), so there
/// the little this collector uses is declared here: `perf_event_attr` up to `config1`
/// (PERF_ATTR_SIZE_VER0, 64 bytes, which every kernel accepts; the layout is the same on every
/// CPU) and the syscall itself.
#[cfg(target_arch = "arm")]
mod sys {
    pub mod bindings {
        pub const PERF_TYPE_HARDWARE: u32 = 0;
        pub const PERF_COUNT_HW_CPU_CYCLES: u32 = 0;
        pub const PERF_COUNT_HW_INSTRUCTIONS: u32 = 1;
        pub const PERF_COUNT_HW_CACHE_MISSES: u32 = 3;
        pub const PERF_FORMAT_TOTAL_TIME_ENABLED: u32 = 1 << 0;
        pub const PERF_FORMAT_TOTAL_TIME_RUNNING: u32 = 1 << 1;
        pub const PERF_FORMAT_GROUP: u32 = 1 << 3;
        pub const PERF_FLAG_PID_CGROUP: u32 = 1 << 2;
        pub const PERF_FLAG_FD_CLOEXEC: u32 = 1 << 3;

        /// `struct perf_event_attr`, PERF_ATTR_SIZE_VER0 (named as in the kernel and the crate).
        #[repr(C)]
        #[allow(non_camel_case_types)]
        #[derive(Debug, Default, Clone, Copy)]
        pub struct perf_event_attr {
            pub type_: u32,
            pub size: u32,
            pub config: u64,
            pub sample_period: u64,
            pub sample_type: u64,
            pub read_format: u64,
            /// disabled:1, inherit:1, pinned:1, exclusive:1, exclude_user:1, exclude_kernel:1,
            /// exclude_hv:1, ...
            pub flags: u64,
            pub wakeup_events: u32,
            pub bp_type: u32,
            pub config1: u64,
        }

        const _: () = assert!(std::mem::size_of::<perf_event_attr>() == 64);

        impl perf_event_attr {
            fn set_bit(&mut self, bit: u32, on: u64) {
                self.flags = (self.flags & !(1 << bit)) | ((on & 1) << bit);
            }
            pub fn set_disabled(&mut self, on: u64) {
                self.set_bit(0, on)
            }
            pub fn set_exclude_kernel(&mut self, on: u64) {
                self.set_bit(5, on)
            }
            pub fn set_exclude_hv(&mut self, on: u64) {
                self.set_bit(6, on)
            }
        }
    }

    /// perf_event_open(2).
    ///
    /// # Safety
    /// `attr` must point to a valid `perf_event_attr` whose `size` is its size.
    pub unsafe fn perf_event_open(
        attr: *mut bindings::perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: libc::c_ulong,
    ) -> i32 {
        // SAFETY: the caller guarantees attr; the other arguments are plain integers.
        unsafe { libc::syscall(libc::SYS_perf_event_open, attr, pid, cpu, group_fd, flags) as i32 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(enabled: u64, running: u64, values: [u64; 3]) -> GroupReading {
        GroupReading {
            enabled_ns: enabled,
            running_ns: running,
            values,
        }
    }

    #[test]
    fn group_read_layout() {
        let all = EventSet::ALL;
        assert_eq!(
            parse_group_read(&[3, 100, 50, 7, 8, 9], all),
            Some(reading(100, 50, [7, 8, 9]))
        );
        assert_eq!(parse_group_read(&[2, 100, 50, 7, 8], all), None);
        assert_eq!(parse_group_read(&[3, 100, 50, 7], all), None);
        assert_eq!(parse_group_read(&[], all), None);
    }

    #[test]
    fn a_group_without_an_event_reads_the_others_into_their_slots() {
        // QEMU's ARMv8 PMU: cycles and instructions, no cache misses.
        let no_misses = EventSet::new([true, true, false]);
        assert_eq!(no_misses.count(), 2);
        assert_eq!(
            parse_group_read(&[2, 100, 50, 7, 8], no_misses),
            Some(reading(100, 50, [7, 8, 0]))
        );
        // Cycles alone: the value lands in the cycles slot, not in instructions'.
        let cycles = EventSet::new([false, false, false]);
        assert_eq!(cycles.indices().collect::<Vec<_>>(), [0]);
        assert_eq!(
            parse_group_read(&[1, 100, 100, 42], cycles),
            Some(reading(100, 100, [42, 0, 0]))
        );
        // The kernel's count must match the group's: a three-event read is not a two-event one.
        assert_eq!(parse_group_read(&[3, 100, 50, 7, 8, 9], no_misses), None);
        let skip_instructions = EventSet::new([true, false, true]);
        assert_eq!(
            parse_group_read(&[2, 10, 10, 5, 6], skip_instructions),
            Some(reading(10, 10, [5, 0, 6]))
        );
    }

    #[test]
    fn full_time_on_the_pmu_is_not_scaled() {
        let d = scaled_delta(
            &reading(1_000, 1_000, [10, 20, 1]),
            &reading(2_000, 2_000, [110, 220, 3]),
        );
        assert_eq!(d, [100.0, 200.0, 2.0]);
    }

    #[test]
    fn multiplexed_intervals_scale_by_enabled_over_running() {
        // Enabled 1000 ns, on the PMU 250 ns of them: counts ×4.
        let d = scaled_delta(
            &reading(0, 0, [0, 0, 0]),
            &reading(1_000, 250, [100, 300, 5]),
        );
        assert_eq!(d, [400.0, 1200.0, 20.0]);
        // Scaling uses the interval's times, not the totals since open: a group that ran all
        // the time before and half the time now scales by 2, not by 2000/1500.
        let d = scaled_delta(
            &reading(1_000, 1_000, [1_000, 0, 0]),
            &reading(2_000, 1_500, [1_500, 0, 0]),
        );
        assert_eq!(d[0], 1_000.0);
    }

    #[test]
    fn intervals_off_the_pmu_count_nothing() {
        let d = scaled_delta(
            &reading(1_000, 500, [5, 5, 5]),
            &reading(2_000, 500, [5, 5, 5]),
        );
        assert_eq!(d, [0.0; 3]);
        // Counters going backwards are not turned into huge deltas.
        let d = scaled_delta(
            &reading(1_000, 500, [5, 5, 5]),
            &reading(2_000, 1_500, [4, 6, 5]),
        );
        assert_eq!(d, [0.0, 1.0, 0.0]);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(parse_cpu_list("0\n"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn this_host_pmu_probe_gives_a_reason_or_works() {
        // On a host with a PMU (and root) the probe succeeds; on one without (this CI VM), the
        // reason names the failure. Either way it returns instead of panicking.
        match probe_pmu(Path::new("/sys")) {
            Ok(()) => {}
            Err(reason) => assert!(reason.contains("perf_event_open"), "{reason}"),
        }
    }
}
