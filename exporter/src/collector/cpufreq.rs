//! Current frequency of each logical CPU from sysfs cpufreq.
//!
//! Virtual machines and some boards have no cpufreq driver: then the collector is unavailable
//! with that reason. CPUs without a `cpufreq` directory (offline, or no driver for that core) are
//! skipped, the others reported.

use std::path::PathBuf;

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::source::TextFile;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "cpufreq",
    default_enabled: true,
    help: "Current frequency per logical CPU from /sys/devices/system/cpu/cpu*/cpufreq",
    build,
};

struct Core {
    cpu: String,
    file: TextFile,
}

struct Cpufreq {
    cores: Vec<Core>,
}

/// Parses a `scaling_cur_freq` file (kHz) into hertz.
pub fn parse_khz(text: &str) -> Option<f64> {
    text.trim().parse::<u64>().ok().map(|khz| khz as f64 * 1e3)
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let root = ctx.paths.sys("devices/system/cpu");
    let entries = std::fs::read_dir(&root).map_err(|e| CollectError::from_io(&root, e))?;
    let mut cores: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let n: u32 = name.to_str()?.strip_prefix("cpu")?.parse().ok()?;
            let dir = e.path().join("cpufreq");
            // scaling_cur_freq is the governor's view; cpuinfo_cur_freq (hardware) needs root.
            ["scaling_cur_freq", "cpuinfo_cur_freq"]
                .iter()
                .map(|f| dir.join(f))
                .find(|p| p.exists())
                .map(|p| (n, p))
        })
        .collect();
    if cores.is_empty() {
        return Err(CollectError::Unavailable(format!(
            "no cpufreq driver: {}/cpu*/cpufreq/scaling_cur_freq absent",
            root.display()
        )));
    }
    cores.sort();
    Ok(Box::new(Cpufreq {
        cores: cores
            .into_iter()
            .map(|(n, path)| Core {
                cpu: n.to_string(),
                file: TextFile::new(path),
            })
            .collect(),
    }))
}

impl Collector for Cpufreq {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        for core in &mut self.cores {
            // A core going offline removes its file; skip it this tick.
            let Ok(text) = core.file.read() else { continue };
            match parse_khz(text) {
                Some(hz) => out.push(
                    &contract::node::CPU_FREQUENCY_HERTZ,
                    &[(label::CPU, &core.cpu)],
                    hz,
                ),
                None => report.malformed_lines += 1,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn khz_to_hz() {
        assert_eq!(parse_khz("1500000\n"), Some(1.5e9));
        assert_eq!(parse_khz("<unknown>\n"), None);
    }
}
