//! Finding UM meters: probe bound Bluetooth serial links, list (never write to) USB serial ones.

use std::path::Path;
use std::time::{Duration, Instant};

use super::codec::decode;
use super::transport::{open, poll};
use crate::meter::{Kind, ReadError};

/// What probing serial devices found.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// (kind, spec, description) of each meter that answered.
    pub found: Vec<(Kind, String, String)>,
    /// Why none was found.
    pub why_not: String,
}

/// Probes `/dev/rfcomm*` (bound Bluetooth serial links) with one poll request each. USB-serial
/// adapters (`ttyUSB*`) are listed but not written to: they may be something else entirely.
pub fn detect(dev: &Path, timeout: Duration) -> Probe {
    let mut probe = Probe::default();
    let mut notes = Vec::new();
    let Ok(entries) = std::fs::read_dir(dev) else {
        probe.why_not = format!("cannot list {}", dev.display());
        return probe;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut rfcomm = 0;
    for name in &names {
        let path = dev.join(name);
        if name.starts_with("rfcomm") {
            rfcomm += 1;
            let answer = open(&path, timeout).and_then(|mut port| {
                let bytes = poll(port.as_mut(), &path, Instant::now() + timeout)?;
                decode(&bytes, None).map_err(|e| ReadError::new(e.reason(), e.to_string()))
            });
            match answer {
                Ok(frame) => probe.found.push((
                    frame.model.kind(),
                    format!("{}:{}", frame.model.kind(), path.display()),
                    format!(
                        "{:?} answering: {} V, {} A, {} W",
                        frame.model, frame.voltage_volts, frame.current_amperes, frame.power_watts
                    ),
                )),
                Err(e) => notes.push(format!("{}: {e}", path.display())),
            }
        } else if name.starts_with("ttyUSB") || name.starts_with("ttyACM") {
            notes.push(format!(
                "{} not probed (may be another device); try --meter um25c:{}",
                path.display(),
                path.display()
            ));
        }
    }
    if rfcomm == 0 {
        notes.insert(
            0,
            "no /dev/rfcomm* (bind a Bluetooth meter with `rfcomm bind 0 MAC`)".into(),
        );
    }
    probe.why_not = notes.join("; ");
    probe
}
