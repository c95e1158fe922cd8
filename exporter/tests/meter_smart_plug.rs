//! Shelly Gen2+ and Tasmota plugs emulated by a loopback HTTP server that answers with the
//! documented response bodies, read through the exporter's real HTTP client and sampler.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenpipe_common::names::meter as names;
use greenpipe_exporter::meter::shelly::ShellyMeter;
use greenpipe_exporter::meter::tasmota::TasmotaMeter;
use greenpipe_exporter::meter::{Meter, Reason};
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

/// Shelly Gen2 API docs, `Switch.GetStatus` example response.
const SHELLY_BODY: &str = r#"{"id":0,"source":"init","output":true,"apower":8.9,"voltage":237.5,"current":0.068,"pf":0.54,"freq":50.0,"aenergy":{"total":6.532,"by_minute":[45.199,47.141,88.397],"minute_ts":1654511972},"temperature":{"tC":23.5,"tF":74.4}}"#;

/// Tasmota docs, `Status 8` on a plug with power monitoring.
const TASMOTA_BODY: &str = r#"{"StatusSNS":{"Time":"2024-05-01T12:00:00","ENERGY":{"TotalStartTime":"2024-01-01T00:00:00","Total":12.345,"Yesterday":0.321,"Today":0.123,"Power":45,"ApparentPower":50,"ReactivePower":21,"Factor":0.90,"Voltage":231,"Current":0.195}}}"#;

#[derive(Clone)]
enum Reply {
    Status(u16, String),
    /// Accept the connection and never answer.
    Hang,
}

struct Plug {
    addr: String,
    reply: Arc<Mutex<Reply>>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Plug {
    fn start(body: &str) -> Plug {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let reply = Arc::new(Mutex::new(Reply::Status(200, body.to_string())));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (r, p) = (reply.clone(), paths.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (r, p) = (r.clone(), p.clone());
                std::thread::spawn(move || answer(conn, &r, &p));
            }
        });
        Plug { addr, reply, paths }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn set(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    fn set_body(&self, body: &str) {
        self.set(Reply::Status(200, body.to_string()));
    }
}

fn answer(conn: TcpStream, reply: &Mutex<Reply>, paths: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {}
        }
    }
    if let Some(path) = first.split_whitespace().nth(1) {
        paths.lock().unwrap().push(path.to_string());
    }
    let reply = reply.lock().unwrap().clone();
    let mut conn = conn;
    match reply {
        Reply::Status(code, body) => {
            let _ = write!(
                conn,
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Reply::Hang => std::thread::sleep(Duration::from_secs(5)),
    }
}

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

/// Checks the fault handling both plug kinds share: HTTP 500, a body that is no JSON, and a
/// plug that accepts and hangs each take the meter down with their own reason and withdraw
/// its power; the energy total never goes down; it comes back up by itself.
fn faults(plug: &Plug, s: &mut Sampler, meter: &str, good_body: &str) {
    let energy = |set: &MetricSet| value(set, names::ENERGY_JOULES_TOTAL, meter).unwrap();
    let mut last = energy(&s.collect_once());
    for (reply, reason) in [
        (
            Reply::Status(500, "internal error".into()),
            Reason::HttpStatus,
        ),
        (
            Reply::Status(200, "<html>not json".into()),
            Reason::BadResponse,
        ),
        (
            Reply::Status(200, "{\"unrelated\":1}".into()),
            Reason::BadResponse,
        ),
        (Reply::Hang, Reason::Timeout),
    ] {
        plug.set(reply);
        let set = tick_until(s, &format!("{reason:?} counted"), |set| {
            errors(set, meter, reason) >= 1.0
        });
        assert_eq!(value(&set, names::UP, meter), Some(0.0), "{reason:?}");
        assert_eq!(value(&set, names::POWER_WATTS, meter), None, "{reason:?}");
        assert!(energy(&set) >= last);
        last = energy(&set);
        plug.set_body(good_body);
        let set = tick_until(s, "up again", |set| {
            value(set, names::UP, meter) == Some(1.0)
        });
        assert!(energy(&set) >= last);
        last = energy(&set);
    }
}

#[test]
fn shelly_documented_status_reboot_and_faults() {
    let plug = Plug::start(SHELLY_BODY);
    let mut s = sampler(&[format!("shelly:{}", plug.url())]);
    let meter = plug.addr.clone();
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, &meter), Some(1.0));
    assert_eq!(value(&set, names::POWER_WATTS, &meter), Some(8.9));
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, &meter), Some(237.5));
    assert_eq!(value(&set, names::CURRENT_AMPERES, &meter), Some(0.068));
    assert_eq!(value(&set, names::TEMPERATURE_CELSIUS, &meter), Some(23.5));
    assert_eq!(plug.paths.lock().unwrap()[0], "/rpc/Switch.GetStatus?id=0");

    plug.set_body(&SHELLY_BODY.replace("6.532", "6.542"));
    let set = s.collect_once();
    let e1 = value(&set, names::ENERGY_JOULES_TOTAL, &meter).unwrap();
    assert!((e1 - 36.0).abs() < 1e-6, "10 mWh = 36 J, got {e1}");
    // A reboot restarts aenergy.total from zero: the total goes on from where it was.
    plug.set_body(&SHELLY_BODY.replace("6.532", "0.001"));
    let set = s.collect_once();
    let e2 = value(&set, names::ENERGY_JOULES_TOTAL, &meter).unwrap();
    assert!((e2 - (e1 + 3.6)).abs() < 1e-6, "{e1} then {e2}");

    plug.set_body(SHELLY_BODY);
    faults(&plug, &mut s, &meter, SHELLY_BODY);
}

#[test]
fn tasmota_documented_status_and_faults() {
    let plug = Plug::start(TASMOTA_BODY);
    let mut s = sampler(&[format!("tasmota:{}", plug.url())]);
    let meter = plug.addr.clone();
    let set = s.collect_once();
    assert_eq!(value(&set, names::UP, &meter), Some(1.0));
    assert_eq!(value(&set, names::POWER_WATTS, &meter), Some(45.0));
    assert_eq!(value(&set, names::VOLTAGE_VOLTS, &meter), Some(231.0));
    assert_eq!(value(&set, names::CURRENT_AMPERES, &meter), Some(0.195));
    assert_eq!(plug.paths.lock().unwrap()[0], "/cm?cmnd=Status%208");

    plug.set_body(&TASMOTA_BODY.replace("12.345", "12.346"));
    let set = s.collect_once();
    let e = value(&set, names::ENERGY_JOULES_TOTAL, &meter).unwrap();
    assert!((e - 3600.0).abs() < 1e-6, "1 Wh = 3600 J, got {e}");
    faults(&plug, &mut s, &meter, TASMOTA_BODY);
}

#[test]
fn plug_errors_say_what_was_wrong() {
    let plug = Plug::start(SHELLY_BODY);
    let timeout = TIMEOUT;
    let mut shelly = ShellyMeter::new(&format!("{}/?id=0", plug.url()), timeout).unwrap();
    let mut tasmota = TasmotaMeter::new(&plug.url(), timeout).unwrap();
    plug.set(Reply::Status(500, "oops".into()));
    let err = shelly.read().unwrap_err();
    assert_eq!(err.reason, Reason::HttpStatus);
    assert!(err.message.contains("HTTP 500"), "{err}");
    plug.set_body("{not json");
    let err = tasmota.read().unwrap_err();
    assert_eq!(err.reason, Reason::BadResponse);
    assert!(err.message.contains("not JSON"), "{err}");
    // A Tasmota device without an energy sensor answers Status 8 without ENERGY.
    plug.set_body(r#"{"StatusSNS":{"Time":"2024-05-01T12:00:00"}}"#);
    let err = tasmota.read().unwrap_err();
    assert!(err.message.contains("/StatusSNS/ENERGY/Power"), "{err}");
    // Multi-channel Tasmota: arrays are summed.
    plug.set_body(r#"{"StatusSNS":{"ENERGY":{"Total":[1.0,2.0],"Power":[10,20],"Voltage":[230,230],"Current":[0.1,0.2]}}}"#);
    let r = tasmota.read().unwrap();
    assert_eq!(r.power_watts, Some(30.0));
    assert_eq!(r.voltage_volts, Some(230.0));
    // Nothing listens: the plug is gone.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let err = ShellyMeter::new(&url, timeout).unwrap().read().unwrap_err();
    assert_eq!(err.reason, Reason::Unplugged, "{err}");
}
