//! The meter collector's options: `--meter` and `--meter.timeout`, the file's `[[meters]]` and
//! `meter_timeout`, resolved into [`MeterOptions`]. They are global flags (the `meters`
//! subcommand reports on the same meters) and top-level file keys, so they are not one of the
//! `[<collector>]` sections of `collector::Options`.

use std::time::Duration;

use serde::Deserialize;

use crate::meter::MeterSpec;

/// Default `--meter.timeout`: a UM frame takes 135 ms at 9600 baud, plus Bluetooth latency.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

/// `--meter`, `--meter.timeout` as given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MeterFlags {
    #[arg(long = "meter", value_name = "KIND:TARGET", global = true, help = crate::meter::flag_help())]
    pub meters: Vec<String>,
    /// Longest wait for a meter reading per tick, e.g. `500ms` [default: 500ms].
    #[arg(long = "meter.timeout", global = true)]
    pub timeout: Option<String>,
}

/// `[[meters]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterFile {
    /// Meter kind (`um25c`, `hwmon`, `rapl`, `shelly`, ...).
    pub kind: String,
    /// Device, selector or URL.
    pub target: String,
    /// Value of the `meter` label (prefix of the channel names for multi-channel kinds).
    pub name: Option<String>,
}

/// The meters to read and how long a tick waits for them.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterOptions {
    /// Power meters to read (`--meter`, `[[meters]]`; also what `meters` reports on).
    pub specs: Vec<MeterSpec>,
    /// Longest wait for a meter reading per tick.
    pub timeout: Duration,
}

impl Default for MeterOptions {
    fn default() -> Self {
        MeterOptions {
            specs: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why the meter options were refused; each names the flag or key.
#[derive(Debug, thiserror::Error)]
pub enum MeterOptionsError {
    #[error("{origin}: {message}")]
    Spec {
        origin: &'static str,
        message: String,
    },
    #[error(
        "--meter.timeout must be above zero and below --collection.interval ({timeout:?} vs \
         {interval:?}): a meter must not delay the next tick"
    )]
    Timeout {
        timeout: Duration,
        interval: Duration,
    },
}

impl MeterOptions {
    /// The flags' meters if any, else the file's; the timeout given (flag over file, already
    /// parsed) or the default, which must leave room in a tick of `interval`.
    pub fn resolve(
        flags: &[String],
        file: Vec<MeterFile>,
        timeout: Option<Duration>,
        interval: Duration,
    ) -> Result<MeterOptions, MeterOptionsError> {
        let specs = specs(flags, file)?;
        let timeout = timeout.unwrap_or_else(|| DEFAULT_TIMEOUT.min(interval / 2));
        if timeout.is_zero() || timeout >= interval {
            return Err(MeterOptionsError::Timeout { timeout, interval });
        }
        Ok(MeterOptions { specs, timeout })
    }
}

fn specs(flags: &[String], file: Vec<MeterFile>) -> Result<Vec<MeterSpec>, MeterOptionsError> {
    if !flags.is_empty() {
        return flags
            .iter()
            .map(|s| {
                s.parse::<MeterSpec>()
                    .map_err(|message| MeterOptionsError::Spec {
                        origin: "--meter",
                        message,
                    })
            })
            .collect();
    }
    let in_file = |message| MeterOptionsError::Spec {
        origin: "config file [[meters]]",
        message,
    };
    file.into_iter()
        .map(|m| {
            MeterSpec::new(m.kind.parse().map_err(in_file)?, &m.target, m.name).map_err(in_file)
        })
        .collect()
}
