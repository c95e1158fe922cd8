//! Per-process CPU seconds and resident memory, for the top N processes by CPU used since the
//! previous tick. Off by default: pids are unbounded label values.
//!
//! Every tick reads `/proc/<pid>/stat` of every process (one small file each); only the N
//! exported ones also get their `/proc/<pid>/cgroup` read, for the `container_id` label.

use std::collections::HashMap;
use std::path::PathBuf;

use greenpipe_common::names::{label, process, SYSTEM_CONTAINER};

use super::source::read_into;
use super::{CollectError, Collector, Report, Spec};
use crate::config::Config;
use crate::container_id::from_cgroup_path;
use crate::metrics::MetricSet;

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
    cgroup_text
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .find_map(from_cgroup_path)
        .map(|c| c.container_id)
        .unwrap_or_else(|| SYSTEM_CONTAINER.to_string())
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
    ticks_per_second: f64,
    page_size: f64,
}

fn build(config: &Config) -> Result<Box<dyn Collector>, CollectError> {
    let procfs = config.paths.procfs.clone();
    std::fs::read_dir(&procfs).map_err(|e| CollectError::from_io(&procfs, e))?;
    Ok(Box::new(ProcessCollector {
        procfs,
        top_n: config.process_top_n,
        previous: HashMap::new(),
        current: HashMap::new(),
        candidates: Vec::new(),
        buf: String::with_capacity(1024),
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
        self.candidates.sort_unstable_by(|a, b| {
            // Recent CPU first; on a tie (e.g. all idle), lifetime CPU, then pid: stable.
            (b.delta, b.cpu_ticks, a.pid).cmp(&(a.delta, a.cpu_ticks, b.pid))
        });
        self.candidates.truncate(self.top_n);
        for c in &self.candidates {
            path.push(c.pid.to_string());
            path.push("cgroup");
            let container = match read_into(&path, &mut self.buf) {
                Ok(()) => container_of(&self.buf),
                Err(_) => SYSTEM_CONTAINER.to_string(),
            };
            path.pop();
            path.pop();
            let pid = c.pid.to_string();
            let labels = [
                (label::PID, pid.as_str()),
                (label::COMM, c.comm.as_str()),
                (label::CONTAINER_ID, container.as_str()),
            ];
            out.counter(
                process::CPU_SECONDS_TOTAL,
                "CPU time (user + system) of the process, for the top-N by recent CPU (/proc/<pid>/stat).",
                &labels,
                c.cpu_ticks as f64 / self.ticks_per_second,
            );
            out.gauge(
                process::RESIDENT_MEMORY_BYTES,
                "Resident memory of the process, for the top-N by recent CPU (/proc/<pid>/stat).",
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
