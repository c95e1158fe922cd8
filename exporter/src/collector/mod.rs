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
            pub fn validate(&self, enabled: &[&'static str]) -> Result<(), OptionsError> {
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
    fn validate(&self, _enabled: &[&'static str]) -> Result<(), OptionsError> {
        Ok(())
    }
}

/// Collector options that cannot work together; each names the flag (and file key).
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// A number below its minimum.
    #[error("{flag} must be at least {min}")]
    TooSmall {
        /// The flag.
        flag: &'static str,
        /// The smallest value that works.
        min: u64,
    },
    /// An option of a collector that is disabled, which would silently do nothing.
    #[error("{option} needs the {collector} collector, which is disabled")]
    NeedsCollector {
        /// The option, with its flag and file key.
        option: &'static str,
        /// The collector it belongs to.
        collector: &'static str,
    },
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
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The host lacks the source (missing file, kernel feature, permission). Not a bug.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The source exists but reading it failed.
    #[error("failed: {0}")]
    Failed(#[from] Failure),
}

/// How reading a source that exists failed; each names the file, map or meter. The inner
/// error's text is part of the message (one line in the log and the collector's state), so it
/// is not repeated as a `source`.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Reading a file of the host tree.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Walking the cgroup tree.
    #[error("walking {}: {error}", root.display())]
    Walk {
        /// The cgroup root.
        root: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// `perf_event_open` for a container's cgroup.
    #[error("perf_event_open for {}: {error}", cgroup.display())]
    PerfOpen {
        /// The cgroup directory.
        cgroup: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Reading an open perf event group.
    #[error("reading perf counters: {0}")]
    PerfRead(std::io::Error),
    /// Two meter channels with one name would be one series.
    #[error("two meter channels are named {name:?}; give each --meter a name in the config file")]
    DuplicateMeter {
        /// The name.
        name: String,
    },
    /// The thread that reads a meter could not be started.
    #[error("meter thread: {0}")]
    MeterThread(std::io::Error),
    /// A BPF map could not be read or pruned (boxed: aya's errors are large, and every
    /// collector's result carries this type).
    #[error(transparent)]
    Bpf(Box<crate::bpf::MapError>),
}

impl From<crate::bpf::MapError> for Failure {
    fn from(e: crate::bpf::MapError) -> Self {
        Failure::Bpf(Box::new(e))
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
            _ => Failure::Io {
                path: path.to_path_buf(),
                error: err,
            }
            .into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_read_names_the_file_and_a_missing_one_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        // Reading a directory fails with EISDIR: the source is there but unreadable.
        let e = CollectError::from_io(dir.path(), std::fs::read(dir.path()).unwrap_err());
        assert!(
            matches!(&e, CollectError::Failed(Failure::Io { path, .. }) if path == dir.path()),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("failed: {}: ", dir.path().display())),
            "{e}"
        );
        let missing = dir.path().join("absent");
        let e = CollectError::from_io(&missing, std::fs::read(&missing).unwrap_err());
        assert!(
            matches!(&e, CollectError::Unavailable(r) if r.contains("absent")),
            "{e}"
        );
    }

    #[test]
    fn option_errors_name_the_flag() {
        let zero = ebpf::EbpfOptions {
            max_processes: Some(0),
            ..Default::default()
        };
        let e = zero.validate(&["ebpf"]).unwrap_err();
        assert!(matches!(e, OptionsError::TooSmall { min: 1, .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "--collector.ebpf.max-processes must be at least 1"
        );
        let orphan = ebpf::EbpfOptions {
            per_process: true,
            ..Default::default()
        };
        let e = orphan.validate(&["cpu"]).unwrap_err();
        assert!(
            matches!(
                e,
                OptionsError::NeedsCollector {
                    collector: "ebpf",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("--collector.ebpf.per-process"),
            "{e}"
        );
    }
}
