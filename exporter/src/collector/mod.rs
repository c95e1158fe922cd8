//! Collectors: one module per source, one explicit [`REGISTRY`] list.
//!
//! A collector is built once at start-up and then run once per tick. It has three outcomes:
//! it worked, the host does not have its source ([`CollectError::Unavailable`], logged once and
//! exposed as `greenpipe_exporter_collector_available{reason} 0`), or it broke
//! ([`CollectError::Failed`], counted in `collector_success 0`). Neither stops other collectors.

use std::fmt;
use std::time::Duration;

use crate::meter::MeterSpec;
use crate::metrics::MetricSet;
use crate::paths::Paths;

pub mod source;

/// Declares the collector modules, [`REGISTRY`] and [`Options`] from one list, in run order.
/// `name` is a collector without options; `name(Type)` one whose `name::Type` (a `clap::Args`
/// and `Deserialize` struct implementing [`CollectorOptions`]) is flattened into the command
/// line and read from the file's `[name]` section, so a flag and its key cannot drift. Adding
/// a collector = its file + one line here.
macro_rules! collectors {
    ($($module:ident $(($options:ident))?),+ $(,)?) => {
        $(pub mod $module;)+

        /// Every collector, in the order they run.
        pub const REGISTRY: &[Spec] = &[$($module::SPEC,)+];

        /// The options of every collector that has some, each declared in its own module.
        #[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Options {
            $($(
                #[allow(missing_docs)]
                #[command(flatten)]
                #[serde(default)]
                pub $module: $module::$options,
            )?)+
        }

        impl Options {
            /// The config-file sections these options are read from (`[process]`, ...).
            pub const SECTIONS: &[&str] = &[$($({
                let _ = stringify!($options);
                stringify!($module)
            },)?)+];

            /// Flags win over the file, field by field.
            pub fn merge(self, file: Options) -> Options {
                Options {
                    $($($module: <$module::$options as CollectorOptions>::merge(self.$module, file.$module),)?)+
                }
            }

            /// Checks every collector's options against the set of enabled collectors.
            pub fn validate(&self, enabled: &[&'static str]) -> anyhow::Result<()> {
                $($(<$module::$options as CollectorOptions>::validate(&self.$module, enabled)?;)?)+
                Ok(())
            }
        }
    };
}

collectors! {
    cpu,
    cpufreq,
    meminfo,
    vmstat,
    diskstats(DiskstatsOptions),
    netdev(NetdevOptions),
    cgroup,
    process(ProcessOptions),
    ebpf(EbpfOptions),
    perf,
    meter,
}

/// What a collector's own options type must provide.
pub trait CollectorOptions {
    /// `self` from the flags, `file` from the config file: a flag wins.
    fn merge(self, file: Self) -> Self;
    /// Refuses combinations that cannot work (e.g. an option of a disabled collector).
    fn validate(&self, _enabled: &[&'static str]) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What every collector is built from: the host roots, the node, the tick, and the options
/// (each collector reads its own; the two shared by design are documented where they are read:
/// `--collector.process.top-n` also bounds the eBPF per-process export, and
/// `--collector.netdev.include-loopback` also applies to the cgroup collector's network).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Host tree roots.
    pub paths: &'a Paths,
    /// Value of the `node` label.
    pub node_name: &'a str,
    /// Sampling interval.
    pub interval: Duration,
    /// Every collector's options.
    pub options: &'a Options,
    /// Power meters to read (`--meter`, `[[meters]]`; also what `meters` reports on).
    pub meters: &'a [MeterSpec],
    /// Longest wait for a meter reading per tick.
    pub meter_timeout: Duration,
}

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

/// Builds a collector from its context; `Unavailable` if the host lacks the source.
pub type Build = fn(&Context<'_>) -> Result<Box<dyn Collector>, CollectError>;

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

/// Looks up a registry entry by name.
pub fn spec(name: &str) -> Option<&'static Spec> {
    REGISTRY.iter().find(|s| s.name == name)
}
