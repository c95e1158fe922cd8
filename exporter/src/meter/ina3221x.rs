//! Jetson power rails through NVIDIA's legacy `ina3221x` IIO driver (L4T R32 and older: Jetson
//! Nano, TX1, TX2, Xavier NX, AGX Xavier). Newer L4T (R34+) binds the mainline `ina3221` hwmon
//! driver instead, read by [`super::hwmon`] with the rails named by their `in<K>_label`.
//!
//! Each chip is `/sys/bus/i2c/drivers/ina3221x/<bus>-<addr>/iio:device<N>/` (e.g.
//! `6-0040/iio:device0` on a Nano, `1-0040/iio:device0` and `1-0041/iio:device1` on an AGX
//! Xavier) with, for each channel K in 0..=2 (the driver's sysfs names, as jetson-stats'
//! `jtop/core/power.py` reads them):
//! - `rail_name_K`: the rail, e.g. `POM_5V_IN`, `VDD_IN`, `VDD_CPU_GPU_CV`;
//! - `in_power K _input` (`in_power0_input`, mW), `in_current0_input` (mA), `in_voltage0_input`
//!   (mV).
//!
//! `crit_current_limit_K` and `warn_current_limit_K` are limits, not readings: ignored. Each rail
//! is one channel named by its rail name; a rail named `NC` (not connected) is skipped.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{Detected, KindDef, ReadError, Reading, Reason};
use crate::paths::Paths;

const TARGET_HELP: &str = "`auto` (every rail) or a rail name, e.g. VDD_IN or POM_5V_IN";

/// `ina3221x:auto`, `ina3221x:VDD_IN`.
pub static KIND: KindDef = KindDef {
    name: "ina3221x",
    target_help: TARGET_HELP,
    about: "Jetson power rails of NVIDIA's ina3221x IIO driver (L4T R32: Nano, TX1/TX2, Xavier) \
            under /sys/bus/i2c/drivers/ina3221x",
    reasons: &[Reason::Unplugged, Reason::BadResponse, Reason::Io],
    check_target,
    build: |spec, paths, _| Ok(super::prefixed(spec, build(paths, &spec.target)?)),
    detect: |paths, _| Detected::listed("ina3221x", build(paths, "auto")),
};

fn check_target(target: &str) -> Result<(), String> {
    super::check_directory_name(target, TARGET_HELP)?;
    if target.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("a rail name has no spaces ({TARGET_HELP})"));
    }
    Ok(())
}

/// One rail of one chip.
#[derive(Debug)]
pub struct RailMeter {
    dir: PathBuf,
    index: u32,
    has_power: bool,
    has_voltage: bool,
    has_current: bool,
}

/// The driver's directory under sysfs.
fn driver_dir(paths: &Paths) -> PathBuf {
    paths.sys("bus/i2c/drivers/ina3221x")
}

/// The IIO device directories of every bound chip, in name order.
fn device_dirs(driver: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = fs::read_dir(driver).map_err(|e| {
        format!(
            "{}: {e} (no ina3221x driver: L4T R34+ uses hwmon, see hwmon:auto)",
            driver.display()
        )
    })?;
    let mut chips: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Chip entries are `<bus>-<addr>` links; the driver directory also holds bind, unbind,
        // uevent and module.
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains('-'))
        })
        .collect();
    chips.sort();
    let mut out = Vec::new();
    for chip in chips {
        let Ok(entries) = fs::read_dir(&chip) else {
            continue;
        };
        let mut devices: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("iio:device"))
            .map(|e| e.path())
            .collect();
        devices.sort();
        out.extend(devices);
    }
    Ok(out)
}

/// The rails of one IIO device directory: `(rail name, meter)` for each `rail_name_K`.
/// A rail name that is empty or not text is skipped with a warning (it cannot label a channel).
pub fn rails(dir: &Path) -> Vec<(String, RailMeter)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let files: BTreeSet<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut out = Vec::new();
    for index in files
        .iter()
        .filter_map(|f| f.strip_prefix("rail_name_")?.parse::<u32>().ok())
        .collect::<BTreeSet<u32>>()
    {
        let path = dir.join(format!("rail_name_{index}"));
        let name = match fs::read_to_string(&path) {
            Ok(text) => text.trim().to_string(),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "ina3221x rail name unreadable; rail skipped");
                continue;
            }
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            tracing::warn!(file = %path.display(), name = ?name, "ina3221x rail name malformed; rail skipped");
            continue;
        }
        if name == "NC" {
            continue; // not connected (jetson-stats skips these too)
        }
        let has = |attr: &str| files.contains(&format!("in_{attr}{index}_input"));
        let meter = RailMeter {
            dir: dir.to_path_buf(),
            index,
            has_power: has("power"),
            has_voltage: has("voltage"),
            has_current: has("current"),
        };
        let readable = meter.has_power || (meter.has_voltage && meter.has_current);
        if !readable {
            continue;
        }
        out.push((name, meter));
    }
    out
}

/// Channels for `ina3221x:<target>`: `auto` = every rail; otherwise the rail of that name.
pub fn build(paths: &Paths, target: &str) -> Result<Vec<(String, RailMeter)>, String> {
    let driver = driver_dir(paths);
    let mut out: Vec<(String, RailMeter)> = Vec::new();
    for dir in device_dirs(&driver)? {
        for (name, meter) in rails(&dir) {
            if target != "auto" && name != target {
                continue;
            }
            if out.iter().any(|(n, _)| *n == name) {
                // Two chips with the same rail name would give one label two series.
                tracing::warn!(rail = %name, dir = %dir.display(), "ina3221x rail name repeated; second one skipped");
                continue;
            }
            out.push((name, meter));
        }
    }
    if out.is_empty() {
        return Err(if target == "auto" {
            format!("no ina3221x rail under {}", driver.display())
        } else {
            format!(
                "no ina3221x rail named {target:?} under {}",
                driver.display()
            )
        });
    }
    Ok(out)
}

impl RailMeter {
    /// `in_<attr><K>_input` as an integer (mW, mV or mA).
    fn value(&self, attr: &str) -> Result<f64, ReadError> {
        super::read_sysfs_integer(&self.dir.join(format!("in_{attr}{}_input", self.index)))
    }
}

impl super::Meter for RailMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let volts = if self.has_voltage {
            Some(self.value("voltage")? / 1e3)
        } else {
            None
        };
        let amps = if self.has_current {
            Some(self.value("current")? / 1e3)
        } else {
            None
        };
        let power = if self.has_power {
            Some(self.value("power")? / 1e3)
        } else {
            volts.zip(amps).map(|(v, a)| v * a)
        };
        Ok(Reading {
            power_watts: power,
            voltage_volts: volts,
            current_amperes: amps,
            temperature_celsius: None,
            energy: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Meter;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A Jetson Nano on L4T R32: one INA3221 at I2C bus 6, address 0x40, with the rails
    /// POM_5V_IN (module input), POM_5V_GPU and POM_5V_CPU (values as tegrastats shows them
    /// idle: ~1.9 W in, 5 V).
    fn nano() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let d = "bus/i2c/drivers/ina3221x/6-0040/iio:device0";
        for (k, rail, mw, mv, ma) in [
            (0, "POM_5V_IN", 1912, 5072, 376),
            (1, "POM_5V_GPU", 0, 5048, 0),
            (2, "POM_5V_CPU", 313, 5064, 62),
        ] {
            write(
                t.path(),
                &format!("{d}/rail_name_{k}"),
                &format!("{rail}\n"),
            );
            write(
                t.path(),
                &format!("{d}/in_power{k}_input"),
                &format!("{mw}\n"),
            );
            write(
                t.path(),
                &format!("{d}/in_voltage{k}_input"),
                &format!("{mv}\n"),
            );
            write(
                t.path(),
                &format!("{d}/in_current{k}_input"),
                &format!("{ma}\n"),
            );
            write(t.path(), &format!("{d}/crit_current_limit_{k}"), "32760\n");
        }
        write(t.path(), &format!("{d}/running_mode"), "1\n");
        write(t.path(), "bus/i2c/drivers/ina3221x/uevent", "");
        t
    }

    fn paths(root: &Path) -> Paths {
        Paths {
            sysfs: root.to_path_buf(),
            ..Paths::default()
        }
    }

    #[test]
    fn auto_names_each_rail_and_reads_milliwatts_millivolts_milliamperes() {
        let t = nano();
        let mut chans = build(&paths(t.path()), "auto").unwrap();
        let names: Vec<_> = chans.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"]);
        let r = chans[0].1.read().unwrap();
        assert_eq!(r.power_watts, Some(1.912));
        assert_eq!(r.voltage_volts, Some(5.072));
        assert_eq!(r.current_amperes, Some(0.376));
        assert_eq!(r.energy, None);
    }

    #[test]
    fn target_selects_one_rail_by_name() {
        let t = nano();
        let chans = build(&paths(t.path()), "POM_5V_IN").unwrap();
        assert_eq!(chans.len(), 1);
        let err = build(&paths(t.path()), "VDD_IN").unwrap_err();
        assert!(err.contains("no ina3221x rail named \"VDD_IN\""), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = build(&paths(empty.path()), "auto").unwrap_err();
        assert!(err.contains("hwmon:auto"), "{err}");
    }

    #[test]
    fn power_without_its_file_is_voltage_times_current() {
        let t = nano();
        let d = t.path().join("bus/i2c/drivers/ina3221x/6-0040/iio:device0");
        fs::remove_file(d.join("in_power2_input")).unwrap();
        let mut chans = build(&paths(t.path()), "POM_5V_CPU").unwrap();
        let r = chans[0].1.read().unwrap();
        assert_eq!(r.power_watts, Some(5.064 * 0.062));
    }

    #[test]
    fn vanished_and_garbled_files_are_read_errors() {
        let t = nano();
        let mut chans = build(&paths(t.path()), "POM_5V_IN").unwrap();
        let chip = t.path().join("bus/i2c/drivers/ina3221x/6-0040");
        fs::write(chip.join("iio:device0/in_power0_input"), "-EIO\n").unwrap();
        let err = chans[0].1.read().unwrap_err();
        assert_eq!(err.reason, Reason::BadResponse);
        assert!(err.message.contains("in_power0_input"), "{err}");
        fs::remove_dir_all(&chip).unwrap();
        assert_eq!(chans[0].1.read().unwrap_err().reason, Reason::Unplugged);
    }

    #[test]
    fn malformed_and_unconnected_rail_names_are_skipped() {
        let t = nano();
        let d = "bus/i2c/drivers/ina3221x/6-0040/iio:device0";
        write(t.path(), &format!("{d}/rail_name_1"), "\n");
        write(t.path(), &format!("{d}/rail_name_2"), "NC\n");
        let names: Vec<_> = build(&paths(t.path()), "auto")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["POM_5V_IN"]);
    }

    #[test]
    fn targets_that_are_paths_or_have_spaces_are_refused() {
        assert!(check_target("VDD_IN").is_ok());
        assert!(check_target("auto").is_ok());
        assert!(check_target("/sys/bus/i2c").is_err());
        assert!(check_target("VDD IN").is_err());
    }
}
