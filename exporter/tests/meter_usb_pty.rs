//! RDTech UM meters emulated on pseudo-terminals, read through the exporter's real serial path
//! (open at 9600 8N1, request byte, bounded reads, decode) and its real sampler.

use std::path::Path;
use std::time::Duration;

use greenpipe_common::names::meter as names;
use greenpipe_exporter::meter::um_emulator::{Answer, Emulator};
use greenpipe_exporter::meter::usb_um::{DataGroup, Frame, Model, UsbUmMeter};
use greenpipe_exporter::meter::{Meter, Reason};
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

use crate::support::{errors, value};

/// Generous timeouts: these tests must not fail because a loaded CI machine was slow; faults
/// are scripted, never inferred from slowness.
const INTERVAL: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_millis(800);
/// Pause between ticks while waiting for a state (ticks may come faster than the interval).
const POLL: Duration = Duration::from_millis(100);

fn sampler(meters: &[String]) -> Sampler {
    crate::support::sampler(Paths::default(), meters, INTERVAL, TIMEOUT)
}

fn tick_until(s: &mut Sampler, what: &str, done: impl Fn(&MetricSet) -> bool) -> MetricSet {
    crate::support::tick_until(s, POLL, what, done)
}

fn um25c_frame() -> Frame {
    let mut f = Frame::zero(Model::Um25c);
    f.voltage_volts = 5.123;
    f.current_amperes = 0.7345;
    f.power_watts = 3.762;
    f.temperature_celsius = 31.0;
    f.temperature_fahrenheit = 88.0;
    f.selected_group = 1;
    f.groups[1] = DataGroup {
        milliamp_hours: 400,
        milliwatt_hours: 2000,
    };
    f
}

fn spec(kind: &str, link: &Path) -> String {
    format!("{kind}:{}", link.display())
}

#[test]
fn um25c_values_arrive_exactly_and_energy_follows_the_device_counter() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let emu = Emulator::start(&link, um25c_frame()).unwrap();
    let mut s = sampler(&[spec("um25c", &link)]);
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "rfcomm0"), Some(1.0));
    assert_eq!(value(&set, names::POWER_WATTS, "rfcomm0"), Some(3.762));
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, "rfcomm0"), Some(5.123));
    assert_eq!(value(&set, names::CURRENT_AMPERES, "rfcomm0"), Some(0.7345));
    assert_eq!(
        value(&set, names::TEMPERATURE_CELSIUS, "rfcomm0"),
        Some(31.0)
    );
    assert_eq!(
        value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0"),
        Some(0.0)
    );
    assert!(value(&set, names::LAST_READING_TIMESTAMP_SECONDS, "rfcomm0").unwrap() > 1.6e9);
    for r in [
        Reason::Unplugged,
        Reason::Timeout,
        Reason::ShortFrame,
        Reason::CorruptFrame,
    ] {
        assert_eq!(errors(&set, "rfcomm0", r), 0.0);
    }
    assert_eq!(emu.requests(), 1, "one request byte per tick");

    emu.update(|f| f.groups[1].milliwatt_hours = 2010);
    let set = s.collect_once();
    let joules = value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0").unwrap();
    assert!((joules - 36.0).abs() < 1e-9, "10 mWh = 36 J, got {joules}");

    // The text the HTTP endpoint serves carries the same values with node, meter and kind.
    let text = String::from_utf8(set.encode_text("pi-1")).unwrap();
    assert!(
        text.contains(
            "greenpipe_meter_power_watts{node=\"pi-1\",meter=\"rfcomm0\",kind=\"um25c\"} 3.762"
        ),
        "{text}"
    );
}

#[test]
fn unplug_and_replug_goes_down_then_up_and_keeps_the_energy() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let mut emu = Emulator::start(&link, um25c_frame()).unwrap();
    let mut s = sampler(&[spec("um25c", &link)]);
    s.collect_once();
    emu.update(|f| f.groups[1].milliwatt_hours = 2010);
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "rfcomm0"), Some(1.0));
    let before = value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0").unwrap();

    emu.unplug();
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, "rfcomm0"), Some(0.0));
    assert_eq!(errors(&set, "rfcomm0", Reason::Unplugged), 1.0);
    assert_eq!(
        value(&set, names::POWER_WATTS, "rfcomm0"),
        None,
        "withdrawn, not frozen"
    );
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, "rfcomm0"), None);
    assert_eq!(
        value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0"),
        Some(before)
    );
    // A few more ticks while unplugged: reopen attempts back off, nothing panics.
    for _ in 0..4 {
        let set = s.collect_once();
        assert_eq!(value(&set, names::UP, "rfcomm0"), Some(0.0));
        assert_eq!(
            value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0"),
            Some(before)
        );
        std::thread::sleep(POLL);
    }

    // The meter kept counting while its link was down.
    emu.update(|f| f.groups[1].milliwatt_hours = 2030);
    emu.replug().unwrap();
    let set = tick_until(&mut s, "up again after replug", |set| {
        value(set, names::UP, "rfcomm0") == Some(1.0)
    });
    assert_eq!(value(&set, names::POWER_WATTS, "rfcomm0"), Some(3.762));
    let after = value(&set, names::ENERGY_JOULES_TOTAL, "rfcomm0").unwrap();
    assert!(
        (after - (before + 72.0)).abs() < 1e-9,
        "{before} + 20 mWh -> {after}"
    );
}

#[test]
fn short_garbage_wrong_model_and_silent_meters_are_errors_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let emu = Emulator::start(&link, um25c_frame()).unwrap();
    let mut s = sampler(&[spec("um25c", &link)]);
    assert_eq!(value(&s.collect_once(), names::UP, "rfcomm0"), Some(1.0));
    let um24c = {
        let mut f = Frame::zero(Model::Um24c);
        f.voltage_volts = 5.0;
        f
    };
    for (answer, reason) in [
        (Answer::Short(60), Reason::ShortFrame),
        (Answer::Garbage, Reason::CorruptFrame),
        (Answer::Other(um24c), Reason::WrongModel),
        (Answer::Silent, Reason::Timeout),
    ] {
        emu.set_answer(answer.clone());
        let set = tick_until(&mut s, &format!("{reason:?} counted"), |set| {
            errors(set, "rfcomm0", reason) >= 1.0
        });
        assert_eq!(value(&set, names::UP, "rfcomm0"), Some(0.0), "{answer:?}");
        assert_eq!(
            value(&set, names::POWER_WATTS, "rfcomm0"),
            None,
            "{answer:?}"
        );
        emu.set_answer(Answer::Frame);
        tick_until(&mut s, "recovered", |set| {
            value(set, names::UP, "rfcomm0") == Some(1.0)
        });
    }
}

#[test]
fn read_errors_say_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("rfcomm0");
    let mut emu = Emulator::start(&link, um25c_frame()).unwrap();
    let timeout = TIMEOUT;
    let mut meter = UsbUmMeter::new(Model::Um25c, link.to_str().unwrap(), timeout);
    assert_eq!(meter.read().unwrap().power_watts, Some(3.762));
    for (answer, reason, says) in [
        (
            Answer::Short(60),
            Reason::ShortFrame,
            "frame has 60 bytes, expected 130",
        ),
        (Answer::Garbage, Reason::CorruptFrame, "unknown model id"),
        (
            Answer::Other(Frame::zero(Model::Um34c)),
            Reason::WrongModel,
            "frame from a Um34c, configured as Um25c",
        ),
        (
            Answer::Silent,
            Reason::Timeout,
            "no answer to the poll request",
        ),
    ] {
        emu.set_answer(answer);
        let err = meter.read().unwrap_err();
        assert_eq!(err.reason, reason, "{err}");
        assert!(err.message.contains(says), "{err}");
        assert!(err.message.contains("rfcomm0"), "names the device: {err}");
    }
    emu.set_answer(Answer::Frame);
    assert!(
        meter.read().is_ok(),
        "recovers once the meter answers properly again"
    );
    emu.unplug();
    let err = meter.read().unwrap_err();
    assert_eq!(err.reason, Reason::Unplugged, "{err}");
    let err = meter.read().unwrap_err();
    assert_eq!(err.reason, Reason::Unplugged, "{err}");
    assert!(err.message.contains("No such file"), "{err}");
}

#[test]
fn um24c_and_um34c_use_their_own_scaling() {
    let dir = tempfile::tempdir().unwrap();
    let mut emus = Vec::new();
    let mut specs = Vec::new();
    for (model, kind) in [(Model::Um24c, "um24c"), (Model::Um34c, "um34c")] {
        let mut f = Frame::zero(model);
        f.voltage_volts = 5.12;
        f.current_amperes = 0.734;
        f.power_watts = 3.758;
        f.temperature_celsius = 25.0;
        let link = dir.path().join(kind);
        emus.push(Emulator::start(&link, f).unwrap());
        specs.push(spec(kind, &link));
    }
    let mut s = sampler(&specs);
    let set = s.collect_once();
    for meter in ["um24c", "um34c"] {
        assert_eq!(value(&set, names::UP, meter), Some(1.0), "{meter}");
        assert_eq!(
            value(&set, names::VOLTAGE_VOLTS, meter),
            Some(5.12),
            "{meter}"
        );
        assert_eq!(
            value(&set, names::CURRENT_AMPERES, meter),
            Some(0.734),
            "{meter}"
        );
        assert_eq!(
            value(&set, names::POWER_WATTS, meter),
            Some(3.758),
            "{meter}"
        );
    }
    // A UM25C frame on a port configured as UM24C is refused, not misread 10x too high.
    emus[0].set_answer(Answer::Other(um25c_frame()));
    let set = tick_until(&mut s, "wrong model", |set| {
        errors(set, "um24c", Reason::WrongModel) >= 1.0
    });
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, "um24c"), None);
    assert_eq!(
        value(&set, names::UP, "um34c"),
        Some(1.0),
        "the other meter is unaffected"
    );
}
