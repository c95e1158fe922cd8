//! Power meters: one module per kind, one explicit [`KINDS`] list.
//!
//! A meter is configured as `KIND:TARGET` (`--meter um25c:/dev/rfcomm0`, `--meter hwmon:auto`,
//! `--meter shelly:http://plug.local`) or as a `[[meters]]` table in the config file. One
//! configured meter can expand into several *channels* (`hwmon:auto` finds every INA channel,
//! `rapl:auto` every package); each channel is one [`Meter`], one `meter` label value and one
//! reader thread ([`worker`]), so a hanging device never stalls the others or the exporter.
//!
//! Every meter answers the same question on every tick: what is the power now, and (where the
//! device keeps one) what does its energy counter say. Turning that into a counter that never
//! decreases is [`energy`]'s job, not the meter's.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use crate::paths::Paths;

pub mod energy;
pub mod http_json;
pub mod hwmon;
pub mod rapl;
pub mod shelly;
pub mod tasmota;
/// A test fixture, not a meter: compiled only for tests, benches and feature `fake-meters`.
#[cfg(any(test, feature = "fake-meters"))]
pub mod um_emulator;
pub mod usb_um;
pub mod worker;

/// Meter kinds, in the order of [`KINDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// RDTech UM24C USB meter over serial.
    Um24c,
    /// RDTech UM25C USB meter over serial.
    Um25c,
    /// RDTech UM34C USB meter over serial.
    Um34c,
    /// Linux hwmon power sensors (INA219, INA226, INA3221, INA238, INA260, ...).
    Hwmon,
    /// Intel/AMD RAPL through the powercap framework.
    Rapl,
    /// Shelly Gen2+ smart plug (RPC `Switch.GetStatus`).
    Shelly,
    /// Tasmota smart plug (`Status 8`).
    Tasmota,
}

/// What the user types and reads about a kind.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    /// The kind.
    pub kind: Kind,
    /// Name in `KIND:TARGET` and the `kind` label.
    pub name: &'static str,
    /// What TARGET is.
    pub target_help: &'static str,
    /// One line for `--help` and `meters`.
    pub about: &'static str,
}

/// Every meter kind. Adding one = one module + one line here + one arm in [`build`].
pub const KINDS: &[KindInfo] = &[
    KindInfo {
        kind: Kind::Um24c,
        name: "um24c",
        target_help: "serial device, e.g. /dev/rfcomm0",
        about: "RDTech UM24C USB meter (Bluetooth RFCOMM or USB serial)",
    },
    KindInfo {
        kind: Kind::Um25c,
        name: "um25c",
        target_help: "serial device, e.g. /dev/rfcomm0",
        about: "RDTech UM25C USB meter (Bluetooth RFCOMM or USB serial)",
    },
    KindInfo {
        kind: Kind::Um34c,
        name: "um34c",
        target_help: "serial device, e.g. /dev/rfcomm0",
        about: "RDTech UM34C USB meter (Bluetooth RFCOMM or USB serial)",
    },
    KindInfo {
        kind: Kind::Hwmon,
        name: "hwmon",
        target_help: "`auto` (every power sensor) or a chip directory name, e.g. hwmon2",
        about: "hwmon power sensors under /sys/class/hwmon (INA219/INA226/INA3221/INA238/INA260)",
    },
    KindInfo {
        kind: Kind::Rapl,
        name: "rapl",
        target_help:
            "`auto` (top-level zones), `all` (with sub-zones) or a zone, e.g. intel-rapl:0",
        about: "RAPL energy counters under /sys/class/powercap",
    },
    KindInfo {
        kind: Kind::Shelly,
        name: "shelly",
        target_help: "base URL, e.g. http://plug.local or http://10.0.0.5/?id=1",
        about: "Shelly Gen2+ smart plug, RPC Switch.GetStatus over HTTP",
    },
    KindInfo {
        kind: Kind::Tasmota,
        name: "tasmota",
        target_help: "base URL, e.g. http://10.0.0.6",
        about: "Tasmota smart plug, Status 8 over HTTP",
    },
];

impl Kind {
    /// The kind's entry in [`KINDS`].
    pub fn info(self) -> &'static KindInfo {
        KINDS
            .iter()
            .find(|k| k.kind == self)
            .expect("every kind is listed in KINDS")
    }

    /// Name in specs and in the `kind` label.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KINDS
            .iter()
            .find(|k| k.name.eq_ignore_ascii_case(s))
            .map(|k| k.kind)
            .ok_or_else(|| format!("unknown meter kind {s:?} (known: {})", kind_names()))
    }
}

/// Names of every kind, comma-separated (for error messages and help).
pub fn kind_names() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// One configured meter, as written by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterSpec {
    /// Kind of meter.
    pub kind: Kind,
    /// Device, selector or URL, depending on the kind.
    pub target: String,
    /// Value of the `meter` label; derived from the target when not given.
    pub name: Option<String>,
}

impl MeterSpec {
    /// Checks the target's shape for the kind (not whether the device exists: that can change
    /// while the exporter runs, a malformed spec cannot).
    pub fn new(kind: Kind, target: &str, name: Option<String>) -> Result<Self, String> {
        let target = target.trim();
        if target.is_empty() {
            return Err(format!(
                "meter {kind}: empty target ({})",
                kind.info().target_help
            ));
        }
        match kind {
            Kind::Um24c | Kind::Um25c | Kind::Um34c => {
                if !target.starts_with('/') {
                    return Err(format!(
                        "meter {kind}:{target}: the serial device must be an absolute path, e.g. /dev/rfcomm0"
                    ));
                }
            }
            Kind::Shelly | Kind::Tasmota => {
                http_json::BaseUrl::parse(target)
                    .map_err(|e| format!("meter {kind}:{target}: {e}"))?;
            }
            Kind::Hwmon | Kind::Rapl => {
                if target.contains('/') {
                    return Err(format!(
                        "meter {kind}:{target}: give `auto` or a directory name, not a path ({})",
                        kind.info().target_help
                    ));
                }
            }
        }
        if let Some(n) = &name {
            if n.is_empty() || n.chars().any(|c| c.is_control()) {
                return Err(format!("meter {kind}:{target}: invalid name {n:?}"));
            }
        }
        Ok(MeterSpec {
            kind,
            target: target.to_string(),
            name,
        })
    }
}

impl FromStr for MeterSpec {
    type Err = String;

    /// Parses `KIND:TARGET`; the target may itself contain colons (URLs, `intel-rapl:0`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, target) = s.split_once(':').ok_or_else(|| {
            format!(
                "meter {s:?}: expected KIND:TARGET, e.g. um25c:/dev/rfcomm0 (kinds: {})",
                kind_names()
            )
        })?;
        MeterSpec::new(kind.parse()?, target, None)
    }
}

impl fmt::Display for MeterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.target)
    }
}

/// A device energy counter as read, before it is turned into a monotonic total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceEnergy {
    /// Counter value in joules.
    pub joules: f64,
    /// Changes when the counter is replaced by another one (the UM meters' selected data
    /// group): the next value is a new baseline, not a reset.
    pub epoch: u64,
    /// Where the counter wraps to zero (RAPL's `max_energy_range_uj`); `None` = never.
    pub wraps_at_joules: Option<f64>,
}

/// One good reading of one channel. Fields a device does not report are `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Power now.
    pub power_watts: Option<f64>,
    /// Bus voltage.
    pub voltage_volts: Option<f64>,
    /// Current.
    pub current_amperes: Option<f64>,
    /// Meter temperature.
    pub temperature_celsius: Option<f64>,
    /// The device's own energy counter.
    pub energy: Option<DeviceEnergy>,
}

/// Why a read failed; the value of the `reason` label of `greenpipe_meter_read_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Device absent, unplugged, or the link went away (open/read/write failed).
    Unplugged,
    /// No (complete) answer within the timeout.
    Timeout,
    /// Fewer bytes than a whole frame.
    ShortFrame,
    /// A whole frame with a bad end marker or checksum.
    CorruptFrame,
    /// A frame from another model than configured.
    WrongModel,
    /// HTTP status other than 200.
    HttpStatus,
    /// Answer that does not parse or lacks the expected fields.
    BadResponse,
    /// Other I/O error (sysfs read, permission).
    Io,
}

impl Reason {
    /// Every reason, for pre-declaring the error counter at zero.
    pub const ALL: [Reason; 8] = [
        Reason::Unplugged,
        Reason::Timeout,
        Reason::ShortFrame,
        Reason::CorruptFrame,
        Reason::WrongModel,
        Reason::HttpStatus,
        Reason::BadResponse,
        Reason::Io,
    ];

    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unplugged => "unplugged",
            Reason::Timeout => "timeout",
            Reason::ShortFrame => "short_frame",
            Reason::CorruptFrame => "corrupt_frame",
            Reason::WrongModel => "wrong_model",
            Reason::HttpStatus => "http_status",
            Reason::BadResponse => "bad_response",
            Reason::Io => "io",
        }
    }
}

/// A failed read: a reason for the metric and a message for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({})", reason.as_str())]
pub struct ReadError {
    /// Label value.
    pub reason: Reason,
    /// What happened, for humans.
    pub message: String,
}

impl ReadError {
    /// Builds an error.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        ReadError {
            reason,
            message: message.into(),
        }
    }

    /// Classifies an I/O error on a sysfs file: gone = unplugged, timed out = timeout.
    pub fn from_io(path: &Path, err: &std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        let reason = match err.kind() {
            NotFound | BrokenPipe | NotConnected | ConnectionReset | UnexpectedEof => {
                Reason::Unplugged
            }
            TimedOut | WouldBlock => Reason::Timeout,
            _ if err.raw_os_error() == Some(libc::ENODEV)
                || err.raw_os_error() == Some(libc::ENXIO)
                || err.raw_os_error() == Some(libc::EIO) =>
            {
                Reason::Unplugged
            }
            _ => Reason::Io,
        };
        ReadError::new(reason, format!("{}: {err}", path.display()))
    }
}

/// One channel of a meter. `read` is called from the channel's own thread and must return
/// within the timeout it was built with.
pub trait Meter: Send {
    /// Reads the channel once. A meter with a connection (serial port) drops it itself after
    /// a link error, so the next read reopens it.
    fn read(&mut self) -> Result<Reading, ReadError>;
}

/// A channel ready to run: its label value, kind and reader.
pub struct Channel {
    /// Value of the `meter` label.
    pub name: String,
    /// Kind of meter.
    pub kind: Kind,
    /// The reader.
    pub meter: Box<dyn Meter>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Builds the channels of one configured meter. `Err` = the host has nothing this spec can
/// read (an `auto` that found no sensor); a named device that is absent is *not* an error: it
/// becomes a channel that reports `up 0` until the device appears.
pub fn build(spec: &MeterSpec, paths: &Paths, timeout: Duration) -> Result<Vec<Channel>, String> {
    let channels = match spec.kind {
        Kind::Um24c | Kind::Um25c | Kind::Um34c => {
            let model = usb_um::Model::for_kind(spec.kind).expect("UM kinds have a model");
            vec![Channel {
                name: default_name(spec, || usb_um::default_name(&spec.target)),
                kind: spec.kind,
                meter: Box::new(usb_um::UsbUmMeter::new(model, &spec.target, timeout)),
            }]
        }
        Kind::Hwmon => hwmon::build(paths, &spec.target)?
            .into_iter()
            .map(|(name, meter)| Channel {
                name: prefixed(spec, name),
                kind: spec.kind,
                meter: Box::new(meter) as Box<dyn Meter>,
            })
            .collect(),
        Kind::Rapl => rapl::build(paths, &spec.target)?
            .into_iter()
            .map(|(name, meter)| Channel {
                name: prefixed(spec, name),
                kind: spec.kind,
                meter: Box::new(meter) as Box<dyn Meter>,
            })
            .collect(),
        Kind::Shelly => {
            let meter = shelly::ShellyMeter::new(&spec.target, timeout)?;
            vec![Channel {
                name: default_name(spec, || meter.default_name()),
                kind: spec.kind,
                meter: Box::new(meter),
            }]
        }
        Kind::Tasmota => {
            let meter = tasmota::TasmotaMeter::new(&spec.target, timeout)?;
            vec![Channel {
                name: default_name(spec, || meter.default_name()),
                kind: spec.kind,
                meter: Box::new(meter),
            }]
        }
    };
    Ok(channels)
}

fn default_name(spec: &MeterSpec, derive: impl FnOnce() -> String) -> String {
    spec.name.clone().unwrap_or_else(derive)
}

/// A multi-channel meter with a user-given name labels its channels `NAME/CHANNEL`.
fn prefixed(spec: &MeterSpec, channel: String) -> String {
    match &spec.name {
        Some(n) => format!("{n}/{channel}"),
        None => channel,
    }
}

/// What `greenpipe-exporter meters` prints for one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// Kind probed.
    pub kind: Kind,
    /// Specs that would work on this host, with a short description each.
    pub found: Vec<(String, String)>,
    /// Why nothing was found (empty when something was).
    pub unavailable: Option<String>,
}

/// Looks for every kind on this host. Serial meters are probed only on RFCOMM devices (binding
/// one is a deliberate act); smart plugs cannot be discovered without scanning the network.
pub fn detect(paths: &Paths, timeout: Duration) -> Vec<Detection> {
    let mut out = Vec::new();
    let um = usb_um::detect(Path::new("/dev"), timeout);
    for kind in [Kind::Um24c, Kind::Um25c, Kind::Um34c] {
        let found: Vec<_> = um
            .found
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, spec, what)| (spec.clone(), what.clone()))
            .collect();
        let unavailable = found.is_empty().then(|| um.why_not.clone());
        out.push(Detection {
            kind,
            found,
            unavailable,
        });
    }
    out.push(listed(Kind::Hwmon, hwmon::build(paths, "auto")));
    out.push(listed(Kind::Rapl, rapl::build(paths, "auto")));
    for kind in [Kind::Shelly, Kind::Tasmota] {
        out.push(Detection {
            kind,
            found: Vec::new(),
            unavailable: Some(
                "network plugs are not discovered; configure --meter KIND:http://ADDRESS".into(),
            ),
        });
    }
    out
}

/// The text of `greenpipe-exporter meters`: what each kind finds here, then how the configured
/// meters would start.
pub fn report(config: &crate::config::Config) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Meters on this machine (sysfs at {}):",
        config.paths.sysfs.display()
    );
    for d in detect(&config.paths, config.meter_timeout) {
        let info = d.kind.info();
        if d.found.is_empty() {
            let why = d.unavailable.as_deref().unwrap_or("not found");
            let _ = writeln!(out, "  {:<8} unavailable: {why}", info.name);
        }
        for (spec, what) in &d.found {
            let _ = writeln!(out, "  {:<8} found: --meter {spec}  ({what})", info.name);
        }
    }
    if !config.meters.is_empty() {
        let _ = writeln!(out, "Configured meters:");
        for spec in &config.meters {
            match build(spec, &config.paths, config.meter_timeout) {
                Ok(channels) => {
                    for mut ch in channels {
                        let state = match ch.meter.read() {
                            Ok(r) => format!(
                                "reads {}",
                                r.power_watts
                                    .map(|w| format!("{w} W"))
                                    .unwrap_or_else(|| "(power from the next read)".into())
                            ),
                            Err(e) => format!("fails now: {e}"),
                        };
                        let _ = writeln!(out, "  {spec}: meter=\"{}\" {state}", ch.name);
                    }
                }
                Err(why) => {
                    let _ = writeln!(out, "  {spec}: unavailable: {why}");
                }
            }
        }
    }
    out
}

fn listed<M>(kind: Kind, built: Result<Vec<(String, M)>, String>) -> Detection {
    match built {
        Ok(channels) => Detection {
            kind,
            found: channels
                .into_iter()
                .map(|(name, _)| (format!("{kind}:auto"), name))
                .collect(),
            unavailable: None,
        },
        Err(why) => Detection {
            kind,
            found: Vec::new(),
            unavailable: Some(why),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs_with_colons_in_target() {
        let s: MeterSpec = "um25c:/dev/rfcomm0".parse().unwrap();
        assert_eq!((s.kind, s.target.as_str()), (Kind::Um25c, "/dev/rfcomm0"));
        let s: MeterSpec = "rapl:intel-rapl:0".parse().unwrap();
        assert_eq!((s.kind, s.target.as_str()), (Kind::Rapl, "intel-rapl:0"));
        let s: MeterSpec = "shelly:http://plug.local:8080".parse().unwrap();
        assert_eq!(s.target, "http://plug.local:8080");
        assert_eq!(s.to_string(), "shelly:http://plug.local:8080");
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for (bad, says) in [
            ("um25c", "KIND:TARGET"),
            ("um99c:/dev/x", "unknown meter kind"),
            ("um25c:rfcomm0", "absolute path"),
            ("shelly:plug.local", "http://"),
            ("hwmon:/sys/class/hwmon/hwmon0", "not a path"),
            ("rapl:", "empty target"),
        ] {
            let err = bad.parse::<MeterSpec>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn every_kind_is_listed_once() {
        for info in KINDS {
            assert_eq!(info.name.parse::<Kind>().unwrap(), info.kind);
            assert_eq!(KINDS.iter().filter(|k| k.kind == info.kind).count(), 1);
        }
    }
}
