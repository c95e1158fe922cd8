//! Run with `cargo bench -p greenpipe-exporter --bench meter_tick`.
//!
//! What reading meters costs per tick: wall time of one `collect_once` with only the meter
//! collector, and the CPU time of the whole process (sampler, reader threads, and here also the
//! emulated devices) per tick. Three set-ups: four hwmon channels from a fixture tree, a UM25C
//! on a pty (the real serial path), and a Shelly plug on loopback HTTP. Prints figures; asserts
//! nothing about time.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use greenpipe_exporter::config::Config;
use greenpipe_exporter::meter::um_emulator::Emulator;
use greenpipe_exporter::meter::usb_um::{Frame, Model};
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;
use greenpipe_exporter::selfstat;

const TICKS: usize = 300;
/// Ticks are spaced like a real (but faster) schedule so reader threads park between them.
const SPACING: Duration = Duration::from_millis(20);

fn sampler(paths: Paths, meter: String) -> Sampler {
    let mut c = Config::for_paths(paths, "bench");
    c.collectors = vec!["meter"];
    c.interval = Duration::from_secs(1);
    c.meter.specs = vec![meter.parse().unwrap()];
    Sampler::new(c).unwrap()
}

fn run(name: &str, mut s: Sampler) {
    s.collect_once();
    let mut walls = Vec::with_capacity(TICKS);
    let cpu0 = selfstat::cpu_seconds();
    for _ in 0..TICKS {
        let t = Instant::now();
        let set = s.collect_once();
        walls.push(t.elapsed());
        assert!(!set.is_empty());
        std::thread::sleep(SPACING);
    }
    let cpu = selfstat::cpu_seconds() - cpu0;
    walls.sort();
    let mean = walls.iter().sum::<Duration>() / TICKS as u32;
    println!(
        "{name:<28} wall/tick mean {:>8.1} µs  p50 {:>8.1} µs  p99 {:>8.1} µs  max {:>8.1} µs  process CPU/tick {:>7.1} µs",
        mean.as_secs_f64() * 1e6,
        walls[TICKS / 2].as_secs_f64() * 1e6,
        walls[TICKS * 99 / 100].as_secs_f64() * 1e6,
        walls[TICKS - 1].as_secs_f64() * 1e6,
        cpu / TICKS as f64 * 1e6,
    );
}

fn hwmon_fixture(root: &Path) {
    let d = root.join("class/hwmon/hwmon0");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("name"), "ina219\n").unwrap();
    std::fs::write(d.join("in1_input"), "5100\n").unwrap();
    std::fs::write(d.join("curr1_input"), "700\n").unwrap();
    std::fs::write(d.join("power1_input"), "3570000\n").unwrap();
    let d = root.join("class/hwmon/hwmon1");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("name"), "ina3221\n").unwrap();
    for k in 1..=3 {
        std::fs::write(d.join(format!("in{k}_input")), "5000\n").unwrap();
        std::fs::write(d.join(format!("curr{k}_input")), "500\n").unwrap();
    }
}

fn shelly() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let body =
            r#"{"id":0,"apower":8.9,"voltage":237.5,"current":0.068,"aenergy":{"total":6.532}}"#;
        for conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let mut conn = conn;
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("shelly:http://{addr}")
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    hwmon_fixture(dir.path());
    let paths = Paths {
        sysfs: dir.path().to_path_buf(),
        ..Paths::default()
    };
    run(
        "hwmon:auto (4 channels)",
        sampler(paths, "hwmon:auto".into()),
    );

    let link = dir.path().join("rfcomm0");
    let mut f = Frame::zero(Model::Um25c);
    f.voltage_volts = 5.1;
    f.power_watts = 3.5;
    let _emu = Emulator::start(&link, f).unwrap();
    run(
        "um25c on a pty",
        sampler(Paths::default(), format!("um25c:{}", link.display())),
    );

    run(
        "shelly on loopback HTTP",
        sampler(Paths::default(), shelly()),
    );
}
