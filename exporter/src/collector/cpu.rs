//! `/proc/stat`: CPU seconds by mode, context switches, runnable processes, online CPUs.

use std::fs;

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "cpu",
    default_enabled: true,
    help: "CPU seconds by mode, context switches and runnable processes from /proc/stat",
    build,
};

/// Modes of the aggregate `cpu` line, in kernel order (declared with the metric contract).
const MODES: [&str; 8] = contract::cpu_mode::ALL;

struct CpuCollector {
    path: std::path::PathBuf,
    /// USER_HZ: /proc/stat counts in clock ticks.
    ticks_per_second: f64,
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let path = ctx.paths.proc("stat");
    fs::metadata(&path).map_err(|e| CollectError::from_io(&path, e))?;
    Ok(Box::new(CpuCollector {
        path,
        ticks_per_second: crate::selfstat::clock_ticks_per_second(),
    }))
}

/// Parsed `/proc/stat`.
#[derive(Debug, Default, PartialEq)]
pub struct Stat {
    /// Ticks per mode of the aggregate line, in [`MODES`] order.
    pub modes: [u64; 8],
    /// Whether the aggregate `cpu` line parsed: without it `modes` is not data (exporting zeros
    /// would look like a counter reset and make `rate()` spike).
    pub has_aggregate: bool,
    /// Number of `cpuN` lines.
    pub cpus: u32,
    /// `ctxt`.
    pub context_switches: Option<u64>,
    /// `procs_running`.
    pub procs_running: Option<u64>,
}

/// Parses `/proc/stat`; returns the number of malformed lines it skipped.
pub fn parse_stat(text: &str) -> (Stat, u64) {
    let mut stat = Stat::default();
    let mut malformed = 0;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(key) = fields.next() else { continue };
        if key == "cpu" {
            let values: Result<Vec<u64>, _> = fields.take(MODES.len()).map(str::parse).collect();
            match values {
                Ok(v) if v.len() >= 4 => {
                    stat.modes[..v.len()].copy_from_slice(&v);
                    stat.has_aggregate = true;
                }
                _ => malformed += 1,
            }
        } else if key.starts_with("cpu") {
            stat.cpus += 1;
        } else if key == "ctxt" || key == "procs_running" {
            match fields.next().and_then(|v| v.parse().ok()) {
                Some(v) if key == "ctxt" => stat.context_switches = Some(v),
                Some(v) => stat.procs_running = Some(v),
                None => malformed += 1,
            }
        }
    }
    (stat, malformed)
}

impl Collector for CpuCollector {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let text =
            fs::read_to_string(&self.path).map_err(|e| CollectError::from_io(&self.path, e))?;
        let (stat, malformed) = parse_stat(&text);
        report.malformed_lines += malformed;
        let modes = if stat.has_aggregate { &MODES[..] } else { &[] };
        for (mode, ticks) in modes.iter().zip(stat.modes) {
            out.push(
                &contract::node::CPU_SECONDS_TOTAL,
                &[(label::MODE, mode)],
                ticks as f64 / self.ticks_per_second,
            );
        }
        out.push(&contract::node::CPUS, &[], stat.cpus as f64);
        if let Some(v) = stat.context_switches {
            out.push(&contract::node::CONTEXT_SWITCHES_TOTAL, &[], v as f64);
        }
        if let Some(v) = stat.procs_running {
            out.push(&contract::node::PROCS_RUNNING, &[], v as f64);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_aggregate_line_and_counters() {
        let text =
            "cpu  10 1 5 100 2 0 3 0 0 0\ncpu0 5 0 2 50 1 0 1 0 0 0\ncpu1 5 1 3 50 1 0 2 0 0 0\n\
                    intr 1 2 3\nctxt 4242\nbtime 1\nprocs_running 3\nprocs_blocked 0\n";
        let (stat, malformed) = parse_stat(text);
        assert_eq!(malformed, 0);
        assert_eq!(stat.modes, [10, 1, 5, 100, 2, 0, 3, 0]);
        assert_eq!(stat.cpus, 2);
        assert_eq!(stat.context_switches, Some(4242));
        assert_eq!(stat.procs_running, Some(3));
    }

    #[test]
    fn malformed_lines_are_counted_not_fatal() {
        let (stat, malformed) = parse_stat("cpu x y\nctxt\nprocs_running 1\n");
        assert_eq!(malformed, 2);
        assert_eq!(stat.procs_running, Some(1));
    }
}
