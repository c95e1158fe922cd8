//! A Jetson's integrated GPU, from sysfs, nvpmodel's files and the processes' open files.
//!
//! - **The GPU** is the devfreq device whose device-tree node is a Tegra GPU, found as
//!   jetson-stats finds it (`jtop/core/gpu.py`, `find_igpu`): every `/sys/class/devfreq/*` whose
//!   `device/of_node/name` is `gpu`, `gp10b`, `gv11b` or `ga10b` (Nano `57000000.gpu`, TX2
//!   `17000000.gp10b`, Xavier `17000000.gv11b`, Orin `17000000.ga10b` or `17000000.gpu`); the
//!   `compatible` of that node names the GPU (`nvidia,tegra210-gm20b`, `nvidia,gv11b`,
//!   `nvidia,ga10b`) and becomes the `gpu_model` (`gm20b`, `gv11b`, `ga10b`).
//! - **Utilization**: `load` of the GPU device (per mille, 0..=1000; jtop reads
//!   `<devfreq>/device/load` and divides by 10 for a percentage), else the fixed places older
//!   tools read (`/sys/devices/gpu.0/load` on L4T R32, `/sys/devices/platform/gpu.0/load`,
//!   `/sys/devices/platform/bus@0/17000000.gpu/load` on Orin).
//! - **Frequency**: the devfreq device's `cur_freq`, in Hz.
//! - **Power mode**: nvpmodel writes the mode it set to `/var/lib/nvpmodel/status`
//!   (`pmode:0002`); `/etc/nvpmodel.conf` names each mode (`< POWER_MODEL ID=2 NAME=MAXN_SUPER >`;
//!   lines starting with `#` are comments, and the file's own header comment has the same shape).
//!   Both are host files, read under `--path.rootfs`. The value is `ID:NAME` (`2:MAXN_SUPER`).
//! - **Holders**: the processes that hold a GPU address space or channel open; see
//!   [`DEVICE_NODES`] for which nodes and why, and [`Holders`] for how often they are looked for.
//!
//! Absent files mean "not a Jetson GPU host" at [`open`] (`Unavailable`); a value that is there
//! but malformed (a load above 1000, text where a number should be) refuses the sample with an
//! error naming the file and what it held, so it is counted as a failed run, never exported as a
//! zero.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{DeviceSample, Sample, Source, Users};
use crate::collector::{CollectError, Context, Failure};
use crate::paths::Paths;

/// `gpu` label of the integrated GPU.
pub const GPU_LABEL: &str = "gpu";

/// Device-tree node names of Tegra GPUs (jetson-stats' `find_igpu` list).
const GPU_NODE_NAMES: &[&str] = &["gpu", "gp10b", "gv11b", "ga10b"];

/// `compatible` entries of Tegra GPUs, for a node whose name is not in [`GPU_NODE_NAMES`].
const GPU_COMPATIBLE: &[&str] = &["gm20b", "gp10b", "gv11b", "ga10b"];

/// `load` files older tools read, relative to sysfs, tried after `<devfreq>/device/load`.
const LOAD_FALLBACKS: &[&str] = &[
    "devices/gpu.0/load",
    "devices/platform/gpu.0/load",
    "devices/platform/bus@0/17000000.gpu/load",
];

/// nvpmodel's state and configuration, relative to the host root.
const NVPMODEL_STATUS: &str = "var/lib/nvpmodel/status";
const NVPMODEL_CONF: &str = "etc/nvpmodel.conf";

/// The device nodes whose holders count as using the GPU, as `/proc/PID/fd/*` links name them.
///
/// nvgpu (the Jetson GPU driver; `include/uapi/linux/nvgpu.h`) exposes one node per role:
/// `ctrl` (queries: opened by anything that asks what the GPU is), `as` (a GPU address space),
/// `channel` and `tsg` (work submission: a channel, and the time-slice group channels are bound
/// to), `dbg`/`prof` (debuggers, profilers), `power`. L4T R32 names them
/// `/dev/nvhost-{ctrl-,as-,,tsg-}gpu`, later releases add `/dev/nvgpu/igpu0/{ctrl,as,channel,tsg}`
/// (both lists are what container runtimes pass into GPU containers). A CUDA, EGL or Vulkan
/// context holds an address space and its channels for its whole life; a process that only
/// queries holds `ctrl`. So the address-space and channel nodes mark a process that can run GPU
/// work, and `ctrl`, `dbg`, `prof` and `power` do not. `/dev/nvmap` is left out: it is the
/// memory allocator of the camera, video codecs and display as much as of the GPU.
pub const DEVICE_NODES: &[&str] = &[
    "/dev/nvhost-as-gpu",
    "/dev/nvhost-gpu",
    "/dev/nvhost-tsg-gpu",
    "/dev/nvgpu/igpu0/as",
    "/dev/nvgpu/igpu0/channel",
    "/dev/nvgpu/igpu0/tsg",
];

/// A full rescan of every process's open files happens at least this often (in ticks), so a
/// process that opens the GPU after it started is found within this many ticks.
pub const RESCAN_TICKS: u32 = 10;

/// Opens the Jetson GPU source, or says why this host has none.
pub fn open(ctx: &Context<'_>) -> Result<Box<dyn Source>, CollectError> {
    let source = JetsonGpu::open(ctx.paths, DEVICE_NODES.iter().map(PathBuf::from).collect())?;
    Ok(Box::new(source))
}

/// The Jetson GPU source.
#[derive(Debug)]
pub struct JetsonGpu {
    model: String,
    load: PathBuf,
    cur_freq: Option<PathBuf>,
    status: PathBuf,
    conf: PathBuf,
    /// Mode names of nvpmodel.conf, re-read when the status names a mode it lacks.
    mode_names: BTreeMap<u32, String>,
    /// Mode ids whose name is missing, already logged.
    unnamed_logged: BTreeSet<u32>,
    holders: Holders,
}

/// Reads a small sysfs or host file; `None` when it is absent.
fn read_optional(path: &Path) -> Result<Option<String>, CollectError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CollectError::from_io(path, e)),
    }
}

/// A device-tree string property: NUL-separated strings.
fn dt_strings(text: &str) -> Vec<&str> {
    text.split('\0')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The integrated GPU among the devfreq devices: `(devfreq dir, model)`.
fn find_gpu(paths: &Paths) -> Result<Option<(PathBuf, String)>, CollectError> {
    let root = paths.sys("class/devfreq");
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CollectError::from_io(&root, e)),
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let node = dir.join("device/of_node");
        let name = read_optional(&node.join("name"))?.unwrap_or_default();
        let compatible = read_optional(&node.join("compatible"))?.unwrap_or_default();
        let name = dt_strings(&name).first().copied().unwrap_or("").to_string();
        let compatible = dt_strings(&compatible);
        // `nvidia,tegra210-gm20b` -> `gm20b`, `nvidia,ga10b` -> `ga10b`.
        let chip = compatible.iter().find_map(|c| {
            let bare = c.rsplit(',').next()?;
            let bare = bare.rsplit('-').next()?;
            GPU_COMPATIBLE.contains(&bare).then(|| bare.to_string())
        });
        if GPU_NODE_NAMES.contains(&name.as_str()) || chip.is_some() {
            return Ok(Some((dir, chip.unwrap_or(name))));
        }
    }
    Ok(None)
}

impl JetsonGpu {
    /// Finds the GPU under `paths`; `device_nodes` are the nodes whose holders use it.
    pub fn open(paths: &Paths, device_nodes: Vec<PathBuf>) -> Result<JetsonGpu, CollectError> {
        let Some((devfreq, model)) = find_gpu(paths)? else {
            return Err(CollectError::Unavailable(format!(
                "no Jetson integrated GPU: no {}/*/device/of_node names a Tegra GPU ({})",
                paths.sys("class/devfreq").display(),
                GPU_NODE_NAMES.join(", ")
            )));
        };
        let mut candidates = vec![devfreq.join("device/load")];
        candidates.extend(LOAD_FALLBACKS.iter().map(|rel| paths.sys(rel)));
        let Some(load) = candidates.iter().find(|p| p.is_file()).cloned() else {
            return Err(CollectError::Unavailable(format!(
                "Jetson GPU {model} at {} has no load file ({})",
                devfreq.display(),
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let cur_freq = Some(devfreq.join("cur_freq")).filter(|p| p.is_file());
        if cur_freq.is_none() {
            tracing::info!(devfreq = %devfreq.display(), "Jetson GPU has no cur_freq: no frequency");
        }
        let status = paths.root(NVPMODEL_STATUS);
        let conf = paths.root(NVPMODEL_CONF);
        if !status.is_file() {
            tracing::info!(file = %status.display(), "no nvpmodel status: no power mode");
        }
        Ok(JetsonGpu {
            model,
            load,
            cur_freq,
            status,
            conf,
            mode_names: BTreeMap::new(),
            unnamed_logged: BTreeSet::new(),
            holders: Holders::new(paths.procfs.clone(), device_nodes),
        })
    }

    /// The GPU's model (`gm20b`, `gv11b`, `ga10b`, or the node name).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The power mode as `ID:NAME`; `None` without nvpmodel, or where the conf does not name
    /// the mode (logged once per mode).
    fn power_mode(&mut self) -> Result<Option<String>, CollectError> {
        let Some(text) = read_optional(&self.status)? else {
            return Ok(None);
        };
        let id = parse_status(&text).ok_or_else(|| malformed(&self.status, &text, "pmode:<id>"))?;
        if !self.mode_names.contains_key(&id) {
            if let Some(conf) = read_optional(&self.conf)? {
                let (names, bad) = parse_conf(&conf);
                for line in bad {
                    tracing::warn!(file = %self.conf.display(), line = %line, "nvpmodel.conf: POWER_MODEL line without ID and NAME skipped");
                }
                self.mode_names = names;
            }
        }
        match self.mode_names.get(&id) {
            Some(name) => Ok(Some(format!("{id}:{name}"))),
            None => {
                if self.unnamed_logged.insert(id) {
                    tracing::warn!(mode = id, conf = %self.conf.display(), "nvpmodel mode has no POWER_MODEL line: no power mode exported");
                }
                Ok(None)
            }
        }
    }
}

/// A file whose content is not what it should be: a failed run naming the file and the value.
fn malformed(path: &Path, text: &str, expected: &str) -> CollectError {
    Failure::Io {
        path: path.to_path_buf(),
        error: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("expected {expected}, read {:?}", text.trim()),
        ),
    }
    .into()
}

/// Reads a file that must be there on every tick (it was at [`open`]).
fn read_required(path: &Path) -> Result<String, CollectError> {
    fs::read_to_string(path).map_err(|error| {
        Failure::Io {
            path: path.to_path_buf(),
            error,
        }
        .into()
    })
}

/// `load` (per mille) as a fraction; `None` when it is not an integer in 0..=1000.
pub fn parse_load(text: &str) -> Option<f64> {
    let v: u32 = text.trim().parse().ok()?;
    (v <= 1000).then(|| f64::from(v) / 1000.0)
}

/// `cur_freq` (Hz); `None` when it is not an integer.
pub fn parse_hz(text: &str) -> Option<f64> {
    text.trim().parse::<u64>().ok().map(|hz| hz as f64)
}

/// The mode id of nvpmodel's status file (`pmode:0002`; other whitespace-separated fields, were a
/// release to add some, are passed over); `None` when it has no `pmode:<digits>`.
pub fn parse_status(text: &str) -> Option<u32> {
    text.split_whitespace()
        .find_map(|field| field.strip_prefix("pmode:"))
        .and_then(|id| id.parse().ok())
}

/// Mode names of nvpmodel.conf (`< POWER_MODEL ID=2 NAME=MAXN_SUPER >`), and the
/// `POWER_MODEL` lines that lack a numeric ID or a NAME. Comment lines (`#`) are skipped.
pub fn parse_conf(text: &str) -> (BTreeMap<u32, String>, Vec<String>) {
    let mut names = BTreeMap::new();
    let mut bad = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        let Some(body) = line.strip_prefix('<').and_then(|l| l.strip_suffix('>')) else {
            continue;
        };
        let mut fields = body.split_whitespace();
        if fields.next() != Some("POWER_MODEL") {
            continue;
        }
        let mut id = None;
        let mut name = None;
        for field in fields {
            if let Some(v) = field.strip_prefix("ID=") {
                id = v.parse::<u32>().ok();
            } else if let Some(v) = field.strip_prefix("NAME=") {
                name = Some(v.to_string()).filter(|n| !n.is_empty());
            }
        }
        match (id, name) {
            (Some(id), Some(name)) => {
                names.insert(id, name);
            }
            _ => bad.push(line.to_string()),
        }
    }
    (names, bad)
}

impl Source for JetsonGpu {
    fn sample(&mut self) -> Result<Sample, CollectError> {
        let text = read_required(&self.load)?;
        let utilization = parse_load(&text)
            .ok_or_else(|| malformed(&self.load, &text, "a load in per mille, 0..=1000"))?;
        let frequency = match &self.cur_freq {
            Some(path) => {
                let text = read_required(path)?;
                Some(parse_hz(&text).ok_or_else(|| malformed(path, &text, "a frequency in Hz"))?)
            }
            None => None,
        };
        let power_mode = self.power_mode()?;
        Ok(Sample {
            devices: vec![DeviceSample {
                gpu: GPU_LABEL.to_string(),
                model: self.model.clone(),
                uuid: String::new(),
                utilization_ratio: Some(utilization),
                memory_utilization_ratio: None,
                // The integrated GPU shares the system memory; nvmap's per-process accounting
                // is in debugfs (root only), so no figure here.
                memory_used_bytes: None,
                frequency_hertz: frequency,
            }],
            users: Users::Holders(self.holders.scan()),
            power_mode,
        })
    }
}

/// Which processes hold a GPU device node open.
///
/// Reading every process's `fd` directory and each link in it is the costly part of this source
/// (hundreds of processes, thousands of links on a loaded node: far more than the rest of a
/// Raspberry-Pi-class exporter's tick). So each tick lists only the PIDs (one `readdir` of
/// procfs) and reads the fds of the processes that appeared since the last tick; what a known
/// process holds is taken from the last full scan, which runs every [`RESCAN_TICKS`] ticks (a
/// process that opens the GPU after it started is found within that many ticks). A process that
/// exits is dropped on the tick it is gone.
#[derive(Debug)]
pub struct Holders {
    procfs: PathBuf,
    nodes: Vec<PathBuf>,
    /// Every live PID and whether it held a node at its last scan.
    known: BTreeMap<u32, bool>,
    ticks_since_full: u32,
    /// fd directories that could not be read (permission): logged once.
    denied_logged: bool,
}

impl Holders {
    /// Holders of `nodes` among the processes of `procfs`.
    pub fn new(procfs: PathBuf, nodes: Vec<PathBuf>) -> Holders {
        Holders {
            procfs,
            nodes,
            known: BTreeMap::new(),
            ticks_since_full: RESCAN_TICKS,
            denied_logged: false,
        }
    }

    /// The PIDs holding a node now, ascending.
    pub fn scan(&mut self) -> Vec<u32> {
        let pids: BTreeSet<u32> = match fs::read_dir(&self.procfs) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect(),
            Err(e) => {
                tracing::warn!(procfs = %self.procfs.display(), error = %e, "cannot list processes: no GPU holders");
                return Vec::new();
            }
        };
        let full = self.ticks_since_full >= RESCAN_TICKS;
        self.known.retain(|pid, _| pids.contains(pid));
        for &pid in &pids {
            if full || !self.known.contains_key(&pid) {
                let holds = self.holds(pid);
                self.known.insert(pid, holds);
            }
        }
        self.ticks_since_full = if full { 1 } else { self.ticks_since_full + 1 };
        self.known
            .iter()
            .filter(|(_, &holds)| holds)
            .map(|(&pid, _)| pid)
            .collect()
    }

    /// Whether `pid` has one of the nodes open.
    fn holds(&mut self, pid: u32) -> bool {
        let dir = self.procfs.join(pid.to_string()).join("fd");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                if e.kind() == io::ErrorKind::PermissionDenied && !self.denied_logged {
                    self.denied_logged = true;
                    tracing::warn!(dir = %dir.display(), "cannot read a process's open files (needs CAP_SYS_PTRACE or root): GPU holders are incomplete");
                }
                return false; // gone, or not ours to read
            }
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| fs::read_link(e.path()).ok())
            .any(|target| self.nodes.contains(&target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn paths(root: &Path) -> Paths {
        Paths {
            procfs: root.join("proc"),
            sysfs: root.join("sys"),
            cgroupfs: root.join("cgroup"),
            rootfs: root.to_path_buf(),
        }
    }

    /// A Jetson Orin Nano on L4T R36: devfreq `17000000.gpu` whose device (the GPU's platform
    /// device) has the load; nvpmodel's status and the Orin Nano Super's mode table (ids as on
    /// that board: 15W=0, 25W=1, MAXN_SUPER=2, 7W=3), with the conf's own header comment.
    fn orin_nano() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let dev = "sys/devices/platform/bus@0/17000000.gpu";
        write(r, &format!("{dev}/load"), "347\n");
        write(r, &format!("{dev}/of_node/name"), "gpu\0");
        write(r, &format!("{dev}/of_node/compatible"), "nvidia,ga10b\0");
        write(
            r,
            &format!("{dev}/devfreq/17000000.gpu/cur_freq"),
            "624750000\n",
        );
        fs::create_dir_all(r.join("sys/class/devfreq")).unwrap();
        std::os::unix::fs::symlink(
            r.join(format!("{dev}/devfreq/17000000.gpu")),
            r.join("sys/class/devfreq/17000000.gpu"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            r.join(dev),
            r.join(format!("{dev}/devfreq/17000000.gpu/device")),
        )
        .unwrap();
        // The EMC's devfreq is not the GPU.
        write(
            r,
            "sys/class/devfreq/2c00000.emc/device/of_node/name",
            "external-memory-controller\0",
        );
        write(r, "var/lib/nvpmodel/status", "pmode:0002\n");
        write(
            r,
            "etc/nvpmodel.conf",
            "# < POWER_MODEL ID=id_num NAME=mode_name >\n\
             < PARAM TYPE=FILE NAME=CPU_ONLINE >\n\
             < POWER_MODEL ID=0 NAME=15W >\n\
             CPU_ONLINE CORE_0 1\n\
             < POWER_MODEL ID=1 NAME=25W >\n\
             < POWER_MODEL ID=2 NAME=MAXN_SUPER >\n\
             < POWER_MODEL ID=3 NAME=7W >\n\
             < PM_CONFIG DEFAULT=0 >\n",
        );
        fs::create_dir_all(r.join("proc")).unwrap();
        t
    }

    #[test]
    fn samples_load_frequency_model_and_power_mode() {
        let t = orin_nano();
        let mut gpu = JetsonGpu::open(&paths(t.path()), Vec::new()).unwrap();
        assert_eq!(gpu.model(), "ga10b");
        let s = gpu.sample().unwrap();
        assert_eq!(
            s.devices,
            [DeviceSample {
                gpu: "gpu".into(),
                model: "ga10b".into(),
                uuid: String::new(),
                utilization_ratio: Some(0.347),
                memory_utilization_ratio: None,
                memory_used_bytes: None,
                frequency_hertz: Some(624_750_000.0),
            }]
        );
        assert_eq!(s.power_mode.as_deref(), Some("2:MAXN_SUPER"));
        assert_eq!(s.users, Users::Holders(Vec::new()));
        // nvpmodel -m 3: the next sample says so.
        write(t.path(), "var/lib/nvpmodel/status", "pmode:0003\n");
        assert_eq!(gpu.sample().unwrap().power_mode.as_deref(), Some("3:7W"));
    }

    /// A Jetson Nano on L4T R32: the GPU node is `gpu` with `nvidia,tegra210-gm20b`, the devfreq
    /// device has no `load` and `/sys/devices/gpu.0/load` has it; no nvpmodel files.
    #[test]
    fn nano_layout_with_the_gpu_0_load_and_no_nvpmodel() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(
            r,
            "sys/class/devfreq/57000000.gpu/device/of_node/name",
            "gpu\0",
        );
        write(
            r,
            "sys/class/devfreq/57000000.gpu/device/of_node/compatible",
            "nvidia,tegra210-gm20b\0nvidia,gm20b\0",
        );
        write(r, "sys/class/devfreq/57000000.gpu/cur_freq", "76800000\n");
        write(r, "sys/devices/gpu.0/load", "0\n");
        let mut gpu = JetsonGpu::open(&paths(r), Vec::new()).unwrap();
        let s = gpu.sample().unwrap();
        assert_eq!(s.devices[0].model, "gm20b");
        assert_eq!(s.devices[0].utilization_ratio, Some(0.0));
        assert_eq!(s.devices[0].frequency_hertz, Some(76_800_000.0));
        assert_eq!(s.power_mode, None);
    }

    #[test]
    fn a_host_without_a_tegra_gpu_is_unavailable_with_the_reason() {
        let t = tempfile::tempdir().unwrap();
        let err = JetsonGpu::open(&paths(t.path()), Vec::new()).unwrap_err();
        assert!(
            matches!(&err, CollectError::Unavailable(r) if r.contains("no Jetson integrated GPU")),
            "{err}"
        );
        // A GPU node without any load file.
        write(
            t.path(),
            "sys/class/devfreq/17000000.gv11b/device/of_node/name",
            "gv11b\0",
        );
        let err = JetsonGpu::open(&paths(t.path()), Vec::new()).unwrap_err();
        assert!(
            matches!(&err, CollectError::Unavailable(r) if r.contains("gv11b") && r.contains("no load file")),
            "{err}"
        );
    }

    /// `open` through the collector context: the fixture's GPU is found, an empty host is not.
    #[test]
    fn open_reads_the_context_roots() {
        let t = orin_nano();
        let config = crate::config::Config::for_paths(paths(t.path()), "n");
        let mut source = open(&config.context()).unwrap();
        assert_eq!(source.sample().unwrap().devices[0].model, "ga10b");
        let empty = tempfile::tempdir().unwrap();
        let config = crate::config::Config::for_paths(paths(empty.path()), "n");
        assert!(matches!(
            open(&config.context()),
            Err(CollectError::Unavailable(_))
        ));
    }

    #[test]
    fn malformed_values_refuse_the_sample_naming_the_file() {
        let t = orin_nano();
        let mut gpu = JetsonGpu::open(&paths(t.path()), Vec::new()).unwrap();
        let load = "sys/devices/platform/bus@0/17000000.gpu/load";
        for bad in ["1001\n", "n/a\n", "-3\n", ""] {
            write(t.path(), load, bad);
            let err = gpu.sample().unwrap_err().to_string();
            assert!(
                err.contains("17000000.gpu/device/load") && err.contains("per mille"),
                "{err}"
            );
        }
        write(t.path(), load, "1000\n");
        assert_eq!(
            gpu.sample().unwrap().devices[0].utilization_ratio,
            Some(1.0)
        );
        write(t.path(), "var/lib/nvpmodel/status", "pmode:\n");
        let err = gpu.sample().unwrap_err().to_string();
        assert!(
            err.contains("nvpmodel/status") && err.contains("pmode:<id>"),
            "{err}"
        );
        // A mode the conf does not name: no power mode (logged), the rest of the sample stands.
        write(t.path(), "var/lib/nvpmodel/status", "pmode:0009\n");
        let s = gpu.sample().unwrap();
        assert_eq!(s.power_mode, None);
        assert_eq!(s.devices[0].utilization_ratio, Some(1.0));
    }

    #[test]
    fn conf_parsing_skips_comments_and_reports_incomplete_lines() {
        let (names, bad) = parse_conf(
            "# < POWER_MODEL ID=id_num NAME=mode_name >\n\
             < POWER_MODEL ID=0 NAME=MAXN >\n\
             < POWER_MODEL ID=1 NAME=5W >\n\
             < POWER_MODEL ID=x NAME=broken >\n",
        );
        assert_eq!(
            names,
            BTreeMap::from([(0, "MAXN".into()), (1, "5W".into())])
        );
        assert_eq!(bad, ["< POWER_MODEL ID=x NAME=broken >"]);
        assert_eq!(parse_status("pmode:0000\n"), Some(0));
        assert_eq!(parse_status("other:x pmode:0001"), Some(1));
        assert_eq!(parse_status("0001"), None);
    }

    /// The holder scan on the real procfs: this test process opens a file standing in for a
    /// GPU node (under the fixture root) and is found; closing it is seen at the next full scan.
    #[test]
    fn a_process_holding_a_node_is_a_holder() {
        let t = tempfile::tempdir().unwrap();
        let node = t.path().join("dev/nvhost-as-gpu");
        write(t.path(), "dev/nvhost-as-gpu", "");
        let other = t.path().join("dev/nvhost-ctrl-gpu");
        write(t.path(), "dev/nvhost-ctrl-gpu", "");
        let me = std::process::id();
        let mut holders = Holders::new(PathBuf::from("/proc"), vec![node.clone()]);
        let _ctrl = fs::File::open(&other).unwrap();
        assert!(!holders.scan().contains(&me), "ctrl alone is not a holder");
        let held = fs::File::open(&node).unwrap();
        // A known process is re-read only at the next full scan.
        for _ in 1..RESCAN_TICKS {
            assert!(!holders.scan().contains(&me));
        }
        assert!(holders.scan().contains(&me));
        drop(held);
        for _ in 1..RESCAN_TICKS {
            assert!(holders.scan().contains(&me));
        }
        assert!(!holders.scan().contains(&me));
    }

    /// A process that appears between ticks is read on the tick it is first seen, and one that
    /// exits is dropped at once: a fixture procfs with fd links.
    #[test]
    fn new_processes_are_read_at_once_and_gone_ones_dropped() {
        let t = tempfile::tempdir().unwrap();
        let proc = t.path().join("proc");
        let link = |pid: u32, fd: u32, target: &str| {
            let dir = proc.join(pid.to_string()).join("fd");
            fs::create_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(target, dir.join(fd.to_string())).unwrap();
        };
        link(100, 3, "/dev/null");
        link(200, 7, "/dev/nvgpu/igpu0/channel");
        fs::create_dir_all(proc.join("self")).unwrap(); // not a PID
        let nodes = DEVICE_NODES.iter().map(PathBuf::from).collect();
        let mut holders = Holders::new(proc.clone(), nodes);
        assert_eq!(holders.scan(), [200]);
        link(300, 4, "/dev/nvhost-gpu");
        assert_eq!(holders.scan(), [200, 300]);
        fs::remove_dir_all(proc.join("200")).unwrap();
        assert_eq!(holders.scan(), [300]);
    }
}
