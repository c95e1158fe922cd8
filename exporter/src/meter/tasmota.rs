//! Tasmota smart plugs (Sonoff POW, Gosund, Athom, ...) over the HTTP command API.
//!
//! `GET /cm?cmnd=Status%208` answers (Tasmota docs, "Commands" → `Status 8`, power monitoring):
//! `{"StatusSNS":{"Time":"2024-05-01T12:00:00","ENERGY":{"TotalStartTime":"2024-01-01T00:00:00",
//!   "Total":12.345,"Yesterday":0.321,"Today":0.123,"Power":45,"ApparentPower":50,
//!   "ReactivePower":21,"Factor":0.90,"Voltage":231,"Current":0.195}}}`
//! `Power` in W, `Voltage` in V, `Current` in A, `Total` in kWh. Multi-channel devices send
//! arrays; power, current and energy are summed over channels, voltage is the first one's.
//! A web password is passed on with `?user=admin&password=...` on the base URL.

use std::time::Duration;

use super::http_json::{self, BaseUrl};
use super::{Detected, KindDef};

/// `tasmota:http://HOST`.
pub static KIND: KindDef = KindDef {
    name: "tasmota",
    target_help: "base URL, e.g. http://10.0.0.6",
    about: "Tasmota smart plug, Status 8 over HTTP",
    reasons: http_json::REASONS,
    check_target: http_json::check_target,
    build: |spec, _, timeout| {
        let meter = TasmotaMeter::new(&spec.target, timeout)?;
        let name = meter.default_name();
        Ok(super::single(spec, || name, meter))
    },
    detect: |_, _| Detected::unavailable(http_json::NOT_DISCOVERED),
};
use super::{DeviceEnergy, ReadError, Reading, Reason};

/// One Tasmota device.
pub struct TasmotaMeter {
    url: String,
    authority: String,
    agent: ureq::Agent,
}

impl TasmotaMeter {
    /// A meter for the plug at `target` (base URL); calls end within `timeout`.
    pub fn new(target: &str, timeout: Duration) -> Result<Self, String> {
        let base = BaseUrl::parse(target)?;
        let mut url = format!("{}/cm?cmnd=Status%208", base.base);
        for key in ["user", "password"] {
            if let Some(v) = base.param(key) {
                url.push_str(&format!("&{key}={v}"));
            }
        }
        Ok(TasmotaMeter {
            url,
            authority: base.authority,
            agent: http_json::agent(timeout),
        })
    }

    /// `meter` label when none is configured: the plug's host.
    pub fn default_name(&self) -> String {
        self.authority.clone()
    }
}

/// A number, or the values of an array of numbers.
fn values(doc: &serde_json::Value, pointer: &str) -> Option<Vec<f64>> {
    match doc.pointer(pointer)? {
        serde_json::Value::Array(items) => items.iter().map(|v| v.as_f64()).collect(),
        v => v.as_f64().map(|x| vec![x]),
    }
    .filter(|v| !v.is_empty() && v.iter().all(|x| x.is_finite()))
}

/// Decodes a `Status 8` answer.
pub fn parse(doc: &serde_json::Value, url: &str) -> Result<Reading, ReadError> {
    let missing = |field: &str| {
        ReadError::new(
            Reason::BadResponse,
            format!("GET {url}: no number at /StatusSNS/ENERGY/{field} (a plug without power monitoring?)"),
        )
    };
    let power: f64 = values(doc, "/StatusSNS/ENERGY/Power")
        .ok_or_else(|| missing("Power"))?
        .iter()
        .sum();
    let kwh: f64 = values(doc, "/StatusSNS/ENERGY/Total")
        .ok_or_else(|| missing("Total"))?
        .iter()
        .sum();
    Ok(Reading {
        power_watts: Some(power),
        voltage_volts: values(doc, "/StatusSNS/ENERGY/Voltage").map(|v| v[0]),
        current_amperes: values(doc, "/StatusSNS/ENERGY/Current").map(|v| v.iter().sum()),
        temperature_celsius: None,
        energy: Some(DeviceEnergy {
            joules: kwh * 3.6e6,
            epoch: 0,
            wraps_at_joules: None,
        }),
    })
}

impl super::Meter for TasmotaMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let doc = http_json::get(&self.agent, &self.url)?;
        parse(&doc, &self.url)
    }
}
