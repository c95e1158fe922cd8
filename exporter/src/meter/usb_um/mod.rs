//! RDTech UM24C / UM25C / UM34C USB meters over a serial line (Bluetooth RFCOMM or USB serial).
//!
//! Protocol, as documented on sigrok's "RDTech UM series" wiki page and implemented by
//! libsigrok's `src/hardware/rdtech-um/protocol.c` and rdserialtool's `rdserial/um/__init__.py`:
//! at 9600 baud 8N1 the host sends the single byte `0xF0`; the meter answers with a 130-byte
//! frame of big-endian fields:
//!
//! | offset | size | field                                                        |
//! |-------:|-----:|--------------------------------------------------------------|
//! | 0      | 2    | model id: UM24C `0x0963`, UM25C `0x09c9`, UM34C `0x0d4c`       |
//! | 2      | 2    | voltage: 10 mV units (UM25C: 1 mV)                           |
//! | 4      | 2    | current: 1 mA units (UM25C: 0.1 mA)                          |
//! | 6      | 4    | power, mW                                                    |
//! | 10     | 2    | temperature, °C                                              |
//! | 12     | 2    | temperature, °F                                              |
//! | 14     | 2    | selected data group (0-9)                                    |
//! | 16     | 80   | 10 data groups × (u32 mAh, u32 mWh)                          |
//! | 96     | 2    | D+ voltage, 10 mV units                                      |
//! | 98     | 2    | D- voltage, 10 mV units                                      |
//! | 100    | 2    | charging mode                                                |
//! | 102    | 8    | threshold recording: u32 mAh, u32 mWh                        |
//! | 110    | 2    | recording threshold, 10 mA units                             |
//! | 112    | 4    | threshold recording time, s                                  |
//! | 116    | 2    | recording active                                             |
//! | 118    | 2    | screen timeout, min                                          |
//! | 120    | 2    | screen brightness                                            |
//! | 122    | 4    | load resistance, 0.1 Ω units                                 |
//! | 126    | 2    | selected screen                                              |
//! | 128    | 2    | UM24C/UM25C: end marker `0xFFF1`; UM34C: byte 129 = XOR checksum |
//!
//! Only the live voltage and current differ in scale between models (the UM25C's are 10x finer);
//! aggregates are the same for all three. The energy counter the exporter uses is the selected
//! data group's mWh; switching groups starts a new baseline
//! ([`DeviceEnergy::epoch`](super::DeviceEnergy::epoch)).

//!
//! Split by role: [`codec`] (the frame layout above), [`transport`] (the serial line),
//! [`discovery`] (probing `/dev`); this file declares the kinds and the meter that ties them.

mod codec;
mod discovery;
mod transport;

pub use codec::{
    decode, encode, DataGroup, Frame, FrameError, Model, END_MARKER, FRAME_LEN, REQUEST,
};
pub use discovery::{detect, Probe};
pub use transport::{open, poll};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{Channel, Detected, KindDef, MeterSpec, ReadError, Reading, Reason};
use crate::paths::Paths;

/// `um24c:/dev/rfcomm0`.
pub static UM24C: KindDef = um_kind(
    "um24c",
    "RDTech UM24C USB meter (Bluetooth RFCOMM or USB serial)",
    |spec, _, timeout| Ok(build(Model::Um24c, spec, timeout)),
    |_, timeout| detected(Model::Um24c, timeout),
);
/// `um25c:/dev/rfcomm0`.
pub static UM25C: KindDef = um_kind(
    "um25c",
    "RDTech UM25C USB meter (Bluetooth RFCOMM or USB serial)",
    |spec, _, timeout| Ok(build(Model::Um25c, spec, timeout)),
    |_, timeout| detected(Model::Um25c, timeout),
);
/// `um34c:/dev/rfcomm0`.
pub static UM34C: KindDef = um_kind(
    "um34c",
    "RDTech UM34C USB meter (Bluetooth RFCOMM or USB serial)",
    |spec, _, timeout| Ok(build(Model::Um34c, spec, timeout)),
    |_, timeout| detected(Model::Um34c, timeout),
);

/// What the three models share: the target syntax, the failure reasons, the serial path.
const fn um_kind(
    name: &'static str,
    about: &'static str,
    build: fn(&MeterSpec, &Paths, Duration) -> Result<Vec<Channel>, String>,
    detect: fn(&Paths, Duration) -> Detected,
) -> KindDef {
    KindDef {
        name,
        target_help: "serial device, e.g. /dev/rfcomm0",
        about,
        reasons: &[
            Reason::Unplugged,
            Reason::Timeout,
            Reason::ShortFrame,
            Reason::CorruptFrame,
            Reason::WrongModel,
            Reason::Io,
        ],
        check_target: |target| {
            if target.starts_with('/') {
                Ok(())
            } else {
                Err("the serial device must be an absolute path, e.g. /dev/rfcomm0".into())
            }
        },
        build,
        detect,
    }
}

fn build(model: Model, spec: &MeterSpec, timeout: Duration) -> Vec<Channel> {
    super::single(
        spec,
        || default_name(&spec.target),
        UsbUmMeter::new(model, &spec.target, timeout),
    )
}

/// The meters of one model among those that answered on `/dev/rfcomm*`. The three kinds share
/// one probe per process, so `meters` polls each device once, not once per model.
fn detected(model: Model, timeout: Duration) -> Detected {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    let probe = PROBE.get_or_init(|| detect(Path::new("/dev"), timeout));
    let found: Vec<_> = probe
        .found
        .iter()
        .filter(|(k, _, _)| *k == model.kind())
        .map(|(_, spec, what)| (spec.clone(), what.clone()))
        .collect();
    let unavailable = found.is_empty().then(|| probe.why_not.clone());
    Detected { found, unavailable }
}

/// `meter` label for a serial device: its file name (`rfcomm0`).
pub fn default_name(device: &str) -> String {
    Path::new(device)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| device.to_string())
}

/// A UM meter on a serial device. The port is opened lazily and dropped on any link error, so
/// the next read reopens it (the worker spaces those attempts out with backoff).
pub struct UsbUmMeter {
    model: Model,
    path: PathBuf,
    timeout: Duration,
    port: Option<Box<dyn serialport::SerialPort>>,
}

impl UsbUmMeter {
    /// A meter of `model` on `path`; every read returns within about `timeout`.
    pub fn new(model: Model, path: &str, timeout: Duration) -> Self {
        UsbUmMeter {
            model,
            path: PathBuf::from(path),
            timeout,
            port: None,
        }
    }

    fn port(&mut self) -> Result<&mut Box<dyn serialport::SerialPort>, ReadError> {
        if self.port.is_none() {
            self.port = Some(open(&self.path, self.timeout)?);
        }
        Ok(self.port.as_mut().expect("just opened"))
    }
}

impl super::Meter for UsbUmMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let deadline = Instant::now() + self.timeout;
        let path = self.path.clone();
        let port = self.port()?;
        let result = poll(port.as_mut(), &path, deadline).and_then(|bytes| {
            decode(&bytes, Some(self.model))
                .map_err(|e| ReadError::new(e.reason(), format!("{}: {e}", path.display())))
        });
        match &result {
            // A corrupt frame is a line problem, not a lost link: keep the port, the next
            // request starts by discarding whatever is left of this one.
            Err(e) if matches!(e.reason, Reason::Unplugged | Reason::Timeout | Reason::Io) => {
                self.port = None;
            }
            _ => {}
        }
        result.map(|f| f.reading())
    }
}
