//! Property tests of every exporter parser that reads outside input (/proc, /sys, cgroup files,
//! cgroup paths, smart-plug JSON, hwmon and powercap files): no input panics, well-formed input
//! gives exactly its values, and each malformed line or value is reported (a malformed count or
//! an error), never turned into a silent zero. The `fuzz/` crate runs the same parsers under
//! libFuzzer; crashing inputs it found are kept at the end of this file.

use greenpipe_common::container_id;
use greenpipe_exporter::collector::cgroup::parse as cg;
use greenpipe_exporter::collector::{cpu, diskstats, meminfo, netdev, vmstat};
use greenpipe_exporter::config::Config;
use greenpipe_exporter::meter::{hwmon, rapl, shelly, tasmota, Meter};
use greenpipe_exporter::paths::Paths;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Lines of a procfs-like file: mostly printable, with tabs, colons and digits in abundance.
fn junk_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("([a-z_0-9:=| \t.-]{0,40}\n){0,12}").unwrap()
}

/// A token that does not parse as u64.
fn not_a_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("x".to_string()),
        Just("-1".to_string()),
        Just("1.5".to_string()),
        Just("18446744073709551616".to_string()),
        "[a-z]{1,5}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn nothing_panics_on_arbitrary_text(text in junk_text(), bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        for t in [text.as_str(), lossy.as_str()] {
            let _ = cpu::parse_stat(t);
            let _ = meminfo::parse_meminfo(t);
            let _ = vmstat::parse_vmstat(t);
            let _ = netdev::for_each_interface(t, |_| {});
            for line in t.lines() {
                let _ = diskstats::parse_line(line);
            }
            let _ = cg::cpu_stat_usage_usec(t);
            let _ = cg::single_u64(t);
            let _ = cg::io_stat(t, |_, _| true);
            let _ = cg::blkio_service_bytes(t, |_, _| true);
            let _ = cg::procs(t);
            let _ = container_id::from_cgroup_path(t);
        }
    }

    #[test]
    fn proc_stat_values_and_malformed_lines(modes in proptest::array::uniform8(any::<u64>()), ctxt in any::<u64>(), bad in not_a_number()) {
        let line: Vec<String> = modes.iter().map(u64::to_string).collect();
        let text = format!("cpu  {}\ncpu0 1 2 3 4\nctxt {ctxt}\nprocs_running {bad}\n", line.join(" "));
        let (stat, malformed) = cpu::parse_stat(&text);
        prop_assert_eq!(stat.modes, modes);
        prop_assert!(stat.has_aggregate);
        prop_assert_eq!(stat.context_switches, Some(ctxt));
        prop_assert_eq!(stat.procs_running, None, "a bad value is absent, not 0");
        prop_assert_eq!(malformed, 1);
        let (stat, malformed) = cpu::parse_stat(&format!("cpu 1 2 {bad} 4\n"));
        prop_assert_eq!(malformed, 1);
        prop_assert!(!stat.has_aggregate, "no CPU time exported from a malformed line");
    }

    #[test]
    fn meminfo_values_and_malformed_lines(total in 0u64..1 << 50, free in 0u64..1 << 50, bad in not_a_number()) {
        let text = format!("MemTotal: {total} kB\nMemFree:        {free} kB\nBuffers: {bad} kB\n");
        let (values, malformed) = meminfo::parse_meminfo(&text);
        prop_assert_eq!(values.get("MemTotal"), Some(total * 1024));
        prop_assert_eq!(values.get("MemFree"), Some(free * 1024));
        prop_assert_eq!(values.get("Buffers"), None);
        prop_assert_eq!(malformed, 1);
    }

    #[test]
    fn vmstat_values_and_malformed_lines(v in any::<u64>(), bad in not_a_number()) {
        let text = format!("pgfault {v}\npgmajfault {bad}\nnr_free_pages 5\n");
        let (values, malformed) = vmstat::parse_vmstat(&text);
        let at = |name: &str| values[vmstat::EVENTS.iter().position(|e| *e == name).unwrap()];
        prop_assert_eq!(at("pgfault"), Some(v));
        prop_assert_eq!(at("pgmajfault"), None);
        prop_assert_eq!(malformed, 1);
    }

    #[test]
    fn netdev_values_and_malformed_lines(n in proptest::array::uniform10(any::<u64>()), bad in not_a_number()) {
        let fields: Vec<String> = n.iter().map(u64::to_string).collect();
        let text = format!(
            "Inter-|   Receive\n face |bytes packets\n  eth0:{}\n  eth1: 1 2 {bad} 4 5 6 7 8 9 10\n",
            fields.join(" ")
        );
        let mut seen = Vec::new();
        let malformed = netdev::for_each_interface(&text, |d| seen.push((d.name.to_string(), d.rx_bytes, d.tx_packets)));
        prop_assert_eq!(seen, vec![("eth0".to_string(), n[0], n[9])]);
        prop_assert_eq!(malformed, 1);
    }

    #[test]
    fn diskstats_never_overflows(sectors in proptest::collection::vec(any::<u64>(), 1..6), bad in not_a_number()) {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        let mut text = String::new();
        for (i, s) in sectors.iter().enumerate() {
            std::fs::create_dir_all(sys.join(format!("block/sd{i}/slaves"))).unwrap();
            text.push_str(&format!("8 {i} sd{i} 1 0 {s} 0 1 0 {s} 0 0 0 0\n"));
        }
        text.push_str(&format!("8 99 sdz 1 0 {bad} 0 1 0 1 0 0 0 0\n"));
        let config = Config::for_paths(Paths { procfs: dir.path().into(), sysfs: sys, cgroupfs: dir.path().into(), rootfs: dir.path().into() }, "n");
        let mut filter = diskstats::DiskFilter::new(&config.context());
        let (totals, malformed) = diskstats::whole_disk_totals(&text, &mut filter);
        prop_assert_eq!(malformed, 1);
        prop_assert_eq!(totals.devices.len(), sectors.len());
        let exact = sectors.iter().try_fold(0u64, |a, s| a.checked_add(s.checked_mul(512)?));
        if let Some(bytes) = exact {
            prop_assert_eq!(totals.read_bytes, bytes);
        } else {
            prop_assert_eq!(totals.read_bytes, u64::MAX, "saturates, does not wrap");
        }
    }

    #[test]
    fn cgroup_io_never_overflows_and_counts_bad_lines(r in proptest::collection::vec(any::<u64>(), 1..5), bad in not_a_number()) {
        let mut text = String::new();
        let mut v1 = String::new();
        for (i, v) in r.iter().enumerate() {
            text.push_str(&format!("8:{i} rbytes={v} wbytes=1 rios=1 wios=1\n"));
            v1.push_str(&format!("8:{i} Read {v}\n8:{i} Write 1\n"));
        }
        text.push_str(&format!("8:9 rbytes={bad} wbytes=1\n"));
        v1.push_str(&format!("8:9 Read {bad}\nTotal 5\n"));
        let sum = r.iter().fold(0u64, |a, v| a.saturating_add(*v));
        let (io, malformed) = cg::io_stat(&text, |_, _| true);
        prop_assert_eq!((io.read, io.write, malformed), (sum, r.len() as u64, 1));
        let (io, malformed) = cg::blkio_service_bytes(&v1, |_, _| true);
        prop_assert_eq!((io.read, io.write, malformed), (sum, r.len() as u64, 1));
    }

    #[test]
    fn cgroup_single_values(v in any::<u64>(), bad in not_a_number()) {
        prop_assert_eq!(cg::single_u64(&format!("{v}\n")), Some(v));
        prop_assert_eq!(cg::single_u64(&bad), None);
        prop_assert_eq!(cg::cpu_stat_usage_usec(&format!("usage_usec {v}\nuser_usec 1\n")), Some(v));
        prop_assert_eq!(cg::cpu_stat_usage_usec(&format!("usage_usec {bad}\n")), None);
        let (count, first, malformed) = cg::procs(&format!("{}\n{bad}\n7\n", v as u32));
        prop_assert_eq!((count, first, malformed), (2, Some(v as u32), 1));
    }

    #[test]
    fn container_ids_come_only_from_container_segments(id in "[0-9a-f]{64}", uid in "[0-9a-f]{8}_[0-9a-f]{4}", prefix in "[a-z/._-]{0,30}") {
        let path = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{id}.scope");
        let got = container_id::from_cgroup_path(&path).expect("a container");
        prop_assert_eq!(&got.container_id, &id);
        // Whatever else is in a path, an id it returns is 64 hex digits found in the path.
        if let Some(c) = container_id::from_cgroup_path(&format!("{prefix}/{}", &id[..63])) {
            prop_assert!(c.container_id.len() == 64 && prefix.contains(&c.container_id));
        }
    }

    #[test]
    fn smart_plug_bodies_are_numbers_or_errors(doc in json_value(), power in -1e6f64..1e6, total in 0f64..1e9) {
        for r in [shelly::parse(&doc, "http://p"), tasmota::parse(&doc, "http://p")].into_iter().flatten() {
            prop_assert!(r.power_watts.is_some_and(f64::is_finite));
            prop_assert!(r.energy.is_some_and(|e| e.joules.is_finite()));
        }
        let good = serde_json::json!({"apower": power, "aenergy": {"total": total}, "voltage": 230.1});
        let r = shelly::parse(&good, "http://p").unwrap();
        prop_assert_eq!(r.power_watts, Some(power));
        prop_assert_eq!(r.energy.unwrap().joules, total * 3600.0);
        let missing = serde_json::json!({"apower": "12", "aenergy": {"total": total}});
        prop_assert!(shelly::parse(&missing, "http://p").is_err(), "a string is not silently 0 W");
        let good = serde_json::json!({"StatusSNS": {"ENERGY": {"Power": [power, 1.0], "Total": total}}});
        let r = tasmota::parse(&good, "http://p").unwrap();
        prop_assert_eq!(r.power_watts, Some(power + 1.0));
        let bad = serde_json::json!({"StatusSNS": {"ENERGY": {"Power": [power, null], "Total": total}}});
        prop_assert!(tasmota::parse(&bad, "http://p").is_err());
    }

    #[test]
    fn hwmon_and_powercap_files_are_integers_or_errors(text in "[ 0-9a-z+-]{0,24}\n?") {
        let dir = tempfile::tempdir().unwrap();
        let chip = dir.path().join("sys/class/hwmon/hwmon0");
        std::fs::create_dir_all(&chip).unwrap();
        std::fs::write(chip.join("name"), "ina219\n").unwrap();
        std::fs::write(chip.join("power1_input"), &text).unwrap();
        let zone = dir.path().join("sys/class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), "package-0\n").unwrap();
        std::fs::write(zone.join("energy_uj"), &text).unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
        let paths = Paths { procfs: dir.path().join("proc"), sysfs: dir.path().join("sys"), cgroupfs: dir.path().into(), rootfs: dir.path().into() };
        let trimmed = text.trim();
        let mut meters = hwmon::build(&paths, "auto").unwrap();
        prop_assert_eq!(meters.len(), 1);
        match (meters[0].1.read(), trimmed.parse::<i64>()) {
            (Ok(r), Ok(micro)) => prop_assert_eq!(r.power_watts, Some(micro as f64 / 1e6)),
            (Err(_), Err(_)) => {}
            (got, want) => prop_assert!(false, "hwmon {:?}: {:?} vs {:?}", text, got, want),
        }
        if let Ok(mut zones) = rapl::build(&paths, "auto") {
            let got = zones[0].1.read();
            match trimmed.parse::<u64>() {
                Ok(micro) => prop_assert_eq!(got.unwrap().energy.unwrap().joules, micro as f64 / 1e6),
                Err(_) => prop_assert!(got.is_err(), "rapl {:?}: {:?}", text, got),
            }
        }
    }

    #[test]
    fn toml_config_refuses_unknown_keys(key in "[a-z_]{1,12}", value in 0u32..100) {
        let known = ["node_name", "collection_interval", "meter_timeout"];
        let text = format!("{key} = \"{value}\"\n");
        let parsed = toml::from_str::<greenpipe_exporter::config::FileConfig>(&text);
        if known.contains(&key.as_str()) {
            prop_assert!(parsed.is_ok(), "{key}: {parsed:?}");
        } else if !is_section(&key) {
            let e = parsed.unwrap_err().to_string();
            prop_assert!(e.contains(&key), "{key}: {e}");
        }
        let _ = toml::from_str::<greenpipe_exporter::config::FileConfig>(&key);
    }
}

fn is_section(key: &str) -> bool {
    [
        "web",
        "paths",
        "process",
        "netdev",
        "diskstats",
        "ebpf",
        "meters",
        "meter",
        "perf",
        "cgroup",
    ]
    .contains(&key)
}

/// Arbitrary JSON documents, shaped like the plugs' answers often enough to reach deep fields.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z0-9.]{0,6}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        let key = prop_oneof![
            Just("apower".to_string()),
            Just("aenergy".to_string()),
            Just("total".to_string()),
            Just("StatusSNS".to_string()),
            Just("ENERGY".to_string()),
            Just("Power".to_string()),
            Just("Total".to_string()),
            "[a-z]{1,4}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(key, inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Regression inputs: each crashed a parser before its fix (found by this file and `fuzz/`).
#[test]
fn regressions_found_by_fuzzing() {
    // io.stat / blkio sums overflowed (a debug-build panic, a wrapped total in release).
    let text = "8:0 rbytes=18446744073709551615 wbytes=1\n8:1 rbytes=1 wbytes=1\n";
    assert_eq!(cg::io_stat(text, |_, _| true).0.read, u64::MAX);
    let text = "8:0 Read 18446744073709551615\n8:1 Read 1\n";
    assert_eq!(cg::blkio_service_bytes(text, |_, _| true).0.read, u64::MAX);
}
