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
pub mod worker;

/// A test fixture, not a meter: compiled only for tests, benches and feature `fake-meters`.
#[cfg(any(test, feature = "fake-meters"))]
pub mod um_emulator;

/// Declares the meter-kind modules and [`KINDS`] from one list: `module: [STATIC, ...]`, each
/// static a [`KindDef`] in that module. Adding a kind = its file + one line here; a kind file
/// that leaves out a piece of its [`KindDef`] does not compile.
macro_rules! meter_kinds {
    ($($module:ident: [$($def:ident),+ $(,)?]),+ $(,)?) => {
        $(pub mod $module;)+
        /// Every meter kind, in the order `meters`, help texts and the README table use.
        pub static KINDS: &[&KindDef] = &[$($(&$module::$def,)+)+];
    };
}

meter_kinds! {
    usb_um: [UM24C, UM25C, UM34C],
    hwmon: [KIND],
    rapl: [KIND],
    shelly: [KIND],
    tasmota: [KIND],
}

/// Everything the exporter knows about one meter kind, declared in the kind's own file.
#[derive(Debug)]
pub struct KindDef {
    /// Name in `KIND:TARGET` and the `kind` label.
    pub name: &'static str,
    /// What TARGET is.
    pub target_help: &'static str,
    /// One line for `--help` and `meters`.
    pub about: &'static str,
    /// Error reasons the kind can produce, exported at zero from the start so `rate()` and
    /// `increase()` see the first error.
    pub reasons: &'static [Reason],
    /// Checks the target's shape (not whether the device exists: that can change while the
    /// exporter runs, a malformed spec cannot). The error is appended to `meter KIND:TARGET: `.
    pub check_target: fn(target: &str) -> Result<(), String>,
    /// Builds the channels of one configured meter. `Err` = the host has nothing this spec
    /// can read (an `auto` that found no sensor); a named device that is absent is *not* an
    /// error: it becomes a channel that reports `up 0` until the device appears.
    pub build:
        fn(spec: &MeterSpec, paths: &Paths, timeout: Duration) -> Result<Vec<Channel>, String>,
    /// What `greenpipe-exporter meters` finds of this kind on this host.
    pub detect: fn(paths: &Paths, timeout: Duration) -> Detected,
}

/// A meter kind: a handle on its [`KindDef`] in [`KINDS`]. Compared, hashed and ordered by its
/// place in [`KINDS`].
#[derive(Clone, Copy)]
pub struct Kind(&'static KindDef);

impl Kind {
    /// The kind declared by `def` (one of the statics listed in [`KINDS`]).
    pub const fn of(def: &'static KindDef) -> Kind {
        Kind(def)
    }

    /// The kind's declaration.
    pub fn def(self) -> &'static KindDef {
        self.0
    }

    /// Every kind, in [`KINDS`] order.
    pub fn all() -> impl Iterator<Item = Kind> {
        KINDS.iter().map(|d| Kind(d))
    }

    /// Name in specs and in the `kind` label.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    fn index(self) -> usize {
        KINDS
            .iter()
            .position(|d| d.name == self.0.name)
            .unwrap_or(usize::MAX)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index().cmp(&other.index())
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kind({})", self.0.name)
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
        Kind::all()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown meter kind {s:?} (known: {})", kind_names()))
    }
}

/// Names of every kind, comma-separated (for error messages and help).
pub fn kind_names() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// The help text of `--meter`, generated from [`KINDS`].
pub fn flag_help() -> String {
    format!(
        "Power meter to read, KIND:TARGET (repeatable); KIND is one of {} \
         (`greenpipe-exporter meters` shows each kind's TARGET and what it finds here). \
         Replaces the file's [[meters]].",
        kind_names()
    )
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
                kind.def().target_help
            ));
        }
        (kind.def().check_target)(target).map_err(|e| format!("meter {kind}:{target}: {e}"))?;
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

/// Builds the channels of one configured meter (see [`KindDef::build`]).
pub fn build(spec: &MeterSpec, paths: &Paths, timeout: Duration) -> Result<Vec<Channel>, String> {
    (spec.kind.def().build)(spec, paths, timeout)
}

/// The one channel of a single-channel meter, labelled with the configured name or else the
/// one derived from the target.
pub fn single(
    spec: &MeterSpec,
    derive: impl FnOnce() -> String,
    meter: impl Meter + 'static,
) -> Vec<Channel> {
    vec![Channel {
        name: spec.name.clone().unwrap_or_else(derive),
        kind: spec.kind,
        meter: Box::new(meter),
    }]
}

/// The channels of a multi-channel meter; a user-given name labels them `NAME/CHANNEL`.
pub fn prefixed<M: Meter + 'static>(spec: &MeterSpec, channels: Vec<(String, M)>) -> Vec<Channel> {
    channels
        .into_iter()
        .map(|(channel, meter)| Channel {
            name: match &spec.name {
                Some(n) => format!("{n}/{channel}"),
                None => channel,
            },
            kind: spec.kind,
            meter: Box::new(meter) as Box<dyn Meter>,
        })
        .collect()
}

/// The target check of kinds whose target is `auto` or a sysfs directory name.
pub fn check_directory_name(target: &str, target_help: &str) -> Result<(), String> {
    if target.contains('/') {
        return Err(format!(
            "give `auto` or a directory name, not a path ({target_help})"
        ));
    }
    Ok(())
}

/// What a kind's `detect` found on this host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Detected {
    /// Specs that would work on this host, with a short description each.
    pub found: Vec<(String, String)>,
    /// Why nothing was found (empty when something was).
    pub unavailable: Option<String>,
}

impl Detected {
    /// Nothing found, for this reason.
    pub fn unavailable(why: impl Into<String>) -> Self {
        Detected {
            found: Vec::new(),
            unavailable: Some(why.into()),
        }
    }

    /// The detection of an `auto` target: every channel it builds, or why none.
    pub fn listed<M>(kind: &str, built: Result<Vec<(String, M)>, String>) -> Self {
        match built {
            Ok(channels) => Detected {
                found: channels
                    .into_iter()
                    .map(|(name, _)| (format!("{kind}:auto"), name))
                    .collect(),
                unavailable: None,
            },
            Err(why) => Detected::unavailable(why),
        }
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

/// Looks for every kind on this host.
pub fn detect(paths: &Paths, timeout: Duration) -> Vec<Detection> {
    Kind::all()
        .map(|kind| {
            let Detected { found, unavailable } = (kind.def().detect)(paths, timeout);
            Detection {
                kind,
                found,
                unavailable,
            }
        })
        .collect()
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
        let info = d.kind.def();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs_with_colons_in_target() {
        let s: MeterSpec = "um25c:/dev/rfcomm0".parse().unwrap();
        assert_eq!(
            (s.kind, s.target.as_str()),
            (Kind::of(&usb_um::UM25C), "/dev/rfcomm0")
        );
        let s: MeterSpec = "rapl:intel-rapl:0".parse().unwrap();
        assert_eq!(
            (s.kind, s.target.as_str()),
            (Kind::of(&rapl::KIND), "intel-rapl:0")
        );
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
            assert_eq!(info.name.parse::<Kind>().unwrap().def().name, info.name);
            assert_eq!(KINDS.iter().filter(|k| k.name == info.name).count(), 1);
        }
    }

    /// The README's meter table is written by hand (wiring advice does not generate), so it is
    /// checked against [`KINDS`]: every kind has a row naming `KIND:`, and every `KIND:` the
    /// table names is a kind.
    #[test]
    fn readme_meter_table_matches_the_kinds() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("| Kind | `--meter` | Wiring |")
            .expect("README meter table");
        let table: Vec<&str> = readme[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        let cells: Vec<&str> = table.iter().filter_map(|l| l.split('|').nth(2)).collect();
        for kind in KINDS {
            assert!(
                cells.iter().any(|c| c.contains(&format!("`{}:", kind.name))
                    || c.contains(&format!("`{}:`", kind.name))),
                "README meter table has no row for {}",
                kind.name
            );
        }
        for cell in &cells {
            for named in cell.split('`').skip(1).step_by(2) {
                let Some((kind, _)) = named.split_once(':') else {
                    continue; // `?id=1`: part of a target, not a spec
                };
                assert!(
                    kind.parse::<Kind>().is_ok(),
                    "README meter table names unknown kind {kind:?}"
                );
            }
        }
    }

    #[test]
    fn help_names_every_kind() {
        let help = flag_help();
        for kind in KINDS {
            assert!(help.contains(kind.name), "{help}");
        }
    }
}
