//! Flags and the optional TOML file, merged into one validated [`Config`].
//!
//! Flags follow node_exporter's style (`--web.listen-address`, `--path.procfs`,
//! `--collector.<name>` / `--no-collector.<name>`). A flag wins over the file; the file wins over
//! the default. Unknown file keys and unknown collector names are errors, not warnings: a typo
//! in a DaemonSet must fail at start, not silently run with defaults.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use greenpipe_common::listen::{parse_listen_address, ListenAddressError};
use serde::Deserialize;

use crate::collector::meter::options::{MeterFile, MeterFlags, MeterOptions, MeterOptionsError};
use crate::collector::{self, REGISTRY};
use crate::paths::Paths;
use crate::push::{PushConfig, PushFile, PushFlags, PushOptionsError};

/// Command-line flags as parsed (before merging with the file).
#[derive(Debug, Parser)]
#[command(
    name = "greenpipe-exporter",
    version,
    about = "Per-node, per-container and per-process resource metrics and power-meter readings for Prometheus"
)]
pub struct Cli {
    /// Address to listen on for the web interface and telemetry [default: :9910].
    #[arg(long = "web.listen-address")]
    pub listen_address: Option<String>,
    /// Path under which to expose metrics [default: /metrics].
    #[arg(long = "web.telemetry-path")]
    pub telemetry_path: Option<String>,
    /// exporter-toolkit web config (TLS, client certificates, basic auth; YAML).
    #[arg(long = "web.config.file")]
    pub web_config_file: Option<PathBuf>,
    /// procfs mount point [default: /proc].
    #[arg(long = "path.procfs")]
    pub procfs: Option<PathBuf>,
    /// sysfs mount point [default: /sys].
    #[arg(long = "path.sysfs", global = true)]
    pub sysfs: Option<PathBuf>,
    /// cgroup filesystem mount point [default: /sys/fs/cgroup].
    #[arg(long = "path.cgroupfs")]
    pub cgroupfs: Option<PathBuf>,
    /// Host root filesystem, for host files outside /proc and /sys (a Jetson's
    /// /etc/nvpmodel.conf) [default: /].
    #[arg(long = "path.rootfs")]
    pub rootfs: Option<PathBuf>,
    /// Value of the `node` label [default: $NODE_NAME, then the hostname].
    #[arg(long = "node-name")]
    pub node_name: Option<String>,
    /// Sampling interval, e.g. `1s`, `500ms` [default: 1s].
    #[arg(long = "collection.interval")]
    pub interval: Option<String>,
    /// Every collector's own options (`--collector.<name>.<option>`), declared in its module.
    #[command(flatten)]
    pub collector_options: collector::Options,
    /// Optional TOML configuration file.
    #[arg(long = "config.file", global = true)]
    pub config_file: Option<PathBuf>,
    /// Log filter (`error`, `warn`, `info`, `debug`, or a tracing filter expression).
    #[arg(long = "log.level", default_value = "info", global = true)]
    pub log_level: String,
    /// `--meter`, `--meter.timeout`: the meter collector's, declared with it.
    #[command(flatten)]
    pub meter: MeterFlags,
    /// `--push.*`: remote write of every sample (edge push), declared with it.
    #[command(flatten)]
    pub push: PushFlags,
    /// What to do; without a subcommand the exporter runs.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum Command {
    /// List the power meters found on this machine and why each other kind is unavailable.
    Meters,
    /// Name the board (device tree model, cpuinfo) and the bundled profile that fits it.
    Board,
}

/// The TOML configuration file. Every key is optional; unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[web]` section.
    #[serde(default)]
    pub web: WebFile,
    /// Value of the `node` label.
    pub node_name: Option<String>,
    /// Sampling interval, e.g. `"1s"`.
    pub collection_interval: Option<String>,
    /// `[paths]` section.
    #[serde(default)]
    pub paths: PathsFile,
    /// `[collectors]`: collector name = true/false.
    #[serde(default)]
    pub collectors: BTreeMap<String, bool>,
    /// Every collector's own section (`[process]`, `[ebpf]`, ...); filled from the sections
    /// named in [`collector::Options::SECTIONS`], see [`FileConfig::parse`].
    #[serde(skip)]
    pub collector_options: collector::Options,
    /// `[[meters]]`: power meters to read.
    #[serde(default)]
    pub meters: Vec<MeterFile>,
    /// Longest wait for a meter reading per tick, e.g. `"500ms"`.
    pub meter_timeout: Option<String>,
    /// `[push]`: remote write of every sample.
    #[serde(default)]
    pub push: PushFile,
}

/// `[web]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFile {
    /// Listen address.
    pub listen_address: Option<String>,
    /// Telemetry path.
    pub telemetry_path: Option<String>,
    /// exporter-toolkit web config file.
    pub config_file: Option<PathBuf>,
}

/// `[paths]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathsFile {
    /// procfs root.
    pub procfs: Option<PathBuf>,
    /// sysfs root.
    pub sysfs: Option<PathBuf>,
    /// cgroupfs root.
    pub cgroupfs: Option<PathBuf>,
    /// Host root filesystem.
    pub rootfs: Option<PathBuf>,
}

/// Why the command line or the config file was refused. Every message names the flag or key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A malformed command line, or `--help`/`--version`: [`clap::Error::exit`] prints it
    /// where and with the status clap means.
    #[error(transparent)]
    Args(#[from] clap::Error),
    #[error("--collector.{0} and --no-collector.{0} both given")]
    BothToggles(&'static str),
    #[error("reading config file {}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}", path.display())]
    ParseFile {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(transparent)]
    Listen(#[from] ListenAddressError),
    #[error("--web.telemetry-path must start with / and not be / (got {0:?})")]
    TelemetryPath(String),
    #[error("node name is empty: set --node-name or NODE_NAME")]
    EmptyNodeName,
    #[error("cannot read hostname; set --node-name")]
    NoHostname,
    #[error("{flag} {text:?}")]
    Duration {
        flag: &'static str,
        text: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("--collection.interval must be at least 100ms (got {0})")]
    IntervalTooShort(String),
    #[error(transparent)]
    Meter(#[from] MeterOptionsError),
    #[error("config file [collectors]: unknown collector {name:?} (known: {known})")]
    UnknownCollector { name: String, known: String },
    #[error(transparent)]
    Options(#[from] collector::OptionsError),
    #[error(transparent)]
    Push(#[from] PushOptionsError),
}

impl FileConfig {
    /// Parses the file. The collectors' sections go to their own options types, the rest to
    /// [`FileConfig`]; unknown keys in either are errors.
    pub fn parse(text: &str) -> Result<FileConfig, toml::de::Error> {
        let mut table: toml::Table = toml::from_str(text)?;
        let mut sections = toml::Table::new();
        for name in collector::Options::SECTIONS {
            if let Some(section) = table.remove(*name) {
                sections.insert((*name).to_string(), section);
            }
        }
        let mut file: FileConfig = toml::Value::Table(table).try_into()?;
        file.collector_options = toml::Value::Table(sections).try_into()?;
        Ok(file)
    }
}

/// The validated configuration the exporter runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// Path of the metrics endpoint.
    pub telemetry_path: String,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    /// Value of the `node` label.
    pub node_name: String,
    /// Sampling interval.
    pub interval: Duration,
    /// Host tree roots.
    pub paths: Paths,
    /// Enabled collectors, in registry order.
    pub collectors: Vec<&'static str>,
    /// Collectors the user enabled explicitly: a failure to build one of these stops start-up.
    pub explicit: BTreeSet<&'static str>,
    /// Every collector's own options, flags merged over the file.
    pub options: collector::Options,
    /// Log filter.
    pub log_level: String,
    /// Power meters to read and how long a tick waits for them.
    pub meter: MeterOptions,
    /// Remote write of every sample (`--push.remote-write-url`), if on.
    pub push: Option<PushConfig>,
    /// Subcommand given, if any.
    pub command: Option<Command>,
}

impl Config {
    /// A configuration with every default, reading the given trees (used by tests and benches).
    pub fn for_paths(paths: Paths, node_name: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().expect("valid literal"),
            telemetry_path: "/metrics".into(),
            web_config_file: None,
            node_name: node_name.into(),
            interval: Duration::from_secs(1),
            paths,
            collectors: REGISTRY
                .iter()
                .filter(|s| s.default_enabled)
                .map(|s| s.name)
                .collect(),
            explicit: BTreeSet::new(),
            options: collector::Options::default(),
            log_level: "info".into(),
            meter: MeterOptions::default(),
            push: None,
            command: None,
        }
    }

    /// What the collectors are built from.
    pub fn context(&self) -> collector::Context<'_> {
        collector::Context {
            paths: &self.paths,
            node_name: &self.node_name,
            interval: self.interval,
            options: &self.options,
            shared: collector::Shared::of(&self.options),
            meter: &self.meter,
        }
    }

    /// Parses the process's arguments (and the file they name).
    pub fn from_args() -> Result<Config, ConfigError> {
        Self::parse_from(std::env::args_os())
    }

    /// Parses the given arguments (first = program name).
    pub fn parse_from<I, T>(args: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut command = Cli::command();
        for spec in REGISTRY {
            command = command
                .arg(
                    clap::Arg::new(format!("collector.{}", spec.name))
                        .long(format!("collector.{}", spec.name))
                        .action(ArgAction::SetTrue)
                        .help(format!("Enable the {} collector: {}", spec.name, spec.help)),
                )
                .arg(
                    clap::Arg::new(format!("no-collector.{}", spec.name))
                        .long(format!("no-collector.{}", spec.name))
                        .action(ArgAction::SetTrue)
                        .help(format!("Disable the {} collector", spec.name)),
                );
        }
        let matches = command.try_get_matches_from(args)?;
        let cli = Cli::from_arg_matches(&matches)?;
        let mut toggles = BTreeMap::new();
        for spec in REGISTRY {
            if matches.get_flag(&format!("collector.{}", spec.name)) {
                toggles.insert(spec.name, true);
            }
            if matches.get_flag(&format!("no-collector.{}", spec.name)) {
                if toggles.contains_key(spec.name) {
                    return Err(ConfigError::BothToggles(spec.name));
                }
                toggles.insert(spec.name, false);
            }
        }
        let file = match &cli.config_file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
                        path: path.clone(),
                        source,
                    })?;
                FileConfig::parse(&text).map_err(|source| ConfigError::ParseFile {
                    path: path.clone(),
                    source,
                })?
            }
            None => FileConfig::default(),
        };
        merge(cli, file, toggles)
    }
}

fn merge(
    cli: Cli,
    file: FileConfig,
    flag_toggles: BTreeMap<&'static str, bool>,
) -> Result<Config, ConfigError> {
    let listen_text = cli
        .listen_address
        .or(file.web.listen_address)
        .unwrap_or_else(|| ":9910".into());
    let listen = parse_listen_address(&listen_text)?;
    let telemetry_path = cli
        .telemetry_path
        .or(file.web.telemetry_path)
        .unwrap_or_else(|| "/metrics".into());
    if !telemetry_path.starts_with('/') || telemetry_path == "/" {
        return Err(ConfigError::TelemetryPath(telemetry_path));
    }
    let node_name = match cli.node_name.or(file.node_name) {
        Some(n) => n,
        None => default_node_name()?,
    };
    if node_name.is_empty() {
        return Err(ConfigError::EmptyNodeName);
    }
    let interval_text = cli
        .interval
        .or(file.collection_interval)
        .unwrap_or_else(|| "1s".into());
    let interval = duration("--collection.interval", &interval_text)?;
    if interval < Duration::from_millis(100) {
        return Err(ConfigError::IntervalTooShort(interval_text));
    }
    let meter_timeout = match cli.meter.timeout.or(file.meter_timeout) {
        Some(text) => Some(duration("--meter.timeout", &text)?),
        None => None,
    };
    let meter = MeterOptions::resolve(&cli.meter.meters, file.meters, meter_timeout, interval)?;
    let defaults = Paths::default();
    let paths = Paths {
        procfs: cli.procfs.or(file.paths.procfs).unwrap_or(defaults.procfs),
        sysfs: cli.sysfs.or(file.paths.sysfs).unwrap_or(defaults.sysfs),
        cgroupfs: cli
            .cgroupfs
            .or(file.paths.cgroupfs)
            .unwrap_or(defaults.cgroupfs),
        rootfs: cli.rootfs.or(file.paths.rootfs).unwrap_or(defaults.rootfs),
    };
    let mut toggles: BTreeMap<&'static str, bool> = BTreeMap::new();
    for (name, on) in &file.collectors {
        let spec = collector::spec(name).ok_or_else(|| ConfigError::UnknownCollector {
            name: name.clone(),
            known: known_collectors(),
        })?;
        toggles.insert(spec.name, *on);
    }
    toggles.extend(flag_toggles);
    let collectors: Vec<&'static str> = REGISTRY
        .iter()
        .filter(|s| toggles.get(s.name).copied().unwrap_or(s.default_enabled))
        .map(|s| s.name)
        .collect();
    let push = PushConfig::resolve(cli.push, file.push, interval, &node_name)?;
    let options = cli.collector_options.merge(file.collector_options);
    options.validate(&collectors)?;
    let explicit = toggles
        .iter()
        .filter(|(_, on)| **on)
        .map(|(name, _)| *name)
        .collect();
    Ok(Config {
        listen,
        telemetry_path,
        web_config_file: cli.web_config_file.or(file.web.config_file),
        node_name,
        interval,
        paths,
        collectors,
        explicit,
        options,
        log_level: cli.log_level,
        meter,
        push,
        command: cli.command,
    })
}

fn known_collectors() -> String {
    REGISTRY
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A duration flag's value.
fn duration(flag: &'static str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text).map_err(|source| ConfigError::Duration {
        flag,
        text: text.to_string(),
        source,
    })
}

fn default_node_name() -> Result<String, ConfigError> {
    if let Ok(n) = std::env::var("NODE_NAME") {
        if !n.is_empty() {
            return Ok(n);
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(ConfigError::NoHostname);
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, ConfigError> {
        let mut all = vec!["greenpipe-exporter", "--node-name", "n1"];
        all.extend_from_slice(args);
        Config::parse_from(all)
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.listen, "0.0.0.0:9910".parse().unwrap());
        assert_eq!(c.telemetry_path, "/metrics");
        assert_eq!(c.interval, Duration::from_secs(1));
        assert_eq!(c.paths, Paths::default());
        assert!(c.collectors.contains(&"cpu"));
    }

    #[test]
    fn collector_toggles() {
        let c = parse(&["--no-collector.cpu"]).unwrap();
        assert!(!c.collectors.contains(&"cpu"));
        assert!(parse(&["--collector.cpu", "--no-collector.cpu"]).is_err());
        assert!(parse(&["--collector.nosuch"]).is_err());
    }

    #[test]
    fn file_values_and_flag_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "collection_interval = \"2s\"\n[web]\nlisten_address = \"127.0.0.1:1234\"\n\
             [paths]\nprocfs = \"/fixture/proc\"\n[collectors]\ncpu = false\n",
        )
        .unwrap();
        let c = parse(&[
            "--config.file",
            path.to_str().unwrap(),
            "--collection.interval",
            "3s",
        ])
        .unwrap();
        assert_eq!(c.interval, Duration::from_secs(3));
        assert_eq!(c.listen, "127.0.0.1:1234".parse().unwrap());
        assert_eq!(c.paths.procfs, PathBuf::from("/fixture/proc"));
        assert!(!c.collectors.contains(&"cpu"));
    }

    #[test]
    fn unknown_file_keys_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "colection_interval = \"2s\"\n").unwrap();
        let err = parse(&["--config.file", path.to_str().unwrap()]).unwrap_err();
        assert!(
            greenpipe_common::error_chain(&err).contains("colection_interval"),
            "{}",
            greenpipe_common::error_chain(&err)
        );
        std::fs::write(&path, "[collectors]\nnosuch = true\n").unwrap();
        let err = parse(&["--config.file", path.to_str().unwrap()]).unwrap_err();
        assert!(
            greenpipe_common::error_chain(&err).contains("unknown collector"),
            "{}",
            greenpipe_common::error_chain(&err)
        );
    }

    #[test]
    fn ebpf_per_process_from_flags_or_file() {
        let c = parse(&[]).unwrap();
        assert!(!c.options.ebpf.per_process, "off by default (cardinality)");
        assert_eq!(
            c.options.ebpf.max_processes(),
            crate::bpf::DEFAULT_MAX_PROCESSES
        );
        let c = parse(&[
            "--collector.ebpf.per-process",
            "--collector.ebpf.max-processes",
            "100",
        ])
        .unwrap();
        assert!(c.options.ebpf.per_process);
        assert_eq!(c.options.ebpf.max_processes(), 100);
        assert!(parse(&["--collector.ebpf.max-processes", "0"]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[ebpf]\nper_process = true\nmax_processes = 64\n").unwrap();
        let c = parse(&["--config.file", path.to_str().unwrap()]).unwrap();
        assert!(c.options.ebpf.per_process);
        assert_eq!(c.options.ebpf.max_processes(), 64);
        std::fs::write(&path, "[ebpf]\nper_procs = true\n").unwrap();
        let err = parse(&["--config.file", path.to_str().unwrap()]).unwrap_err();
        assert!(
            greenpipe_common::error_chain(&err).contains("per_procs"),
            "{}",
            greenpipe_common::error_chain(&err)
        );
        let err = parse(&["--collector.ebpf.per-process", "--no-collector.ebpf"]).unwrap_err();
        assert!(
            greenpipe_common::error_chain(&err).contains("needs the ebpf collector"),
            "{}",
            greenpipe_common::error_chain(&err)
        );
    }

    #[test]
    fn meters_from_flags_or_file() {
        let c = parse(&["--meter", "um25c:/dev/rfcomm0", "--meter", "rapl:auto"]).unwrap();
        assert_eq!(c.meter.specs.len(), 2);
        assert_eq!(c.meter.specs[0].to_string(), "um25c:/dev/rfcomm0");
        assert_eq!(
            c.meter.timeout,
            crate::collector::meter::options::DEFAULT_TIMEOUT
        );
        assert!(parse(&["--meter", "um25c"]).is_err());
        assert!(
            parse(&["--meter.timeout", "1s"]).is_err(),
            "not below the interval"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "meter_timeout = \"300ms\"\n[[meters]]\nkind = \"shelly\"\ntarget = \"http://plug\"\nname = \"rack\"\n",
        )
        .unwrap();
        let c = parse(&["--config.file", path.to_str().unwrap()]).unwrap();
        assert_eq!(c.meter.specs[0].name.as_deref(), Some("rack"));
        assert_eq!(c.meter.timeout, Duration::from_millis(300));
        // A flag replaces the file's list.
        let c = parse(&[
            "--config.file",
            path.to_str().unwrap(),
            "--meter",
            "hwmon:auto",
        ])
        .unwrap();
        assert_eq!(c.meter.specs.len(), 1);
        assert_eq!(c.meter.specs[0].to_string(), "hwmon:auto");
        std::fs::write(
            &path,
            "[[meters]]\nkind = \"shelly\"\ntarget = \"http://p\"\nport = 1\n",
        )
        .unwrap();
        let err = parse(&["--config.file", path.to_str().unwrap()]).unwrap_err();
        assert!(
            greenpipe_common::error_chain(&err).contains("port"),
            "{}",
            greenpipe_common::error_chain(&err)
        );
    }

    #[test]
    fn meters_subcommand_keeps_global_flags() {
        let c = parse(&["meters", "--meter", "hwmon:auto"]).unwrap();
        assert_eq!(c.command, Some(Command::Meters));
        assert_eq!(c.meter.specs.len(), 1);
        assert_eq!(parse(&[]).unwrap().command, None);
        assert_eq!(parse(&["board"]).unwrap().command, Some(Command::Board));
    }

    #[test]
    fn push_from_flags_or_file() {
        assert!(parse(&[]).unwrap().push.is_none(), "off by default");
        let c = parse(&[
            "--push.remote-write-url",
            "http://receiver:9090/api/v1/write",
            "--push.header",
            "X-Scope-OrgID=s3cret",
            "--push.buffer.dir",
            "/tmp/push",
            "--push.buffer.max-age",
            "20s",
            "--push.buffer.max-bytes",
            "64MiB",
        ])
        .unwrap();
        let push = c.push.unwrap();
        assert_eq!(push.endpoint.url, "http://receiver:9090/api/v1/write");
        assert_eq!(
            push.endpoint.headers.names().collect::<Vec<_>>(),
            ["x-scope-orgid"]
        );
        assert_eq!(
            (push.job.as_str(), push.instance.as_str()),
            ("greenpipe-exporter", "n1")
        );
        assert_eq!(push.ticks_per_push, 1);
        assert_eq!(push.buffer.max_age, Duration::from_secs(20));
        assert_eq!(push.buffer.max_bytes, 64 << 20);
        assert!(
            !format!("{push:?}").contains("s3cret"),
            "header values are never shown"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "collection_interval = \"500ms\"\n[push]\nremote_write_url = \"https://r/api/v1/write\"\n\
             interval = \"2s\"\njob = \"edge\"\ninstance = \"pi-7:9910\"\n\
             header = { \"THANOS-TENANT\" = \"t\" }\n[push.buffer]\ndir = \"/var/tmp/p\"\nmax_bytes = 1048576\n",
        )
        .unwrap();
        let push = parse(&["--config.file", path.to_str().unwrap()])
            .unwrap()
            .push
            .unwrap();
        assert_eq!(push.ticks_per_push, 4);
        assert_eq!(
            (push.job.as_str(), push.instance.as_str()),
            ("edge", "pi-7:9910")
        );
        assert_eq!(push.buffer.dir, PathBuf::from("/var/tmp/p"));
        assert_eq!(push.buffer.max_bytes, 1 << 20);
        assert_eq!(push.buffer.max_age, Duration::from_secs(3600));
        // A flag wins over the file.
        let push = parse(&[
            "--config.file",
            path.to_str().unwrap(),
            "--push.job",
            "flag",
        ])
        .unwrap()
        .push
        .unwrap();
        assert_eq!(push.job, "flag");
    }

    #[test]
    fn bad_push_options_are_errors_naming_them() {
        let url = ["--push.remote-write-url", "http://r/api/v1/write"];
        for (args, needle) in [
            (
                vec!["--push.remote-write-url", "not a url"],
                "push URL \"not a url\"",
            ),
            (
                vec!["--push.remote-write-url", "ftp://r/"],
                "must be http:// or https://",
            ),
            (
                vec!["--push.job", "j"],
                "--push.job is set but --push.remote-write-url is not",
            ),
            (
                vec!["--push.buffer.max-bytes", "3"],
                "--push.buffer.max-bytes is set but --push.remote-write-url is not",
            ),
            (
                [&url[..], &["--push.interval", "1500ms"]].concat(),
                "--push.interval",
            ),
            (
                [&url[..], &["--push.buffer.max-age", "soon"]].concat(),
                "--push.buffer.max-age",
            ),
            (
                [&url[..], &["--push.buffer.max-bytes", "lots"]].concat(),
                "--push.buffer.max-bytes",
            ),
            (
                [&url[..], &["--push.header", "X-Key"]].concat(),
                "--push.header: argument 1",
            ),
            (
                [&url[..], &["--push.instance", ""]].concat(),
                "--push.instance: must not be empty",
            ),
        ] {
            let err = parse(&args).unwrap_err();
            let text = greenpipe_common::error_chain(&err);
            assert!(text.contains(needle), "{args:?}: {text}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[push]\nremote_write_url = \"http://r\"\nmax_age = \"1h\"\n",
        )
        .unwrap();
        let text = greenpipe_common::error_chain(
            &parse(&["--config.file", path.to_str().unwrap()]).unwrap_err(),
        );
        assert!(text.contains("unknown field `max_age`"), "{text}");
        std::fs::write(&path, "[push.buffer]\nmaxbytes = 1\n").unwrap();
        let text = greenpipe_common::error_chain(
            &parse(&["--config.file", path.to_str().unwrap()]).unwrap_err(),
        );
        assert!(text.contains("unknown field `maxbytes`"), "{text}");
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(parse(&["--collection.interval", "soon"]).is_err());
        assert!(parse(&["--collection.interval", "1ms"]).is_err());
        assert!(parse(&["--web.telemetry-path", "metrics"]).is_err());
        assert!(parse(&["--web.listen-address", "nohost:port"]).is_err());
    }
}
