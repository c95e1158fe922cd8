//! `/proc/diskstats`: bytes and operations of whole disks.
//!
//! `/proc/diskstats` lists disks and their partitions (and loop, ram, zram, device-mapper
//! devices); summing every line counts a write to `sda1` twice (once for `sda1`, once for `sda`).
//! A device is counted when `/sys/block/<name>` exists (whole disks only; partitions live
//! below their disk), it is not stacked on other devices (`slaves/` is empty, so a dm-crypt or
//! md volume is not counted on top of its disks) and, unless asked, it is not a loop, ram or zram
//! device (no physical I/O).

use std::collections::HashMap;
use std::path::PathBuf;

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::source::TextFile;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "diskstats",
    default_enabled: true,
    help: "Bytes and operations of whole disks from /proc/diskstats (partitions, loop and ram devices left out)",
    build,
};

/// `/proc/diskstats` counts 512-byte sectors whatever the device's sector size.
const SECTOR_BYTES: u64 = 512;

/// One line of `/proc/diskstats`.
#[derive(Debug, PartialEq, Eq)]
pub struct DiskStat<'a> {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Kernel name (`sda`, `nvme0n1p1`, `cciss/c0d0`).
    pub name: &'a str,
    /// Reads completed.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// Parses one line; `None` if it is malformed.
pub fn parse_line(line: &str) -> Option<DiskStat<'_>> {
    let mut f = line.split_ascii_whitespace();
    let major = f.next()?.parse().ok()?;
    let minor = f.next()?.parse().ok()?;
    let name = f.next()?;
    let mut n = [0u64; 7];
    for slot in &mut n {
        *slot = f.next()?.parse().ok()?;
    }
    Some(DiskStat {
        major,
        minor,
        name,
        reads: n[0],
        read_bytes: n[2].saturating_mul(SECTOR_BYTES),
        writes: n[4],
        write_bytes: n[6].saturating_mul(SECTOR_BYTES),
    })
}

/// Decides which devices are whole physical disks, caching the answer per name.
#[derive(Debug)]
pub struct DiskFilter {
    sys_block: PathBuf,
    include_virtual: bool,
    known: HashMap<String, bool>,
}

impl DiskFilter {
    /// A filter reading `<sysfs>/block`.
    pub fn new(ctx: &Context<'_>) -> DiskFilter {
        DiskFilter {
            sys_block: ctx.paths.sys("block"),
            // Shared by design: the cgroup collector's disk bytes use the same filter.
            include_virtual: ctx.options.diskstats.include_virtual,
            known: HashMap::new(),
        }
    }

    /// Whether the device is counted (see the module documentation).
    pub fn includes(&mut self, name: &str) -> bool {
        if let Some(v) = self.known.get(name) {
            return *v;
        }
        let v = self.classify(name);
        self.known.insert(name.to_string(), v);
        v
    }

    fn classify(&self, name: &str) -> bool {
        let is_virtual = ["loop", "ram", "zram"].iter().any(|p| {
            name.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if is_virtual && !self.include_virtual {
            return false;
        }
        // sysfs spells '/' in device names as '!'.
        let dir = self.sys_block.join(name.replace('/', "!"));
        if !dir.is_dir() {
            return false;
        }
        match std::fs::read_dir(dir.join("slaves")) {
            Ok(mut entries) => entries.next().is_none(),
            Err(_) => true,
        }
    }
}

/// Bytes read and written by the counted disks, and their `(major, minor)` numbers.
#[derive(Debug, Default, PartialEq)]
pub struct DiskTotals {
    /// Σ bytes read.
    pub read_bytes: u64,
    /// Σ bytes written.
    pub write_bytes: u64,
    /// Devices included.
    pub devices: Vec<(u32, u32)>,
}

/// Sums the counted disks of a `/proc/diskstats` text; returns the malformed-line count too.
pub fn whole_disk_totals(text: &str, filter: &mut DiskFilter) -> (DiskTotals, u64) {
    let mut totals = DiskTotals::default();
    let mut malformed = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_line(line) {
            Some(d) if filter.includes(d.name) => {
                totals.read_bytes = totals.read_bytes.saturating_add(d.read_bytes);
                totals.write_bytes = totals.write_bytes.saturating_add(d.write_bytes);
                totals.devices.push((d.major, d.minor));
            }
            Some(_) => {}
            None => malformed += 1,
        }
    }
    (totals, malformed)
}

struct Diskstats {
    file: TextFile,
    filter: DiskFilter,
}

/// `--collector.diskstats.*`, `[diskstats]`.
#[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskstatsOptions {
    /// Also count loop, ram and zram devices in node disk metrics.
    #[arg(long = "collector.diskstats.include-virtual")]
    #[serde(default)]
    pub include_virtual: bool,
}

impl super::CollectorOptions for DiskstatsOptions {
    fn merge(self, file: Self) -> Self {
        DiskstatsOptions {
            include_virtual: self.include_virtual || file.include_virtual,
        }
    }
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let sys_block = ctx.paths.sys("block");
    std::fs::metadata(&sys_block).map_err(|e| CollectError::from_io(&sys_block, e))?;
    Ok(Box::new(Diskstats {
        file: TextFile::probe(ctx.paths.proc("diskstats"))?,
        filter: DiskFilter::new(ctx),
    }))
}

impl Collector for Diskstats {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let text = self.file.read()?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some(d) = parse_line(line) else {
                report.malformed_lines += 1;
                continue;
            };
            if !self.filter.includes(d.name) {
                continue;
            }
            for (direction, bytes, ops) in [
                ("read", d.read_bytes, d.reads),
                ("write", d.write_bytes, d.writes),
            ] {
                let labels = [(label::DEVICE, d.name), (label::DIRECTION, direction)];
                out.push(&contract::node::DISK_BYTES_TOTAL, &labels, bytes as f64);
                out.push(&contract::node::DISK_OPERATIONS_TOTAL, &labels, ops as f64);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::paths::Paths;

    #[test]
    fn parses_lines_of_every_kernel_width() {
        // 4.x (14 fields), 5.5+ (20 fields)
        let old = "   8       0 sda 10 0 8 0 5 0 16 0 0 0 0";
        let new = " 254       0 vda 50804 8267 4988618 62212 18246 99308 28543488 192708 0 22008 257155 7809 55 740392 2154 998 80";
        assert_eq!(
            parse_line(old),
            Some(DiskStat {
                major: 8,
                minor: 0,
                name: "sda",
                reads: 10,
                read_bytes: 4096,
                writes: 5,
                write_bytes: 8192
            })
        );
        let d = parse_line(new).unwrap();
        assert_eq!((d.reads, d.read_bytes), (50804, 4988618 * 512));
        assert_eq!(parse_line("8 0 sda 1 2"), None);
        assert_eq!(parse_line("x 0 sda 1 2 3 4 5 6 7"), None);
    }

    #[test]
    fn counts_whole_disks_once() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("block");
        for (dev, slave) in [
            ("sda", None),
            ("loop0", None),
            ("dm-0", Some("sda")),
            ("cciss!c0d0", None),
        ] {
            std::fs::create_dir_all(block.join(dev).join("slaves")).unwrap();
            if let Some(s) = slave {
                std::fs::create_dir_all(block.join(dev).join("slaves").join(s)).unwrap();
            }
        }
        let mut config = Config::for_paths(
            Paths {
                sysfs: dir.path().to_path_buf(),
                ..Paths::default()
            },
            "n",
        );
        let text = "8 0 sda 1 0 2 0 1 0 2 0 0 0 0\n8 1 sda1 1 0 2 0 1 0 2 0 0 0 0\n\
                    7 0 loop0 1 0 2 0 1 0 2 0 0 0 0\n253 0 dm-0 1 0 2 0 1 0 2 0 0 0 0\n\
                    104 0 cciss/c0d0 1 0 2 0 1 0 2 0 0 0 0\nbroken\n";
        let (totals, malformed) = whole_disk_totals(text, &mut DiskFilter::new(&config.context()));
        assert_eq!(malformed, 1);
        assert_eq!(totals.devices, vec![(8, 0), (104, 0)]);
        assert_eq!(totals.read_bytes, 2 * 1024);
        config.options.diskstats.include_virtual = true;
        let (totals, _) = whole_disk_totals(text, &mut DiskFilter::new(&config.context()));
        assert_eq!(totals.devices, vec![(8, 0), (7, 0), (104, 0)]);
    }
}
