//! RAPL energy counters through the powercap framework (`/sys/class/powercap/intel-rapl:*`,
//! also used by AMD CPUs on recent kernels).
//!
//! Each zone has `name` (`package-0`, `core`, `uncore`, `dram`, `psys`), `energy_uj` (µJ) and
//! `max_energy_range_uj`, the value at which `energy_uj` wraps to zero. Sub-zones
//! (`intel-rapl:0:0`) are parts of their package, and `psys` covers the whole SoC: summing
//! channels double counts, which is why `rapl:auto` takes top-level zones only.
//!
//! Since Linux 5.10 (CVE-2020-8694) `energy_uj` is readable by root only.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::energy::CounterRate;
use super::{Detected, DeviceEnergy, KindDef, ReadError, Reading, Reason};
use crate::paths::Paths;

const TARGET_HELP: &str =
    "`auto` (top-level zones), `all` (with sub-zones) or a zone, e.g. intel-rapl:0";

/// `rapl:auto`, `rapl:all`, `rapl:intel-rapl:0`.
pub static KIND: KindDef = KindDef {
    name: "rapl",
    target_help: TARGET_HELP,
    about: "RAPL energy counters under /sys/class/powercap",
    reasons: &[
        Reason::Unplugged,
        Reason::Timeout,
        Reason::BadResponse,
        Reason::Io,
    ],
    check_target: |target| super::check_directory_name(target, TARGET_HELP),
    build: |spec, paths, _| Ok(super::prefixed(spec, build(paths, &spec.target)?)),
    detect: |paths, _| Detected::listed("rapl", build(paths, "auto")),
};

/// One RAPL zone.
#[derive(Debug)]
pub struct RaplMeter {
    zone: PathBuf,
    max_range_joules: Option<f64>,
    rate: CounterRate,
}

/// `intel-rapl:0` → depth 1, `intel-rapl:0:1` → depth 2; anything else (mmio) → `None`.
fn zone_depth(dir: &str) -> Option<usize> {
    let rest = dir.strip_prefix("intel-rapl:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .then_some(parts.len())
}

fn read_trimmed(path: &Path) -> std::io::Result<String> {
    fs::read_to_string(path).map(|s| s.trim().to_string())
}

fn read_micro(path: &Path) -> Result<f64, ReadError> {
    let text = read_trimmed(path).map_err(|e| ReadError::from_io(path, &e))?;
    text.parse::<u64>().map(|v| v as f64 / 1e6).map_err(|_| {
        ReadError::new(
            Reason::BadResponse,
            format!("{}: not an integer: {text:?}", path.display()),
        )
    })
}

/// Channels for `rapl:<target>`: `auto` (top-level zones), `all` (with sub-zones) or one zone
/// directory (`intel-rapl:0:1`). Named by zone: `package-0`, `package-0/dram`, `psys`.
pub fn build(paths: &Paths, target: &str) -> Result<Vec<(String, RaplMeter)>, String> {
    let root = paths.sys("class/powercap");
    let entries = fs::read_dir(&root).map_err(|e| {
        format!(
            "{}: {e} (no powercap framework: not an x86 CPU with RAPL, or sysfs not mounted)",
            root.display()
        )
    })?;
    let mut zones: Vec<(String, usize)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let dir = e.file_name().to_string_lossy().into_owned();
            zone_depth(&dir).map(|d| (dir, d))
        })
        .filter(|(dir, depth)| match target {
            "auto" => *depth == 1,
            "all" => true,
            t => dir == t,
        })
        .collect();
    zones.sort();
    let mut out = Vec::new();
    let mut denied = Vec::new();
    for (dir, depth) in zones {
        let zone = root.join(&dir);
        let name = read_trimmed(&zone.join("name")).unwrap_or_else(|_| dir.clone());
        let name = if depth > 1 {
            let parent = &dir[..dir.rfind(':').expect("depth > 1 has a colon")];
            let parent_name =
                read_trimmed(&root.join(parent).join("name")).unwrap_or_else(|_| parent.into());
            format!("{parent_name}/{name}")
        } else {
            name
        };
        // Probe once: a zone whose counter root alone may read is unavailable, not broken.
        let energy = zone.join("energy_uj");
        if let Err(e) = fs::read_to_string(&energy) {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                denied.push(dir);
                continue;
            }
        }
        let max_range_joules = read_micro(&zone.join("max_energy_range_uj")).ok();
        out.push((
            name,
            RaplMeter {
                zone,
                max_range_joules,
                rate: CounterRate::default(),
            },
        ));
    }
    if out.is_empty() {
        return Err(if !denied.is_empty() {
            format!(
                "energy_uj of {} is readable by root only (Linux >= 5.10); run the exporter as root",
                denied.join(", ")
            )
        } else if target == "auto" || target == "all" {
            format!("no intel-rapl:* zones under {}", root.display())
        } else {
            format!("no RAPL zone {target:?} under {}", root.display())
        });
    }
    Ok(out)
}

impl super::Meter for RaplMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let now = Instant::now();
        let joules = read_micro(&self.zone.join("energy_uj"))?;
        Ok(Reading {
            power_watts: self.rate.watts(joules, self.max_range_joules, now),
            energy: Some(DeviceEnergy {
                joules,
                epoch: 0,
                wraps_at_joules: self.max_range_joules,
            }),
            ..Reading::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::energy::EnergyTotal;
    use crate::meter::Meter;
    use std::time::Duration;

    fn zone(root: &Path, dir: &str, name: &str, energy: u64, max: u64) {
        let d = root.join("class/powercap").join(dir);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("name"), format!("{name}\n")).unwrap();
        fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
        fs::write(d.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
    }

    fn fixture() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        zone(
            t.path(),
            "intel-rapl:0",
            "package-0",
            262_143_000_000,
            262_143_328_850,
        );
        zone(
            t.path(),
            "intel-rapl:0:0",
            "core",
            1_000_000,
            262_143_328_850,
        );
        zone(
            t.path(),
            "intel-rapl:0:1",
            "dram",
            2_000_000,
            65_712_999_613,
        );
        zone(t.path(), "intel-rapl:1", "psys", 5_000_000, 262_143_328_850);
        fs::create_dir_all(t.path().join("class/powercap/intel-rapl-mmio:0")).unwrap();
        t
    }

    fn paths(root: &Path) -> Paths {
        Paths {
            sysfs: root.to_path_buf(),
            ..Paths::default()
        }
    }

    #[test]
    fn selects_zones() {
        let t = fixture();
        let names = |target| -> Vec<String> {
            build(&paths(t.path()), target)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(names("auto"), ["package-0", "psys"]);
        assert_eq!(
            names("all"),
            ["package-0", "package-0/core", "package-0/dram", "psys"]
        );
        assert_eq!(names("intel-rapl:0:1"), ["package-0/dram"]);
        assert!(build(&paths(t.path()), "intel-rapl:7").is_err());
        let empty = tempfile::tempdir().unwrap();
        let err = build(&paths(empty.path()), "auto").unwrap_err();
        assert!(err.contains("powercap"), "{err}");
    }

    #[test]
    fn wraparound_keeps_power_positive_and_energy_monotonic() {
        let t = fixture();
        let mut chans = build(&paths(t.path()), "intel-rapl:0").unwrap();
        let meter = &mut chans[0].1;
        let mut total = EnergyTotal::new(Duration::from_secs(5));
        let t0 = Instant::now();
        let r = meter.read().unwrap();
        assert_eq!(r.power_watts, None, "first read has no rate");
        total.observe(&r, t0);
        // 328_850 µJ to the wrap point plus 671_150 µJ after it: exactly 1 J.
        let file = t.path().join("class/powercap/intel-rapl:0/energy_uj");
        fs::write(&file, "671150\n").unwrap();
        let r = meter.read().unwrap();
        assert!(r.power_watts.unwrap() > 0.0, "{r:?}");
        total.observe(&r, t0);
        assert!((total.joules() - 1.0).abs() < 1e-9, "{}", total.joules());
    }
}
