//! hwmon power sensors (`/sys/class/hwmon/hwmon*`): INA219, INA226, INA3221, INA238, INA260 and
//! any other chip that exposes power, voltage and current, or energy.
//!
//! Per chip, in order of preference (hwmon sysfs ABI, Documentation/hwmon/sysfs-interface):
//! 1. `power<K>_input` (µW): one channel per power file, with `in<K>_input` (mV) and
//!    `curr<K>_input` (mA) of the same index as voltage and current when present (INA219/226/
//!    238/260 put the bus voltage in `in1` and the current in `curr1`, next to `power1`);
//! 2. else `in<K>_input` × `curr<K>_input` for every index that has both (INA3221: channels
//!    1-3; its shunt voltages `in4`-`in6` have no current and are skipped);
//! 3. else `energy<K>_input` (µJ): power from the counter's increase between reads.
//!
//! `energy<K>_input` of a power channel's index is used as the device energy counter.
//!
//! A chip whose driver labels its channels (`in<K>_label`, or `power<K>_label` for a power
//! channel) names each channel by its label: the mainline `ina3221` driver on a Jetson with L4T
//! R34+ labels `in1`-`in3` with the rail names of the device tree (`VDD_IN`, `VDD_CPU_GPU_CV`,
//! `VDD_SOC` on an Orin Nano/NX), so `hwmon:VDD_IN` selects the module input rail. On such a chip
//! only the labelled channels are read: the unlabelled indices are shunt voltages and sums
//! (`in4`-`in7`, `curr4`), not rails, and a rail labelled `NC` is not connected. A chip without
//! labels keeps the `<hwmonN>-<chip name>-<attr>` names.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::energy::CounterRate;
use super::{Detected, DeviceEnergy, KindDef, ReadError, Reading, Reason};
use crate::paths::Paths;

const TARGET_HELP: &str =
    "`auto` (every power sensor), a chip directory name (hwmon2), a chip name (ina219) or a \
     channel label (VDD_IN)";

/// `hwmon:auto`, `hwmon:hwmon2`, `hwmon:ina219`.
pub static KIND: KindDef = KindDef {
    name: "hwmon",
    target_help: TARGET_HELP,
    about: "hwmon power sensors under /sys/class/hwmon (INA219/INA226/INA3221/INA238/INA260)",
    reasons: &[
        Reason::Unplugged,
        Reason::Timeout,
        Reason::BadResponse,
        Reason::Io,
    ],
    check_target: |target| super::check_directory_name(target, TARGET_HELP),
    build: |spec, paths, _| Ok(super::prefixed(spec, build(paths, &spec.target)?)),
    detect: |paths, _| Detected::listed("hwmon", build(paths, "auto")),
};

/// Where power comes from for one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// `power<K>_input`.
    Power,
    /// `in<K>_input` × `curr<K>_input`.
    VoltageCurrent,
    /// `energy<K>_input` rate.
    Energy,
}

/// One hwmon channel.
#[derive(Debug)]
pub struct HwmonMeter {
    chip: PathBuf,
    index: u32,
    source: Source,
    has_voltage: bool,
    has_current: bool,
    has_energy: bool,
    rate: CounterRate,
}

/// Indices `K` of files `<prefix><K>_input` in a chip directory.
fn indices(files: &BTreeSet<String>, prefix: &str) -> BTreeSet<u32> {
    files
        .iter()
        .filter_map(|f| f.strip_prefix(prefix)?.strip_suffix("_input")?.parse().ok())
        .collect()
}

/// The label of channel `index` of `attr` (`in`, `power`), trimmed; `None` when the chip has
/// no such file or it is empty or unreadable.
fn label(chip: &Path, attr: &str, index: u32) -> Option<String> {
    let text = fs::read_to_string(chip.join(format!("{attr}{index}_label"))).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The channels of one chip directory, named by their label where the chip labels them, else
/// `<hwmonN>-<chip name>-<attr>`.
pub fn channels(chip: &Path) -> Vec<(String, HwmonMeter)> {
    let Ok(entries) = fs::read_dir(chip) else {
        return Vec::new();
    };
    let files: BTreeSet<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let power = indices(&files, "power");
    let volts = indices(&files, "in");
    let amps = indices(&files, "curr");
    let energy = indices(&files, "energy");
    let dir = chip
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let chip_name = fs::read_to_string(chip.join("name"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let (source, list, attr): (Source, Vec<u32>, &str) = if !power.is_empty() {
        (Source::Power, power.into_iter().collect(), "power")
    } else {
        let both: Vec<u32> = volts.intersection(&amps).copied().collect();
        if !both.is_empty() {
            (Source::VoltageCurrent, both, "in")
        } else {
            (Source::Energy, energy.iter().copied().collect(), "energy")
        }
    };
    let labels: Vec<(u32, Option<String>)> = list
        .into_iter()
        .map(|index| {
            let l = label(chip, attr, index).or_else(|| label(chip, "in", index));
            (index, l)
        })
        .collect();
    let labelled = labels.iter().any(|(_, l)| l.is_some());
    labels
        .into_iter()
        .filter_map(|(index, label)| {
            let name = if labelled {
                let label = label?;
                if label == "NC" {
                    return None; // not connected (jetson-stats skips these too)
                }
                label
            } else {
                format!("{dir}-{chip_name}-{attr}{index}")
            };
            let meter = HwmonMeter {
                chip: chip.to_path_buf(),
                index,
                has_voltage: volts.contains(&index),
                has_current: amps.contains(&index),
                has_energy: energy.contains(&index),
                source: source.clone(),
                rate: CounterRate::default(),
            };
            Some((name, meter))
        })
        .collect()
}

/// Channels for `hwmon:<target>`: `auto` = every chip with a power sensor; otherwise a chip
/// directory (`hwmon2`) or a chip name (`ina219`, which hwmon numbering does not keep stable).
pub fn build(paths: &Paths, target: &str) -> Result<Vec<(String, HwmonMeter)>, String> {
    let root = paths.sys("class/hwmon");
    let entries = fs::read_dir(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut chips: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    chips.sort_by_key(|p| natural_key(p));
    let mut out = Vec::new();
    for chip in chips {
        let dir = chip.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = fs::read_to_string(chip.join("name")).map(|s| s.trim().to_string());
        let selected = target == "auto"
            || dir.as_deref() == Some(target)
            || name.as_deref().ok() == Some(target);
        if selected {
            out.extend(channels(&chip));
        } else {
            // `hwmon:VDD_IN`: the channel labelled so, on whichever chip has it.
            out.extend(channels(&chip).into_iter().filter(|(n, _)| n == target));
        }
    }
    // Labels are unique per chip, not per host: a repeated one is prefixed with its chip.
    let mut seen = BTreeSet::new();
    let repeated: BTreeSet<String> = out
        .iter()
        .filter(|(n, _)| !seen.insert(n.clone()))
        .map(|(n, _)| n.clone())
        .collect();
    for (name, meter) in &mut out {
        if repeated.contains(name.as_str()) {
            let dir = meter
                .chip
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            *name = format!("{dir}-{name}");
        }
    }
    if out.is_empty() {
        return Err(if target == "auto" {
            format!(
                "no hwmon chip under {} exposes power, voltage and current, or energy",
                root.display()
            )
        } else {
            format!(
                "no hwmon chip or channel label {target:?} with power sensors under {}",
                root.display()
            )
        });
    }
    Ok(out)
}

/// Sorts `hwmon10` after `hwmon9`.
fn natural_key(p: &Path) -> (String, u64) {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let n = digits.parse().unwrap_or(0);
    (name[..name.len() - digits.len()].to_string(), n)
}

impl HwmonMeter {
    fn value(&self, attr: &str) -> Result<f64, ReadError> {
        super::read_sysfs_integer(&self.chip.join(format!("{attr}{}_input", self.index)))
    }
}

impl super::Meter for HwmonMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let now = Instant::now();
        let volts = if self.has_voltage {
            Some(self.value("in")? / 1e3)
        } else {
            None
        };
        let amps = if self.has_current {
            Some(self.value("curr")? / 1e3)
        } else {
            None
        };
        let joules = if self.has_energy {
            Some(self.value("energy")? / 1e6)
        } else {
            None
        };
        let power = match self.source {
            Source::Power => Some(self.value("power")? / 1e6),
            Source::VoltageCurrent => volts.zip(amps).map(|(v, a)| v * a),
            Source::Energy => joules.and_then(|j| self.rate.watts(j, None, now)),
        };
        Ok(Reading {
            power_watts: power,
            voltage_volts: volts,
            current_amperes: amps,
            temperature_celsius: None,
            energy: joules.map(|j| DeviceEnergy {
                joules: j,
                epoch: 0,
                wraps_at_joules: None,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Meter;

    fn chip(root: &Path, dir: &str, files: &[(&str, &str)]) {
        let d = root.join("class/hwmon").join(dir);
        fs::create_dir_all(&d).unwrap();
        for (f, v) in files {
            fs::write(d.join(f), v).unwrap();
        }
    }

    fn fixture() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        // INA219: bus voltage in1, shunt in0, curr1, power1.
        chip(
            r,
            "hwmon0",
            &[
                ("name", "ina219\n"),
                ("in0_input", "12\n"),
                ("in1_input", "5104\n"),
                ("curr1_input", "612\n"),
                ("power1_input", "3120000\n"),
            ],
        );
        // INA3221: three channels without power files; in4-6 are shunt voltages.
        chip(
            r,
            "hwmon1",
            &[
                ("name", "ina3221\n"),
                ("in1_input", "5000\n"),
                ("in2_input", "12000\n"),
                ("in3_input", "3300\n"),
                ("in4_input", "10\n"),
                ("curr1_input", "1000\n"),
                ("curr2_input", "250\n"),
                ("curr3_input", "0\n"),
            ],
        );
        // A CPU temperature chip: no power, ignored by auto.
        chip(
            r,
            "hwmon2",
            &[("name", "cpu_thermal\n"), ("temp1_input", "45000\n")],
        );
        // Energy only.
        chip(
            r,
            "hwmon10",
            &[("name", "energy_only\n"), ("energy1_input", "5000000\n")],
        );
        t
    }

    fn paths(root: &Path) -> Paths {
        Paths {
            sysfs: root.to_path_buf(),
            ..Paths::default()
        }
    }

    #[test]
    fn auto_finds_power_then_voltage_current_then_energy_channels() {
        let t = fixture();
        let mut chans = build(&paths(t.path()), "auto").unwrap();
        let names: Vec<_> = chans.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "hwmon0-ina219-power1",
                "hwmon1-ina3221-in1",
                "hwmon1-ina3221-in2",
                "hwmon1-ina3221-in3",
                "hwmon10-energy_only-energy1"
            ]
        );
        let r = chans[0].1.read().unwrap();
        assert_eq!(r.power_watts, Some(3.12));
        assert_eq!(r.voltage_volts, Some(5.104));
        assert_eq!(r.current_amperes, Some(0.612));
        let r = chans[2].1.read().unwrap();
        assert_eq!(r.power_watts, Some(12.0 * 0.25));
        // Energy-only: no power on the first read, a device counter every time.
        let r = chans[4].1.read().unwrap();
        assert_eq!(r.power_watts, None);
        assert_eq!(r.energy.unwrap().joules, 5.0);
    }

    #[test]
    fn target_selects_by_directory_or_chip_name() {
        let t = fixture();
        assert_eq!(build(&paths(t.path()), "hwmon1").unwrap().len(), 3);
        assert_eq!(build(&paths(t.path()), "ina219").unwrap().len(), 1);
        let err = build(&paths(t.path()), "cpu_thermal").unwrap_err();
        assert!(err.contains("no hwmon chip"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        assert!(build(&paths(empty.path()), "auto").is_err());
    }

    /// A Jetson Orin Nano on L4T R35/R36: the mainline `ina3221` driver at I2C 1-0040 labels
    /// its bus-voltage channels with the rails of the device tree (NVIDIA Jetson Linux R35.6
    /// developer guide, "Jetson Orin Nano Series, Jetson Orin NX Series and Jetson AGX Orin
    /// Series", power monitor; jetson-stats `jtop/core/power.py`). `in4`-`in6` are shunt
    /// voltages, `in7` the shunt sum and `curr4` the current sum: not rails.
    fn orin_nano(root: &Path) {
        let mut files = vec![("name", "ina3221\n".to_string())];
        for (k, label, mv, ma) in [
            (1, "VDD_IN", 5056, 944),
            (2, "VDD_CPU_GPU_CV", 5064, 120),
            (3, "VDD_SOC", 5064, 288),
        ] {
            files.push((
                ["in1_label", "in2_label", "in3_label"][k - 1],
                format!("{label}\n"),
            ));
            files.push((
                ["in1_input", "in2_input", "in3_input"][k - 1],
                format!("{mv}\n"),
            ));
            files.push((
                ["curr1_input", "curr2_input", "curr3_input"][k - 1],
                format!("{ma}\n"),
            ));
        }
        files.push(("in4_input", "7\n".into()));
        files.push(("in7_input", "20\n".into()));
        files.push(("in7_label", "sum of shunt voltages\n".into()));
        files.push(("curr4_input", "1352\n".into()));
        let files: Vec<(&str, &str)> = files.iter().map(|(f, v)| (*f, v.as_str())).collect();
        chip(root, "hwmon1", &files);
    }

    #[test]
    fn labelled_channels_are_named_by_their_label_and_selectable_by_it() {
        let t = fixture();
        orin_nano(t.path());
        let names: Vec<String> = build(&paths(t.path()), "auto")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "hwmon0-ina219-power1",
                "VDD_IN",
                "VDD_CPU_GPU_CV",
                "VDD_SOC",
                "hwmon10-energy_only-energy1"
            ]
        );
        let mut chans = build(&paths(t.path()), "VDD_IN").unwrap();
        assert_eq!(chans.len(), 1);
        let r = chans[0].1.read().unwrap();
        assert_eq!(r.voltage_volts, Some(5.056));
        assert_eq!(r.current_amperes, Some(0.944));
        assert_eq!(r.power_watts, Some(5.056 * 0.944));
        let err = build(&paths(t.path()), "VDD_GPU").unwrap_err();
        assert!(err.contains("channel label \"VDD_GPU\""), "{err}");
    }

    #[test]
    fn unconnected_and_repeated_labels() {
        let t = fixture();
        orin_nano(t.path());
        // AGX Orin labels unused inputs NC; a second chip with the same labels is prefixed.
        chip(t.path(), "hwmon1", &[("in3_label", "NC\n")]);
        orin_nano(&t.path().join("dup"));
        fs::rename(
            t.path().join("dup/class/hwmon/hwmon1"),
            t.path().join("class/hwmon/hwmon4"),
        )
        .unwrap();
        let names: Vec<String> = build(&paths(t.path()), "auto")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "hwmon0-ina219-power1",
                "hwmon1-VDD_IN",
                "hwmon1-VDD_CPU_GPU_CV",
                "hwmon4-VDD_IN",
                "hwmon4-VDD_CPU_GPU_CV",
                "VDD_SOC",
                "hwmon10-energy_only-energy1"
            ]
        );
    }

    #[test]
    fn vanished_and_garbled_files_are_read_errors() {
        let t = fixture();
        let mut chans = build(&paths(t.path()), "ina219").unwrap();
        let dir = t.path().join("class/hwmon/hwmon0");
        fs::write(dir.join("power1_input"), "n/a\n").unwrap();
        assert_eq!(chans[0].1.read().unwrap_err().reason, Reason::BadResponse);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(chans[0].1.read().unwrap_err().reason, Reason::Unplugged);
    }
}
