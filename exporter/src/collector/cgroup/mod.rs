//! Containers from cgroups (v2 and v1): CPU seconds, memory, disk bytes, processes and network
//! bytes per container, plus the `system` pseudo-container so that node = Σ containers + system.
//!
//! It walks the v2 hierarchy and one v1 hierarchy (hybrid hosts have containers in either,
//! depending on the runtime's cgroup driver) and keeps the directories whose path names a
//! container ([`greenpipe_common::container_id`]). It walks again only in a tick after a cgroup
//! was made, removed or renamed ([`crate::cgroup_watch`]: inotify; every tick where that is unavailable).
//! Leaves are not listed: a cgroupfs directory's link count is 2 + its subdirectories, so one
//! `stat` tells whether there is anything below. Per container it reads, preferring v2:
//!
//! | value | v2 | v1 |
//! |---|---|---|
//! | CPU seconds | `cpu.stat` `usage_usec` | `cpuacct/…/cpuacct.usage` (ns) |
//! | memory bytes | `memory.current` | `memory/…/memory.usage_in_bytes` |
//! | disk bytes | `io.stat` `rbytes`/`wbytes` | `blkio/…/blkio.throttle.io_service_bytes_recursive` |
//! | processes | `cgroup.procs` of the container's cgroup and its descendants, in a tick where its CPU time advanced and every [`RECOUNT_EVERY_TICKS`] | same |
//! | network bytes | `/proc/<pid>/net/dev` of one of its processes | same |
//!
//! Disk bytes count only the devices the `diskstats` collector counts (whole physical disks), so
//! container and node disk bytes compare. Network: a container in the host's network namespace
//! (`hostNetwork`) has no traffic of its own to report; a namespace shared by several containers
//! (a pod) is reported once, on the container with the smallest id, so sums over containers stay
//! right; loopback is left out unless `--collector.netdev.include-loopback`.
//!
//! `system` (see [`remainder`]): CPU from `/proc/stat` busy time (`common::contract::cpu_mode`:
//! every mode but idle, iowait and steal, the one definition the estimator and dashboards use),
//! disk from the same whole disks in `/proc/diskstats`, both as counters advancing by what
//! containers do not explain; memory = (`MemTotal - MemFree`) - Σ container memory (a cgroup's
//! memory includes its page cache, so the node side does too); processes = Σ `cgroup.procs`
//! over every cgroup of the v2 hierarchy (every process is in exactly one; listing `/proc`
//! instead costs 1.5 ms per tick with 1,000 processes) minus Σ container processes. No `system` network series: traffic of the host namespace cannot be
//! split from container traffic forwarded through it without packet-level accounting.

pub mod layout;
pub mod parse;
pub mod remainder;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use greenpipe_common::contract;
use greenpipe_common::names::{label, source, SYSTEM_CONTAINER};

use self::layout::Layout;
use self::parse::IoBytes;
use self::remainder::{increase, Remainder};
use super::diskstats::{whole_disk_totals, DiskFilter};
use super::source::{read_into, TextFile};
use super::{cpu, meminfo, netdev, CollectError, Collector, Context, Report, Spec};
use crate::cgroup_watch::TreeWatch;
use crate::metrics::MetricSet;
use greenpipe_common::container_id::{from_cgroup_path, ContainerRef};

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "cgroup",
    default_enabled: true,
    help: "Per-container CPU, memory, disk, processes and network from cgroups v1/v2, plus container_id=\"system\"",
    build,
};

/// A container's processes are counted again in every tick where its CPU time advanced, and at
/// least every this many ticks. Reading `cgroup.procs` walks the cgroup's tasks under a kernel
/// lock per task, the largest cost left in a tick (docs/benchmarks.md); a process that forks or
/// exits runs, so an idle container's count can change only by a sleeping process being moved
/// in or out from outside, which the periodic count catches.
const RECOUNT_EVERY_TICKS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hierarchy {
    V2,
    V1,
}

#[derive(Debug, Clone, Copy)]
enum CpuFile {
    /// v2 `cpu.stat`, microseconds.
    CpuStat,
    /// v1 `cpuacct.usage`, nanoseconds.
    CpuacctUsage,
}

#[derive(Debug, Clone, Copy)]
enum IoFile {
    IoStat,
    Blkio,
}

/// A container found in the tree, with the files it is read from.
struct Tracked {
    cref: ContainerRef,
    hierarchy: Hierarchy,
    /// The container's own cgroup, where it was found.
    dir: PathBuf,
    /// Inside another container's cgroup (kind): its usage is already in the outer one.
    nested: bool,
    /// Cycle in which it was last found.
    seen: u64,
    /// The container's cgroup and its descendants, in the hierarchy it was found in.
    proc_dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each of `proc_dirs`.
    procs: Vec<TextFile>,
    cpu: Option<(TextFile, CpuFile)>,
    memory: Option<TextFile>,
    io: Option<(TextFile, IoFile)>,
    last_cpu: Option<f64>,
    /// Processes and first pid at the last count ([`RECOUNT_EVERY_TICKS`]).
    counted: Option<(u64, Option<u32>)>,
    last_io: Option<IoBytes>,
    /// The process whose network namespace was last looked up, and that namespace.
    netns: Option<(u32, Option<String>)>,
}

fn first_existing<T: Copy>(candidates: &[(Option<&Path>, &str, T)]) -> Option<(TextFile, T)> {
    candidates.iter().find_map(|(dir, file, kind)| {
        let p = (*dir)?.join(file);
        p.exists().then(|| (TextFile::new(p), *kind))
    })
}

impl Tracked {
    fn new(
        cref: ContainerRef,
        hierarchy: Hierarchy,
        dir: PathBuf,
        rel: &str,
        layout: &Layout,
    ) -> Tracked {
        let rel = rel.trim_start_matches('/');
        let v2 = layout.v2.as_ref().map(|r| r.join(rel));
        let cpuacct = layout.cpuacct.as_ref().map(|r| r.join(rel));
        let memory = layout.memory.as_ref().map(|r| r.join(rel));
        let blkio = layout.blkio.as_ref().map(|r| r.join(rel));
        Tracked {
            cref,
            hierarchy,
            dir,
            nested: false,
            seen: 0,
            proc_dirs: Vec::new(),
            procs: Vec::new(),
            cpu: first_existing(&[
                (v2.as_deref(), "cpu.stat", CpuFile::CpuStat),
                (cpuacct.as_deref(), "cpuacct.usage", CpuFile::CpuacctUsage),
            ]),
            memory: first_existing(&[
                (v2.as_deref(), "memory.current", ()),
                (memory.as_deref(), "memory.usage_in_bytes", ()),
            ])
            .map(|(f, ())| f),
            io: first_existing(&[
                (v2.as_deref(), "io.stat", IoFile::IoStat),
                (
                    blkio.as_deref(),
                    "blkio.throttle.io_service_bytes_recursive",
                    IoFile::Blkio,
                ),
                (
                    blkio.as_deref(),
                    "blkio.throttle.io_service_bytes",
                    IoFile::Blkio,
                ),
            ]),
            last_cpu: None,
            counted: None,
            last_io: None,
            netns: None,
        }
    }
}

struct CgroupCollector {
    layout: Layout,
    procfs: PathBuf,
    include_loopback: bool,
    containers: HashMap<String, Tracked>,
    /// The hierarchy every process is in (v2 when mounted): it gives the node's process count.
    complete: Hierarchy,
    /// `cgroup.procs` of the non-container cgroups of the `complete` hierarchy, with the cycle
    /// each was last seen in.
    host_procs: HashMap<PathBuf, (u64, TextFile)>,
    cycle: u64,
    watch: TreeWatch,
    buf: String,
    stack: Vec<(PathBuf, String, Option<String>)>,
    order: Vec<String>,
    netns_seen: HashSet<String>,
    stat: TextFile,
    meminfo: TextFile,
    diskstats: TextFile,
    disk_filter: DiskFilter,
    host_netns: Option<String>,
    ticks_per_second: f64,
    system_cpu: Remainder,
    system_read: Remainder,
    system_write: Remainder,
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let root = &ctx.paths.cgroupfs;
    std::fs::metadata(root).map_err(|e| CollectError::from_io(root, e))?;
    let layout = Layout::detect(root);
    if layout.is_empty() {
        return Err(CollectError::Unavailable(format!(
            "no cgroup v2 (cgroup.controllers) or v1 cpuacct/memory hierarchy under {}",
            root.display()
        )));
    }
    let procfs = ctx.paths.procfs.clone();
    // The host's network namespace: pid 1's, else ours (the exporter runs with hostNetwork).
    let host_netns = ["1", "self"].iter().find_map(|p| netns_of(&procfs.join(p)));
    Ok(Box::new(CgroupCollector {
        complete: if layout.v2.is_some() {
            Hierarchy::V2
        } else {
            Hierarchy::V1
        },
        layout,
        include_loopback: ctx.shared.include_loopback,
        containers: HashMap::new(),
        host_procs: HashMap::new(),
        cycle: 0,
        watch: TreeWatch::new(),
        buf: String::with_capacity(4096),
        stack: Vec::new(),
        order: Vec::new(),
        netns_seen: HashSet::new(),
        stat: TextFile::new(procfs.join("stat")),
        meminfo: TextFile::new(procfs.join("meminfo")),
        diskstats: TextFile::new(procfs.join("diskstats")),
        disk_filter: DiskFilter::new(ctx),
        host_netns,
        procfs,
        ticks_per_second: crate::selfstat::clock_ticks_per_second(),
        system_cpu: Remainder::default(),
        system_read: Remainder::default(),
        system_write: Remainder::default(),
    }))
}

/// `net:[4026531840]`, the identity of a process's network namespace.
fn netns_of(proc_pid: &Path) -> Option<String> {
    std::fs::read_link(proc_pid.join("ns/net"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

impl CgroupCollector {
    fn walk_all(&mut self) -> Result<(), CollectError> {
        if let Some(root) = self.layout.v2.clone() {
            self.walk(Hierarchy::V2, &root)?;
        }
        if let Some(root) = self.layout.v1_discovery.clone() {
            self.walk(Hierarchy::V1, &root)?;
        }
        Ok(())
    }

    /// Finds the container cgroups of one hierarchy and records where their processes are.
    fn walk(&mut self, hierarchy: Hierarchy, root: &Path) -> Result<(), CollectError> {
        std::fs::metadata(root).map_err(|e| CollectError::from_io(root, e))?;
        self.stack.clear();
        self.stack
            .push((root.to_path_buf(), String::from("/"), None));
        while let Some((dir, rel, enclosing)) = self.stack.pop() {
            self.watch.watch(&dir);
            let here = from_cgroup_path(&rel);
            let id_here = here.as_ref().map(|c| c.container_id.clone());
            if here.is_none() && hierarchy == self.complete {
                let cycle = self.cycle;
                self.host_procs
                    .entry(dir.clone())
                    .or_insert_with(|| (cycle, TextFile::new(dir.join("cgroup.procs"))))
                    .0 = cycle;
            }
            if let Some(cref) = here {
                let top = enclosing.as_deref() != Some(cref.container_id.as_str());
                let id = cref.container_id.clone();
                let layout = &self.layout;
                let t = self.containers.entry(id).or_insert_with(|| {
                    Tracked::new(cref.clone(), hierarchy, dir.clone(), &rel, layout)
                });
                if t.hierarchy != hierarchy {
                    // Already found in the v2 tree: its v1 subtree adds nothing.
                    continue;
                }
                if top && t.dir != dir {
                    // Moved (a cgroup renamed above it): its files and labels are the new path's.
                    *t = Tracked::new(cref, hierarchy, dir.clone(), &rel, layout);
                }
                if t.seen != self.cycle {
                    t.seen = self.cycle;
                    t.proc_dirs.clear();
                }
                if top {
                    t.nested = enclosing.is_some();
                }
                t.proc_dirs.push(dir.clone());
            }
            // A cgroupfs (and ext4, tmpfs) directory's link count is 2 + its subdirectories: skip
            // listing leaves. Some filesystems (btrfs) always say 1; those are listed.
            if std::fs::metadata(&dir).is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt;
                m.nlink() == 2
            }) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue; // removed while walking
            };
            let enclosing_below = id_here.or(enclosing);
            for entry in entries.filter_map(Result::ok) {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let child_rel = if rel == "/" {
                    format!("/{name}")
                } else {
                    format!("{rel}/{name}")
                };
                self.stack
                    .push((entry.path(), child_rel, enclosing_below.clone()));
            }
        }
        Ok(())
    }
}

/// Sums of the outermost containers, for the `system` remainder.
#[derive(Default)]
struct Sums {
    cpu: f64,
    cpu_delta: f64,
    memory: u64,
    io: IoBytes,
    io_delta: (f64, f64),
    processes: u64,
}

impl Collector for CgroupCollector {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        self.cycle += 1;
        let walked = self.watch.changed();
        if walked {
            self.watch.walking();
            if let Err(e) = self.walk_all() {
                self.watch.walk_failed();
                return Err(e);
            }
            let cycle = self.cycle;
            self.containers.retain(|_, t| t.seen == cycle);
            self.host_procs.retain(|_, (seen, _)| *seen == cycle);
        }
        let mut host_processes = 0;
        for (_, file) in self.host_procs.values_mut() {
            if let Ok(text) = file.read() {
                let (n, _, malformed) = parse::procs(text);
                host_processes += n;
                report.malformed_lines += malformed;
            }
        }

        // Node-side values first: the disk device set filters container disk bytes.
        let node_disks = self
            .diskstats
            .read()
            .ok()
            .map(|text| whole_disk_totals(text, &mut self.disk_filter));
        let node_disks = node_disks.map(|(totals, malformed)| {
            report.malformed_lines += malformed;
            totals
        });
        let counted = |maj: u32, min: u32| {
            node_disks
                .as_ref()
                .is_none_or(|d| d.devices.contains(&(maj, min)))
        };

        self.order.clear();
        self.order.extend(self.containers.keys().cloned());
        self.order.sort();
        self.netns_seen.clear();
        let mut sums = Sums::default();
        let buf = &mut self.buf;
        for id in &self.order {
            let t = self.containers.get_mut(id).expect("order lists live keys");
            let labels = [
                (label::CONTAINER_ID, t.cref.container_id.as_str()),
                (label::POD_UID, t.cref.pod_uid.as_str()),
            ];
            let outer = !t.nested;
            let mut ran = true;
            if let Some((file, kind)) = &mut t.cpu {
                let seconds = file.read().ok().and_then(|text| match kind {
                    CpuFile::CpuStat => parse::cpu_stat_usage_usec(text).map(|us| us as f64 / 1e6),
                    CpuFile::CpuacctUsage => parse::single_u64(text).map(|ns| ns as f64 / 1e9),
                });
                if let Some(s) = seconds {
                    emit_cpu(out, &labels, s);
                    if outer {
                        sums.cpu += s;
                        sums.cpu_delta += increase(t.last_cpu, s);
                    }
                    ran = t.last_cpu != Some(s);
                    t.last_cpu = Some(s);
                }
            }
            if let Some(file) = &mut t.memory {
                if let Some(bytes) = file.read().ok().and_then(parse::single_u64) {
                    emit_memory(out, &labels, bytes);
                    if outer {
                        sums.memory += bytes;
                    }
                }
            }
            if let Some((file, kind)) = &mut t.io {
                if let Ok(text) = file.read() {
                    let (io, malformed) = match kind {
                        IoFile::IoStat => parse::io_stat(text, counted),
                        IoFile::Blkio => parse::blkio_service_bytes(text, counted),
                    };
                    report.malformed_lines += malformed;
                    emit_disk(out, &labels, io);
                    if outer {
                        sums.io.read += io.read;
                        sums.io.write += io.write;
                        let last = t.last_io;
                        sums.io_delta.0 += increase(last.map(|l| l.read as f64), io.read as f64);
                        sums.io_delta.1 += increase(last.map(|l| l.write as f64), io.write as f64);
                    }
                    t.last_io = Some(io);
                }
            }
            // A container's directories change only in a walk.
            let same_dirs = !walked
                || t.procs.len() == t.proc_dirs.len()
                    && t.procs
                        .iter()
                        .zip(&t.proc_dirs)
                        .all(|(f, d)| f.path().parent() == Some(d.as_path()));
            if !same_dirs {
                t.procs = t
                    .proc_dirs
                    .iter()
                    .map(|d| TextFile::new(d.join("cgroup.procs")))
                    .collect();
            }
            let (processes, first_pid) = match t.counted {
                Some(counted)
                    if !ran && same_dirs && !self.cycle.is_multiple_of(RECOUNT_EVERY_TICKS) =>
                {
                    counted
                }
                _ => {
                    let (mut processes, mut first_pid) = (0, None);
                    for file in &mut t.procs {
                        if let Ok(text) = file.read() {
                            let (n, first, malformed) = parse::procs(text);
                            processes += n;
                            first_pid = first_pid.or(first);
                            report.malformed_lines += malformed;
                        }
                    }
                    t.counted = Some((processes, first_pid));
                    (processes, first_pid)
                }
            };
            out.push(&contract::container::PROCESSES, &labels, processes as f64);
            sums.processes += processes;
            if t.hierarchy == self.complete {
                host_processes += processes;
            }
            if let Some(pid) = first_pid {
                let proc_pid = self.procfs.join(pid.to_string());
                let ns = match &t.netns {
                    Some((p, ns)) if *p == pid => ns.clone(),
                    _ => {
                        let ns = netns_of(&proc_pid);
                        t.netns = Some((pid, ns.clone()));
                        ns
                    }
                };
                if let Some(ns) = ns {
                    let own = self.host_netns.as_ref().is_some_and(|h| *h != ns);
                    if own
                        && self.netns_seen.insert(ns)
                        && read_into(&proc_pid.join("net/dev"), buf).is_ok()
                    {
                        let (mut rx, mut tx) = (0u64, 0u64);
                        let include_loopback = self.include_loopback;
                        report.malformed_lines += netdev::for_each_interface(buf, |d| {
                            if d.name != "lo" || include_loopback {
                                rx += d.rx_bytes;
                                tx += d.tx_bytes;
                            }
                        });
                        for (direction, bytes) in [("receive", rx), ("transmit", tx)] {
                            out.push(
                                &contract::container::NETWORK_BYTES_TOTAL,
                                &[
                                    labels[0],
                                    labels[1],
                                    (label::DIRECTION, direction),
                                    (label::SOURCE, source::PROCFS),
                                ],
                                bytes as f64,
                            );
                        }
                    }
                }
            }
        }
        self.system(
            out,
            report,
            &sums,
            host_processes,
            node_disks.as_ref().map(|d| (d.read_bytes, d.write_bytes)),
        );
        Ok(())
    }
}

impl CgroupCollector {
    fn system(
        &mut self,
        out: &mut MetricSet,
        report: &mut Report,
        sums: &Sums,
        all_processes: u64,
        disks: Option<(u64, u64)>,
    ) {
        let labels = [
            (label::CONTAINER_ID, SYSTEM_CONTAINER),
            (label::POD_UID, ""),
        ];
        if let Ok(text) = self.stat.read() {
            let (stat, malformed) = cpu::parse_stat(text);
            report.malformed_lines += malformed;
            let busy_ticks: u64 = contract::cpu_mode::ALL
                .iter()
                .zip(stat.modes)
                .filter(|(mode, _)| contract::cpu_mode::is_busy(mode))
                .map(|(_, ticks)| ticks)
                .sum();
            let node = busy_ticks as f64 / self.ticks_per_second;
            emit_cpu(
                out,
                &labels,
                self.system_cpu.update(node, sums.cpu, sums.cpu_delta),
            );
        }
        if let Ok(text) = self.meminfo.read() {
            let (mem, malformed) = meminfo::parse_meminfo(text);
            report.malformed_lines += malformed;
            if let Some(in_use) = mem.in_use() {
                emit_memory(out, &labels, in_use.saturating_sub(sums.memory));
            }
        }
        if let Some((read, write)) = disks {
            let io = (
                self.system_read
                    .update(read as f64, sums.io.read as f64, sums.io_delta.0),
                self.system_write
                    .update(write as f64, sums.io.write as f64, sums.io_delta.1),
            );
            for (direction, bytes) in [("read", io.0), ("write", io.1)] {
                out.push(
                    &contract::container::DISK_BYTES_TOTAL,
                    &[
                        labels[0],
                        labels[1],
                        (label::DIRECTION, direction),
                        (label::SOURCE, source::CGROUP),
                    ],
                    bytes,
                );
            }
        }
        out.push(
            &contract::container::PROCESSES,
            &labels,
            all_processes.saturating_sub(sums.processes) as f64,
        );
    }
}

fn emit_cpu(out: &mut MetricSet, labels: &[(&'static str, &str); 2], seconds: f64) {
    out.push(
        &contract::container::CPU_SECONDS_TOTAL,
        &[labels[0], labels[1], (label::SOURCE, source::CGROUP)],
        seconds,
    );
}

fn emit_memory(out: &mut MetricSet, labels: &[(&'static str, &str); 2], bytes: u64) {
    out.push(&contract::container::MEMORY_BYTES, labels, bytes as f64);
}

fn emit_disk(out: &mut MetricSet, labels: &[(&'static str, &str); 2], io: IoBytes) {
    for (direction, bytes) in [("read", io.read), ("write", io.write)] {
        out.push(
            &contract::container::DISK_BYTES_TOTAL,
            &[
                labels[0],
                labels[1],
                (label::DIRECTION, direction),
                (label::SOURCE, source::CGROUP),
            ],
            bytes as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::paths::Paths;

    const POD: &str = "kubepods/pod5d1e0b7c-0000-4000-8000-000000000001";

    fn id(n: u8) -> String {
        format!("{n:02x}").repeat(32)
    }

    /// A container cgroup as cgroupfs shows it, in a v2 tree under `root`.
    fn make_container(root: &Path, id: &str) {
        let dir = root.join(POD).join(format!("docker-{id}.scope"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpu.stat"), "usage_usec 2500000\n").unwrap();
        std::fs::write(dir.join("memory.current"), "4096\n").unwrap();
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
    }

    fn container_ids(collector: &mut dyn Collector) -> Vec<String> {
        let mut out = MetricSet::new();
        collector.collect(&mut out, &mut Report::default()).unwrap();
        let text = String::from_utf8(out.encode_text("n")).unwrap();
        let mut ids: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with(contract::container::MEMORY_BYTES.name))
            .filter_map(|l| l.split("container_id=\"").nth(1)?.split('"').next())
            .filter(|id| *id != SYSTEM_CONTAINER)
            .map(String::from)
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn containers_made_and_removed_between_ticks_are_found_and_dropped() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::write(root.join("cgroup.controllers"), "").unwrap();
        make_container(root, &id(1));
        let paths = Paths {
            cgroupfs: root.to_path_buf(),
            ..Paths::default()
        };
        let config = Config::for_paths(paths, "n");
        let mut c = build(&config.context()).unwrap();
        assert_eq!(container_ids(c.as_mut()), [id(1)]);
        assert_eq!(
            container_ids(c.as_mut()),
            [id(1)],
            "kept while nothing changes"
        );

        make_container(root, &id(2));
        assert_eq!(
            container_ids(c.as_mut()),
            [id(1), id(2)],
            "made after the walk"
        );

        let gone = root.join(POD).join(format!("docker-{}.scope", id(1)));
        std::fs::remove_dir_all(&gone).unwrap();
        assert_eq!(container_ids(c.as_mut()), [id(2)], "removed after the walk");

        std::fs::rename(
            root.join(POD),
            root.join("kubepods/pod5d1e0b7c-0000-4000-8000-000000000002"),
        )
        .unwrap();
        let mut out = MetricSet::new();
        c.collect(&mut out, &mut Report::default()).unwrap();
        let text = String::from_utf8(out.encode_text("n")).unwrap();
        assert!(
            text.contains("pod_uid=\"5d1e0b7c-0000-4000-8000-000000000002\""),
            "a renamed pod is walked again: {text}"
        );
    }

    fn processes_of(collector: &mut dyn Collector, id: &str) -> Option<f64> {
        let mut out = MetricSet::new();
        collector.collect(&mut out, &mut Report::default()).unwrap();
        let text = String::from_utf8(out.encode_text("n")).unwrap();
        text.lines()
            .find(|l| {
                l.starts_with(contract::container::PROCESSES.name)
                    && l.contains(&format!("container_id=\"{id}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn processes_are_counted_again_when_the_container_ran_and_every_tenth_tick() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::write(root.join("cgroup.controllers"), "").unwrap();
        make_container(root, &id(1));
        let dir = root.join(POD).join(format!("docker-{}.scope", id(1)));
        std::fs::write(dir.join("cgroup.procs"), "10\n").unwrap();
        let paths = Paths {
            cgroupfs: root.to_path_buf(),
            ..Paths::default()
        };
        let config = Config::for_paths(paths, "n");
        let mut c = build(&config.context()).unwrap();
        assert_eq!(processes_of(c.as_mut(), &id(1)), Some(1.0)); // tick 1

        // Moved in from outside while the container's CPU time stands still: seen at the
        // periodic count.
        std::fs::write(dir.join("cgroup.procs"), "10\n11\n").unwrap();
        for tick in 2..RECOUNT_EVERY_TICKS {
            assert_eq!(processes_of(c.as_mut(), &id(1)), Some(1.0), "tick {tick}");
        }
        assert_eq!(processes_of(c.as_mut(), &id(1)), Some(2.0), "tick 10");

        // A fork runs: counted in the tick its CPU time advanced.
        std::fs::write(dir.join("cgroup.procs"), "10\n11\n12\n").unwrap();
        std::fs::write(dir.join("cpu.stat"), "usage_usec 2600000\n").unwrap();
        assert_eq!(processes_of(c.as_mut(), &id(1)), Some(3.0));
    }
}
