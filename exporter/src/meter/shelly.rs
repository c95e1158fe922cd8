//! Shelly Gen2+ smart plugs (Plus Plug S, Plus 1PM, Pro 1PM, ...) over their RPC HTTP API.
//!
//! `GET /rpc/Switch.GetStatus?id=<id>` answers (Shelly Gen2 API docs, "Switch" component):
//! `{"id":0,"source":"init","output":true,"apower":8.9,"voltage":237.5,"current":0.068,
//!   "aenergy":{"total":6.532,"by_minute":[45.199,47.141,88.397],"minute_ts":1654511972},
//!   "temperature":{"tC":23.5,"tF":74.4}}`
//! `apower` in W, `voltage` in V, `current` in A, `aenergy.total` in Wh since the plug booted
//! (a reboot resets it; the exporter's total does not go down). The switch id defaults to 0 and
//! is chosen with `?id=N` on the base URL.

use std::time::Duration;

use super::http_json::{self, BaseUrl};
use super::{Detected, KindDef};

/// `shelly:http://HOST`.
pub static KIND: KindDef = KindDef {
    name: "shelly",
    target_help: "base URL, e.g. http://plug.local or http://10.0.0.5/?id=1",
    about: "Shelly Gen2+ smart plug, RPC Switch.GetStatus over HTTP",
    reasons: http_json::REASONS,
    check_target: http_json::check_target,
    build: |spec, _, timeout| {
        let meter = ShellyMeter::new(&spec.target, timeout)?;
        let name = meter.default_name();
        Ok(super::single(spec, || name, meter))
    },
    detect: |_, _| Detected::unavailable(http_json::NOT_DISCOVERED),
};
use super::{DeviceEnergy, ReadError, Reading};

/// One Shelly switch channel.
pub struct ShellyMeter {
    url: String,
    authority: String,
    agent: ureq::Agent,
}

impl ShellyMeter {
    /// A meter for the plug at `target` (base URL); calls end within `timeout`.
    pub fn new(target: &str, timeout: Duration) -> Result<Self, String> {
        let base = BaseUrl::parse(target)?;
        let id = base.param("id").unwrap_or("0");
        if id.parse::<u32>().is_err() {
            return Err(format!("shelly:{target}: switch id {id:?} is not a number"));
        }
        Ok(ShellyMeter {
            url: format!("{}/rpc/Switch.GetStatus?id={id}", base.base),
            authority: base.authority,
            agent: http_json::agent(timeout),
        })
    }

    /// `meter` label when none is configured: the plug's host.
    pub fn default_name(&self) -> String {
        self.authority.clone()
    }
}

/// Decodes a `Switch.GetStatus` answer.
pub fn parse(doc: &serde_json::Value, url: &str) -> Result<Reading, ReadError> {
    let power = http_json::number(doc, "/apower", url)?;
    let wh = http_json::number(doc, "/aenergy/total", url)?;
    Ok(Reading {
        power_watts: Some(power),
        voltage_volts: doc.pointer("/voltage").and_then(|v| v.as_f64()),
        current_amperes: doc.pointer("/current").and_then(|v| v.as_f64()),
        temperature_celsius: doc.pointer("/temperature/tC").and_then(|v| v.as_f64()),
        energy: Some(DeviceEnergy {
            joules: wh * 3600.0,
            epoch: 0,
            wraps_at_joules: None,
        }),
    })
}

impl super::Meter for ShellyMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let doc = http_json::get(&self.agent, &self.url)?;
        parse(&doc, &self.url)
    }
}
