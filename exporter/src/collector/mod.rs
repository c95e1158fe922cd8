//! Collectors: one module per source, one explicit [`REGISTRY`] list.
//!
//! A collector is built once at start-up and then run once per tick. It has three outcomes:
//! it worked, the host does not have its source ([`CollectError::Unavailable`], logged once and
//! exposed as `greenpipe_exporter_collector_available{reason} 0`), or it broke
//! ([`CollectError::Failed`], counted in `collector_success 0`). Neither stops other collectors.

use std::fmt;

use crate::config::Config;
use crate::metrics::MetricSet;

pub mod cgroup;
pub mod cpu;
pub mod cpufreq;
pub mod diskstats;
pub mod ebpf;
pub mod meminfo;
pub mod meter;
pub mod netdev;
pub mod perf;
pub mod process;
pub mod source;
pub mod vmstat;

/// Why a collector produced nothing.
#[derive(Debug)]
pub enum CollectError {
    /// The host lacks the source (missing file, kernel feature, permission). Not a bug.
    Unavailable(String),
    /// The source exists but reading it failed.
    Failed(anyhow::Error),
}

impl fmt::Display for CollectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectError::Unavailable(r) => write!(f, "unavailable: {r}"),
            CollectError::Failed(e) => write!(f, "failed: {e:#}"),
        }
    }
}

impl CollectError {
    /// Classifies an I/O error on a source file: absent or forbidden means unavailable.
    pub fn from_io(path: &std::path::Path, err: std::io::Error) -> Self {
        use std::io::ErrorKind::{NotFound, PermissionDenied};
        match err.kind() {
            NotFound | PermissionDenied => {
                CollectError::Unavailable(format!("{}: {}", path.display(), err))
            }
            _ => CollectError::Failed(anyhow::anyhow!("{}: {}", path.display(), err)),
        }
    }
}

/// What a collector reports besides its metrics.
#[derive(Debug, Default)]
pub struct Report {
    /// Input lines that could not be parsed and were skipped this tick.
    pub malformed_lines: u64,
}

/// A source of metrics, sampled once per tick.
pub trait Collector: Send {
    /// Reads the source and appends series to `out`.
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError>;
}

/// Builds a collector from the configuration; `Unavailable` if the host lacks the source.
pub type Build = fn(&Config) -> Result<Box<dyn Collector>, CollectError>;

/// A registry entry.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Name used in `--collector.<name>` and the `collector` label.
    pub name: &'static str,
    /// Whether it runs without `--collector.<name>`.
    pub default_enabled: bool,
    /// One-line description for `--help` and the README.
    pub help: &'static str,
    /// Constructor.
    pub build: Build,
}

impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spec").field("name", &self.name).finish()
    }
}

/// Every collector, in the order they run. Adding one = one module + one line here.
pub const REGISTRY: &[Spec] = &[
    cpu::SPEC,
    cpufreq::SPEC,
    meminfo::SPEC,
    vmstat::SPEC,
    diskstats::SPEC,
    netdev::SPEC,
    cgroup::SPEC,
    process::SPEC,
    ebpf::SPEC,
    perf::SPEC,
    meter::SPEC,
];

/// Looks up a registry entry by name.
pub fn spec(name: &str) -> Option<&'static Spec> {
    REGISTRY.iter().find(|s| s.name == name)
}
