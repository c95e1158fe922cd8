//! `/proc/meminfo`: node memory by state, in bytes.

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::source::TextFile;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "meminfo",
    default_enabled: true,
    help: "Node memory by state from /proc/meminfo",
    build,
};

/// `/proc/meminfo` keys exported, and the `state` label each gets. A fixed list keeps the
/// cardinality at a dozen series whatever the kernel adds.
pub const STATES: [(&str, &str); 11] = [
    ("MemTotal", "total"),
    ("MemFree", "free"),
    ("MemAvailable", "available"),
    ("Buffers", "buffers"),
    ("Cached", "cached"),
    ("Shmem", "shmem"),
    ("Slab", "slab"),
    ("Dirty", "dirty"),
    ("AnonPages", "anon"),
    ("SwapTotal", "swap_total"),
    ("SwapFree", "swap_free"),
];

/// Values of [`STATES`] in bytes, in that order (`None` where the kernel lacks the key).
#[derive(Debug, Default, PartialEq)]
pub struct MemValues(pub [Option<u64>; STATES.len()]);

impl MemValues {
    pub fn get(&self, key: &str) -> Option<u64> {
        let i = STATES.iter().position(|(k, _)| *k == key)?;
        self.0[i]
    }

    /// `MemTotal - MemAvailable`: what applications hold and the kernel cannot reclaim.
    pub fn used(&self) -> Option<u64> {
        Some(
            self.get("MemTotal")?
                .saturating_sub(self.get("MemAvailable")?),
        )
    }

    /// `MemTotal - MemFree`: every page in use, page cache included — the same quantity a
    /// cgroup's `memory.current` charges, so the `system` remainder is computed from it.
    pub fn in_use(&self) -> Option<u64> {
        Some(self.get("MemTotal")?.saturating_sub(self.get("MemFree")?))
    }
}

/// Parses `/proc/meminfo`; returns the values and the number of malformed lines.
pub fn parse_meminfo(text: &str) -> (MemValues, u64) {
    let mut values = MemValues::default();
    let mut malformed = 0;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            if !line.trim().is_empty() {
                malformed += 1;
            }
            continue;
        };
        let Some(i) = STATES.iter().position(|(k, _)| *k == key) else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let number = fields.next().and_then(|v| v.parse::<u64>().ok());
        let scale = match fields.next() {
            None => Some(1),
            Some("kB") => Some(1024),
            Some(_) => None,
        };
        match (number, scale) {
            (Some(n), Some(s)) => values.0[i] = Some(n.saturating_mul(s)),
            _ => malformed += 1,
        }
    }
    (values, malformed)
}

struct Meminfo {
    file: TextFile,
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    Ok(Box::new(Meminfo {
        file: TextFile::probe(ctx.paths.proc("meminfo"))?,
    }))
}

impl Collector for Meminfo {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let (values, malformed) = parse_meminfo(self.file.read()?);
        report.malformed_lines += malformed;
        for ((_, state), value) in STATES.iter().zip(values.0) {
            if let Some(v) = value {
                out.push(
                    &contract::node::MEMORY_BYTES,
                    &[(label::STATE, state)],
                    v as f64,
                );
            }
        }
        if let Some(used) = values.used() {
            out.push(
                &contract::node::MEMORY_BYTES,
                &[(label::STATE, "used")],
                used as f64,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The states emitted (the kernel fields, then `used`) are the contract's, in its order.
    #[test]
    fn states_are_the_contracts() {
        let mut emitted: Vec<&str> = STATES.iter().map(|(_, state)| *state).collect();
        emitted.push("used");
        assert_eq!(emitted, greenpipe_common::contract::memory_state::ALL);
    }

    #[test]
    fn parses_kilobytes_and_derives_used() {
        let text = "MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    600 kB\n\
                    HugePages_Total:       0\nSwapTotal:         0 kB\n";
        let (v, malformed) = parse_meminfo(text);
        assert_eq!(malformed, 0);
        assert_eq!(v.get("MemTotal"), Some(1000 * 1024));
        assert_eq!(v.get("SwapTotal"), Some(0));
        assert_eq!(v.get("Cached"), None);
        assert_eq!(v.used(), Some(400 * 1024));
        assert_eq!(v.in_use(), Some(800 * 1024));
    }

    #[test]
    fn malformed_lines_are_counted() {
        let (v, malformed) =
            parse_meminfo("MemTotal: lots kB\ngarbage\nMemFree: 1 MB\nCached: 2 kB\n");
        assert_eq!(malformed, 3);
        assert_eq!(v.get("Cached"), Some(2048));
        assert_eq!(v.used(), None);
    }
}
