//! hwmon and powercap fixture trees read through `--path.sysfs` by the real sampler, including a
//! RAPL counter that wraps and an INA chip that disappears and comes back.

use std::fs;
use std::path::Path;
use std::time::Duration;

use greenpipe_common::names::{exporter, label, meter as names};
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

use crate::support::value;

/// Generous timeouts: these tests must not fail because a loaded CI machine was slow; faults
/// are scripted, never inferred from slowness.
const INTERVAL: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_millis(800);
/// Pause between ticks while waiting for a state (ticks may come faster than the interval).
const POLL: Duration = Duration::from_millis(100);

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn sampler(sysfs: &Path, meters: &[&str]) -> Sampler {
    let paths = Paths {
        sysfs: sysfs.to_path_buf(),
        ..Paths::default()
    };
    let meters: Vec<String> = meters.iter().map(|m| m.to_string()).collect();
    crate::support::sampler(paths, &meters, INTERVAL, TIMEOUT)
}

#[test]
fn ina_chips_on_hwmon() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(r, "class/hwmon/hwmon0/name", "ina226\n");
    write(r, "class/hwmon/hwmon0/in1_input", "5080\n");
    write(r, "class/hwmon/hwmon0/curr1_input", "1250\n");
    write(r, "class/hwmon/hwmon0/power1_input", "6350000\n");
    write(r, "class/hwmon/hwmon3/name", "ina3221\n");
    for (k, mv, ma) in [(1, 12000, 500), (2, 5000, 2000), (3, 3300, 100)] {
        write(
            r,
            &format!("class/hwmon/hwmon3/in{k}_input"),
            &format!("{mv}\n"),
        );
        write(
            r,
            &format!("class/hwmon/hwmon3/curr{k}_input"),
            &format!("{ma}\n"),
        );
    }
    let mut s = sampler(r, &["hwmon:auto"]);
    let set = s.collect_once();
    assert_eq!(
        value(&set, names::POWER_WATTS, "hwmon0-ina226-power1"),
        Some(6.35)
    );
    assert_eq!(
        value(&set, names::VOLTAGE_VOLTS, "hwmon0-ina226-power1"),
        Some(5.08)
    );
    assert_eq!(
        value(&set, names::CURRENT_AMPERES, "hwmon0-ina226-power1"),
        Some(1.25)
    );
    // Power only, no energy file: the total is integrated by the exporter.
    assert_eq!(
        value(&set, names::ENERGY_INTEGRATED, "hwmon0-ina226-power1"),
        Some(1.0)
    );
    assert_eq!(
        value(&set, names::POWER_WATTS, "hwmon3-ina3221-in1"),
        Some(6.0)
    );
    assert_eq!(
        value(&set, names::POWER_WATTS, "hwmon3-ina3221-in2"),
        Some(10.0)
    );
    assert_eq!(value(&set, names::UP, "hwmon3-ina3221-in3"), Some(1.0));
    let text = String::from_utf8(set.encode_text("pi-1")).unwrap();
    assert!(text.contains("kind=\"hwmon\""), "{text}");

    // Power integrated by the exporter between ticks: grows, never negative.
    std::thread::sleep(POLL);
    let set = s.collect_once();
    let e1 = value(&set, names::ENERGY_JOULES_TOTAL, "hwmon0-ina226-power1").unwrap();
    assert!(e1 > 0.0, "{e1}");

    // The driver unbinds (I2C fault): that channel goes down, the others stay up.
    fs::remove_file(r.join("class/hwmon/hwmon0/power1_input")).unwrap();
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "hwmon0-ina226-power1"), Some(0.0));
    assert_eq!(
        value(&set, names::POWER_WATTS, "hwmon0-ina226-power1"),
        None
    );
    assert_eq!(value(&set, names::UP, "hwmon3-ina3221-in1"), Some(1.0));
    assert_eq!(
        value(&set, names::ENERGY_JOULES_TOTAL, "hwmon0-ina226-power1"),
        Some(e1)
    );
    write(r, "class/hwmon/hwmon0/power1_input", "6350000\n");
    let mut back = None;
    for _ in 0..100 {
        std::thread::sleep(POLL);
        let set = s.collect_once();
        if value(&set, names::UP, "hwmon0-ina226-power1") == Some(1.0) {
            back = Some(set);
            break;
        }
    }
    let set = back.expect("channel comes back after the file reappears");
    assert_eq!(
        value(&set, names::POWER_WATTS, "hwmon0-ina226-power1"),
        Some(6.35)
    );
}

#[test]
fn rapl_counters_wrap_without_going_backwards() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let zone = "class/powercap/intel-rapl:0";
    write(r, &format!("{zone}/name"), "package-0\n");
    write(r, &format!("{zone}/max_energy_range_uj"), "262143328850\n");
    write(r, &format!("{zone}/energy_uj"), "262143000000\n");
    let mut s = sampler(r, &["rapl:auto"]);
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "package-0"), Some(1.0));
    // The device's own counter.
    assert_eq!(
        value(&set, names::ENERGY_INTEGRATED, "package-0"),
        Some(0.0)
    );
    assert_eq!(
        value(&set, names::ENERGY_JOULES_TOTAL, "package-0"),
        Some(0.0)
    );
    assert_eq!(
        value(&set, names::POWER_WATTS, "package-0"),
        None,
        "no rate yet"
    );

    // 0.32885 J to the wrap point, 9.67115 J after it: 10 J in all.
    write(r, &format!("{zone}/energy_uj"), "9671150\n");
    std::thread::sleep(POLL);
    let set = s.collect_once();
    let e = value(&set, names::ENERGY_JOULES_TOTAL, "package-0").unwrap();
    assert!((e - 10.0).abs() < 1e-6, "{e}");
    assert!(value(&set, names::POWER_WATTS, "package-0").unwrap() > 0.0);

    write(r, &format!("{zone}/energy_uj"), "19671150\n");
    let set = s.collect_once();
    let e = value(&set, names::ENERGY_JOULES_TOTAL, "package-0").unwrap();
    assert!((e - 20.0).abs() < 1e-6, "{e}");
}

#[test]
fn auto_on_a_host_without_meters_is_unavailable_not_fatal() {
    let t = tempfile::tempdir().unwrap();
    let mut s = sampler(t.path(), &["hwmon:auto", "rapl:auto"]);
    let set = s.collect_once();
    let avail = set.family(exporter::COLLECTOR_AVAILABLE).unwrap();
    let meter = avail
        .series
        .iter()
        .find(|x| x.labels.contains(&(label::COLLECTOR, "meter".to_string())))
        .unwrap();
    assert_eq!(meter.value, 0.0);
    let reason = &meter
        .labels
        .iter()
        .find(|(k, _)| *k == label::REASON)
        .unwrap()
        .1;
    assert!(
        reason.contains("hwmon:auto") && reason.contains("rapl:auto"),
        "{reason}"
    );
    assert!(set.family(names::UP).is_none());
}

#[test]
fn meters_subcommand_lists_what_is_found_and_why_not() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(r, "class/hwmon/hwmon0/name", "ina260\n");
    write(r, "class/hwmon/hwmon0/power1_input", "2500000\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_greenpipe-exporter"))
        .args(["--node-name", "n", "meters", "--path.sysfs"])
        .arg(r)
        .args(["--meter", "hwmon:ina260", "--meter", "rapl:auto"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("hwmon    found: --meter hwmon:auto  (hwmon0-ina260-power1)"),
        "{text}"
    );
    assert!(text.contains("rapl     unavailable:"), "{text}");
    assert!(text.contains("um25c    unavailable:"), "{text}");
    assert!(
        text.contains("shelly   unavailable: network plugs are not discovered"),
        "{text}"
    );
    assert!(
        text.contains("hwmon:ina260: meter=\"hwmon0-ina260-power1\" reads 2.5 W"),
        "{text}"
    );
    assert!(text.contains("rapl:auto: unavailable:"), "{text}");
}

/// A Jetson Xavier NX on L4T R32: NVIDIA's `ina3221x` IIO driver at I2C 7-0040 (paths and rail
/// names as jetson-stats' `jtop/core/power.py` reads them; values in mW, mV, mA). Each rail is a
/// channel named by its rail; a rail whose chip goes away reports `up 0` and counts `unplugged`.
#[test]
fn jetson_rails_of_the_legacy_ina3221x_driver() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let d = "bus/i2c/drivers/ina3221x/7-0040/iio:device0";
    for (k, rail, mw, mv, ma) in [
        (0, "VDD_IN", 4582, 5032, 912),
        (1, "VDD_CPU_GPU_CV", 612, 5024, 122),
        (2, "VDD_SOC", 1224, 5024, 244),
    ] {
        write(r, &format!("{d}/rail_name_{k}"), &format!("{rail}\n"));
        write(r, &format!("{d}/in_power{k}_input"), &format!("{mw}\n"));
        write(r, &format!("{d}/in_voltage{k}_input"), &format!("{mv}\n"));
        write(r, &format!("{d}/in_current{k}_input"), &format!("{ma}\n"));
    }
    let mut s = sampler(r, &["ina3221x:auto"]);
    let set = s.collect_once();
    assert_eq!(value(&set, names::POWER_WATTS, "VDD_IN"), Some(4.582));
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, "VDD_IN"), Some(5.032));
    assert_eq!(value(&set, names::CURRENT_AMPERES, "VDD_SOC"), Some(0.244));
    let text = String::from_utf8(set.encode_text("nx-1")).unwrap();
    assert!(text.contains("kind=\"ina3221x\""), "{text}");

    write(r, &format!("{d}/in_power0_input"), "garbage\n");
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "VDD_IN"), Some(0.0));
    assert_eq!(
        crate::support::errors(
            &set,
            "VDD_IN",
            greenpipe_exporter::meter::Reason::BadResponse
        ),
        1.0
    );
    assert_eq!(value(&set, names::UP, "VDD_SOC"), Some(1.0));
}
