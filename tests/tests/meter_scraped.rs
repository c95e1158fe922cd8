//! A UM25C emulated on a pty, read by the exporter binary, scraped by a real Prometheus: the
//! values arrive exactly; unplugging takes `up` to 0 and the power series away (stale, not
//! frozen); replugging brings both back with the energy counter intact. The served text passes
//! `promtool check metrics`.

use std::time::Duration;

use greenpipe_exporter::meter::um_emulator::Emulator;
use greenpipe_exporter::meter::usb_um::{DataGroup, Frame, Model};
use greenpipe_tests::scrape::promtool_check;
use greenpipe_tests::{free_port, spawn_exporter, wait_for, Prometheus};

const SERIES: &str = "{node=\"e2e-meter\",meter=\"rfcomm0\",kind=\"um25c\"}";

fn frame(mwh: u32) -> Frame {
    let mut f = Frame::zero(Model::Um25c);
    f.voltage_volts = 5.087;
    f.current_amperes = 0.6121;
    f.power_watts = 3.113;
    f.temperature_celsius = 29.0;
    f.groups[0] = DataGroup {
        milliamp_hours: 10,
        milliwatt_hours: mwh,
    };
    f
}

fn scalar(prom: &Prometheus, q: &str) -> Option<f64> {
    prom.query_scalar(q).ok().flatten()
}

#[test]
fn um25c_on_a_pty_reaches_prometheus_and_survives_unplug() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let mut emu = Emulator::start(&link, frame(1000)).expect("pty emulator");
    let port = free_port();
    let _exporter = spawn_exporter(
        "e2e-meter",
        port,
        &[
            "--meter",
            &format!("um25c:{}", link.display()),
            // Generous: a loaded CI machine must not turn into a scripted-looking fault.
            "--meter.timeout",
            "900ms",
        ],
        Some(&dir.path().join("exporter.log")),
    );
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");

    let power = wait_for(Duration::from_secs(30), || {
        scalar(&prom, &format!("greenpipe_meter_power_watts{SERIES}"))
    })
    .expect("meter power reaches Prometheus");
    assert_eq!(power, 3.113);
    assert_eq!(
        scalar(&prom, &format!("greenpipe_meter_voltage_volts{SERIES}")),
        Some(5.087)
    );
    assert_eq!(
        scalar(&prom, &format!("greenpipe_meter_current_amperes{SERIES}")),
        Some(0.6121)
    );

    // The meter counts 50 mWh = 180 J.
    emu.set_frame(frame(1050));
    let energy = wait_for(Duration::from_secs(30), || {
        scalar(
            &prom,
            &format!("greenpipe_meter_energy_joules_total{SERIES}"),
        )
        .filter(|e| *e > 0.0)
    })
    .expect("energy grows");
    assert!((energy - 180.0).abs() < 1e-6, "{energy}");

    let text = reqwest::blocking::get(format!("http://127.0.0.1:{port}/metrics"))
        .unwrap()
        .text()
        .unwrap();
    if let Err(problems) = promtool_check(&text) {
        panic!("promtool check metrics: {problems}");
    }

    emu.unplug();
    wait_for(Duration::from_secs(30), || {
        (scalar(&prom, &format!("greenpipe_meter_up{SERIES}")) == Some(0.0)).then_some(())
    })
    .expect("up goes to 0 when unplugged");
    wait_for(Duration::from_secs(30), || {
        prom.query(&format!("greenpipe_meter_power_watts{SERIES}"))
            .ok()
            .filter(|r| r.is_empty())
    })
    .expect("the power series goes stale instead of freezing");
    assert_eq!(
        scalar(
            &prom,
            &format!("greenpipe_meter_energy_joules_total{SERIES}")
        ),
        Some(energy)
    );
    let failed = prom
        .query("greenpipe_meter_read_errors_total{node=\"e2e-meter\"} > 0")
        .unwrap();
    assert!(
        failed.iter().any(|s| s["metric"]["reason"] == "unplugged"),
        "unplugging counts as unplugged: {failed:?}\n{}",
        std::fs::read_to_string(dir.path().join("exporter.log")).unwrap_or_default()
    );

    emu.replug().unwrap();
    wait_for(Duration::from_secs(60), || {
        (scalar(&prom, &format!("greenpipe_meter_up{SERIES}")) == Some(1.0)).then_some(())
    })
    .expect("up goes back to 1 after replug");
    let after = scalar(
        &prom,
        &format!("greenpipe_meter_energy_joules_total{SERIES}"),
    )
    .unwrap();
    assert!(after >= energy, "{after} < {energy}");
}
