//! Per-process CPU seconds and resident memory, for the top N processes by CPU used since the
//! previous tick. Off by default: pids are unbounded label values.
//!
//! Every tick reads `/proc/<pid>/stat` of every process (one small file each); only the N
//! exported ones also get their `/proc/<pid>/cgroup` read, for the `container_id` label.
//!
//! The ranking ([`top_n`]) and the labels ([`Labeler`], [`labels`]) are shared with the eBPF
//! collector's per-process series (`source="bpf"`), so both sources pick and name processes
//! the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use greenpipe_common::contract;
use greenpipe_common::names::{label, source, SYSTEM_CONTAINER};

use super::source::read_into;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;
use greenpipe_common::container_id::{from_cgroup_path, ContainerRef};

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "process",
    default_enabled: false,
    help:
        "CPU seconds and resident memory of the top-N processes by CPU (--collector.process.top-n)",
    build,
};

/// The fields of `/proc/<pid>/stat` this collector uses.
#[derive(Debug, PartialEq, Eq)]
pub struct ProcStat<'a> {
    /// Command name (`comm`), without the parentheses.
    pub comm: &'a str,
    /// User + system time in clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot in clock ticks (tells a reused pid from the old process).
    pub start_ticks: u64,
    /// Resident set in pages.
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name may hold spaces and parentheses, so the fields
/// are counted from its last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat<'_>> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    let rest: Vec<&str> = text
        .get(close + 1..)?
        .split_ascii_whitespace()
        .take(22)
        .collect();
    // rest[0] is field 3 (state): utime = field 14, stime 15, starttime 22, rss 24.
    let field = |n: usize| rest.get(n - 3)?.parse::<u64>().ok();
    Some(ProcStat {
        comm,
        cpu_ticks: field(14)? + field(15)?,
        start_ticks: field(22)?,
        rss_pages: field(24)?,
    })
}

/// The container a `/proc/<pid>/cgroup` text places the process in (`system` if none).
pub fn container_of(cgroup_text: &str) -> String {
    container_line(cgroup_text)
        .map(|(c, _, _)| c.container_id)
        .unwrap_or_else(|| SYSTEM_CONTAINER.to_string())
}

/// The first line of a `/proc/<pid>/cgroup` text whose path names a container: the container,
/// the line's controllers (empty for cgroup v2) and the path within that hierarchy.
pub fn container_line(cgroup_text: &str) -> Option<(ContainerRef, &str, &str)> {
    cgroup_text.lines().find_map(|l| {
        let mut fields = l.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        from_cgroup_path(path).map(|c| (c, controllers, path))
    })
}

/// Keeps the `n` processes that used the most CPU recently (`delta`); on a tie (e.g. all idle),
/// the most lifetime CPU (`total`), then the lowest pid, so the choice is stable.
pub fn top_n<T>(items: &mut Vec<T>, n: usize, key: impl Fn(&T) -> (u64, u64, u32)) {
    items.sort_unstable_by(|a, b| {
        let ((da, ta, pa), (db, tb, pb)) = (key(a), key(b));
        (db, tb, pa).cmp(&(da, ta, pb))
    });
    items.truncate(n);
}

/// The labels of a per-process series: `pid`, `comm`, `container_id`, `source`.
pub fn labels<'a>(
    pid: &'a str,
    comm: &'a str,
    container: &'a str,
    source: &'static str,
) -> [(&'static str, &'a str); 4] {
    [
        (label::PID, pid),
        (label::COMM, comm),
        (label::CONTAINER_ID, container),
        (label::SOURCE, source),
    ]
}

/// Reads what labels a process from procfs, for the few processes exported.
#[derive(Debug)]
pub struct Labeler {
    procfs: PathBuf,
    path: PathBuf,
    buf: String,
}

impl Labeler {
    /// Reads under `procfs`.
    pub fn new(procfs: &Path) -> Labeler {
        Labeler {
            procfs: procfs.to_path_buf(),
            path: procfs.to_path_buf(),
            buf: String::with_capacity(1024),
        }
    }

    fn read(&mut self, pid: u32, file: &str) -> bool {
        self.path.clone_from(&self.procfs);
        self.path.push(pid.to_string());
        self.path.push(file);
        read_into(&self.path, &mut self.buf).is_ok()
    }

    /// The container the process runs in (`system` outside containers, or if it is gone).
    pub fn container(&mut self, pid: u32) -> String {
        if self.read(pid, "cgroup") {
            container_of(&self.buf)
        } else {
            SYSTEM_CONTAINER.to_string()
        }
    }

    /// The process's command name, `None` if it is gone (or its stat is unreadable).
    pub fn comm(&mut self, pid: u32) -> Option<String> {
        if !self.read(pid, "stat") {
            return None;
        }
        parse_stat(&self.buf).map(|s| s.comm.to_string())
    }
}

struct Candidate {
    pid: u32,
    comm: String,
    delta: u64,
    cpu_ticks: u64,
    rss_pages: u64,
}

struct ProcessCollector {
    procfs: PathBuf,
    top_n: usize,
    /// pid → (start ticks, CPU ticks) at the previous tick.
    previous: HashMap<u32, (u64, u64)>,
    current: HashMap<u32, (u64, u64)>,
    candidates: Vec<Candidate>,
    buf: String,
    labeler: Labeler,
    ticks_per_second: f64,
    page_size: f64,
}

/// `--collector.process.*`, `[process]`.
#[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessOptions {
    /// Per-process metrics: how many processes (top by CPU) to export [default: 10].
    #[arg(long = "collector.process.top-n")]
    pub top_n: Option<usize>,
}

impl ProcessOptions {
    /// How many processes to export (also bounds the eBPF per-process export).
    pub fn top_n(&self) -> usize {
        self.top_n.unwrap_or(10)
    }
}

impl super::CollectorOptions for ProcessOptions {
    fn merge(self, file: Self) -> Self {
        ProcessOptions {
            top_n: self.top_n.or(file.top_n),
        }
    }
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let procfs = ctx.paths.procfs.clone();
    std::fs::read_dir(&procfs).map_err(|e| CollectError::from_io(&procfs, e))?;
    Ok(Box::new(ProcessCollector {
        procfs: procfs.clone(),
        top_n: ctx.shared.processes_top_n,
        previous: HashMap::new(),
        current: HashMap::new(),
        candidates: Vec::new(),
        buf: String::with_capacity(1024),
        labeler: Labeler::new(&procfs),
        ticks_per_second: crate::selfstat::clock_ticks_per_second(),
        page_size: crate::selfstat::page_size() as f64,
    }))
}

impl Collector for ProcessCollector {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let entries =
            std::fs::read_dir(&self.procfs).map_err(|e| CollectError::from_io(&self.procfs, e))?;
        self.current.clear();
        self.candidates.clear();
        let mut path = self.procfs.clone();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            path.push(&name);
            path.push("stat");
            let read = read_into(&path, &mut self.buf);
            path.pop();
            path.pop();
            if read.is_err() {
                continue; // exited since the listing
            }
            let Some(stat) = parse_stat(&self.buf) else {
                report.malformed_lines += 1;
                continue;
            };
            let delta = match self.previous.get(&pid) {
                Some(&(start, ticks)) if start == stat.start_ticks => {
                    stat.cpu_ticks.saturating_sub(ticks)
                }
                _ => stat.cpu_ticks,
            };
            self.current.insert(pid, (stat.start_ticks, stat.cpu_ticks));
            self.candidates.push(Candidate {
                pid,
                comm: stat.comm.to_string(),
                delta,
                cpu_ticks: stat.cpu_ticks,
                rss_pages: stat.rss_pages,
            });
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        top_n(&mut self.candidates, self.top_n, |c| {
            (c.delta, c.cpu_ticks, c.pid)
        });
        for c in &self.candidates {
            let container = self.labeler.container(c.pid);
            let pid = c.pid.to_string();
            let labels = labels(&pid, &c.comm, &container, source::PROCFS);
            out.push(
                &contract::process::CPU_SECONDS_TOTAL,
                &labels,
                c.cpu_ticks as f64 / self.ticks_per_second,
            );
            out.push(
                &contract::process::RESIDENT_MEMORY_BYTES,
                &labels,
                c.rss_pages as f64 * self.page_size,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_comm() {
        let text = "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 9876 12345678 321 18446744073709551615\n";
        assert_eq!(
            parse_stat(text),
            Some(ProcStat {
                comm: "my (odd) proc",
                cpu_ticks: 300,
                start_ticks: 9876,
                rss_pages: 321
            })
        );
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn top_n_ranks_recent_then_lifetime_cpu_then_pid() {
        let mut items = vec![(5, 0, 100), (5, 9, 4), (9, 0, 7), (0, 50, 2), (0, 50, 1)];
        top_n(&mut items, 4, |&(d, t, p)| (d, t, p));
        assert_eq!(items, vec![(9, 0, 7), (5, 9, 4), (5, 0, 100), (0, 50, 1)]);
    }

    #[test]
    fn container_from_proc_cgroup() {
        let id = "a".repeat(64);
        let v1 = format!("4:memory:/docker/{id}\n1:cpu:/docker/{id}\n0::/\n");
        assert_eq!(container_of(&v1), id);
        assert_eq!(
            container_of("0::/system.slice/ssh.service\n"),
            SYSTEM_CONTAINER
        );
    }
}
