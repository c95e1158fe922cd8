//! `/proc/vmstat`: page-cache and paging activity.

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::source::TextFile;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "vmstat",
    default_enabled: true,
    help: "Page-cache and paging activity from /proc/vmstat",
    build,
};

/// Counters exported as the `event` label. `pgpgin`/`pgpgout` count KiB moved between the page
/// cache and block devices (the kernel's unit); the rest count pages or faults. Chosen for power
/// modelling: I/O through the page cache, faults, refaults (cache misses of evicted pages) and
/// reclaim work.
pub const EVENTS: [&str; 12] = [
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "pgfault",
    "pgmajfault",
    "pgactivate",
    "workingset_refault_file",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
];

/// Parses `/proc/vmstat` into values of [`EVENTS`] (in that order) and the malformed-line count.
pub fn parse_vmstat(text: &str) -> ([Option<u64>; EVENTS.len()], u64) {
    let mut values = [None; EVENTS.len()];
    let mut malformed = 0;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(key), value, None) = (fields.next(), fields.next(), fields.next()) else {
            if !line.trim().is_empty() {
                malformed += 1;
            }
            continue;
        };
        let Some(i) = EVENTS.iter().position(|e| *e == key) else {
            continue;
        };
        match value.and_then(|v| v.parse().ok()) {
            Some(v) => values[i] = Some(v),
            None => malformed += 1,
        }
    }
    (values, malformed)
}

struct Vmstat {
    file: TextFile,
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    Ok(Box::new(Vmstat {
        file: TextFile::probe(ctx.paths.proc("vmstat"))?,
    }))
}

impl Collector for Vmstat {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let (values, malformed) = parse_vmstat(self.file.read()?);
        report.malformed_lines += malformed;
        for (event, value) in EVENTS.iter().zip(values) {
            if let Some(v) = value {
                out.push(
                    &contract::node::PAGE_CACHE_EVENTS_TOTAL,
                    &[(label::EVENT, event)],
                    v as f64,
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_listed_events_and_counts_malformed() {
        let (v, malformed) =
            parse_vmstat("nr_free_pages 5\npgpgin 10\npgfault x\npgpgout 20 extra\npgmajfault 3\n");
        assert_eq!(malformed, 2);
        assert_eq!(v[0], Some(10));
        assert_eq!(v[1], None);
        assert_eq!(v[5], Some(3));
        assert_eq!(v[4], None);
    }
}
