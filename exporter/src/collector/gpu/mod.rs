//! GPUs: per device utilisation, memory, clock and busy time, and GPU time and memory per
//! container, from one [`Source`] (NVML; a Jetson's sysfs).
//!
//! The first of [`OPENERS`] that opens is the source; where none does the collector is
//! unavailable with every opener's reason. The core here turns a source's [`Sample`] into
//! series, the same way whatever the source:
//!
//! - per device the gauges as sampled, and `greenpipe_gpu_busy_seconds_total`: utilisation
//!   integrated over the real time between ticks (a gap longer than [`MAX_GAP_TICKS`] ticks, or
//!   a failed sample, is not integrated: utilisation during it is unknown);
//! - per container, from [`Users::Processes`] (measured, `source="nvml"`): each process's
//!   utilisation × the time between ticks, and its GPU memory, summed into its container; from
//!   [`Users::Holders`] (`source="device_holders"`): the devices' busy time split evenly over the
//!   distinct containers of the processes holding the GPU open, or given to `system` when none.
//!
//! A process is placed by its `/proc/<pid>/cgroup` (as the process collector does; outside any
//! container it counts as `system`), read once while NVML keeps reporting the pid. A container's
//! counter lives while its cgroup directory exists (one `stat` in a tick where none of its
//! processes used a GPU), so it never restarts while the container runs; once the cgroup is
//! gone its series are dropped.

pub mod jetson;
pub mod nvml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use greenpipe_common::container_id::ContainerRef;
use greenpipe_common::contract;
use greenpipe_common::names::{label, source, SYSTEM_CONTAINER};

use super::process::container_line;
use super::source::read_into;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "gpu",
    default_enabled: true,
    help: "GPU utilisation, memory, clock and busy time per device, GPU time and memory per container (NVML)",
    build,
};

/// Ticks further apart than this many intervals are not integrated.
pub const MAX_GAP_TICKS: u32 = 3;

/// One GPU's state at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceSample {
    /// `gpu` label: the NVML index ("0"), or "gpu" for a Jetson's integrated GPU.
    pub gpu: String,
    /// `gpu_model` label of greenpipe_gpu_info.
    pub model: String,
    /// `uuid` label of greenpipe_gpu_info; empty where the device has none.
    pub uuid: String,
    /// Fraction of the last period the GPU was busy, 0..=1.
    pub utilization_ratio: Option<f64>,
    /// Fraction of the last period device memory was read or written, 0..=1.
    pub memory_utilization_ratio: Option<f64>,
    /// Device memory in use, bytes.
    pub memory_used_bytes: Option<f64>,
    /// SM clock (NVML) or devfreq cur_freq (Jetson), hertz.
    pub frequency_hertz: Option<f64>,
}

/// One process's use of one GPU, measured (NVML).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// The process.
    pub pid: u32,
    /// The `gpu` label of the device it used.
    pub gpu: String,
    /// Its share of the device since the previous sample, 0..=1 (NVML: SM utilisation).
    pub utilization_ratio: f64,
    /// Device memory it holds, bytes; `None` where the source cannot tell.
    pub memory_used_bytes: Option<f64>,
}

/// Who uses the GPUs.
#[derive(Debug, Clone, PartialEq)]
pub enum Users {
    /// Measured per process (NVML).
    Processes(Vec<ProcessSample>),
    /// Only which processes hold the GPU device open (Jetson): the device's busy time is split
    /// evenly over their containers (source="device_holders").
    Holders(Vec<u32>),
}

/// What a source read at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Every device.
    pub devices: Vec<DeviceSample>,
    /// Who used them.
    pub users: Users,
    /// nvpmodel mode "ID:NAME" (Jetson)
    pub power_mode: Option<String>,
}

/// A GPU source: NVML, or a Jetson's sysfs.
pub trait Source: Send {
    /// Reads every device and its users once.
    fn sample(&mut self) -> Result<Sample, CollectError>;
}

/// The sources tried in order at build time; the first that opens is used; if none, the
/// collector is Unavailable naming every reason. (Spelled out, not a type alias: each source
/// module's `open` is written against this signature.)
#[allow(clippy::type_complexity)]
const OPENERS: &[fn(&Context<'_>) -> Result<Box<dyn Source>, CollectError>] =
    &[nvml::open, jetson::open];

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    let mut reasons = Vec::new();
    for open in OPENERS {
        match open(ctx) {
            Ok(source) => return Ok(Box::new(GpuCollector::new(source, ctx))),
            Err(CollectError::Unavailable(why)) => reasons.push(why),
            // A source that is there but broken is reported as such, not hidden behind the
            // absence of the others.
            Err(e) => return Err(e),
        }
    }
    Err(CollectError::Unavailable(reasons.join("; ")))
}

/// Where a process runs, read once from `/proc/<pid>/cgroup`.
#[derive(Debug, Clone)]
struct Placement {
    container: ContainerRef,
    /// The container's cgroup directory (`None` for `system`, which never goes away).
    cgroup: Option<PathBuf>,
    /// Tick in which the pid was last reported.
    seen: u64,
}

/// Reads and caches where processes run.
#[derive(Debug)]
struct Placer {
    procfs: PathBuf,
    cgroupfs: PathBuf,
    v2_root: Option<PathBuf>,
    cache: HashMap<u32, Placement>,
    path: PathBuf,
    buf: String,
}

fn system() -> ContainerRef {
    ContainerRef {
        container_id: SYSTEM_CONTAINER.to_string(),
        pod_uid: String::new(),
    }
}

impl Placer {
    fn new(procfs: &Path, cgroupfs: &Path) -> Placer {
        Placer {
            procfs: procfs.to_path_buf(),
            cgroupfs: cgroupfs.to_path_buf(),
            v2_root: crate::cgroup_ids::v2_root(cgroupfs),
            cache: HashMap::new(),
            path: PathBuf::new(),
            buf: String::with_capacity(512),
        }
    }

    /// Where `pid` runs; read from procfs the first time it is reported. A process that is
    /// gone (or unreadable) counts as `system`.
    fn place(&mut self, pid: u32, tick: u64) -> &Placement {
        let Placer {
            procfs,
            cgroupfs,
            v2_root,
            cache,
            path,
            buf,
        } = self;
        let placement = cache.entry(pid).or_insert_with(|| {
            path.clone_from(procfs);
            path.push(itoa::Buffer::new().format(pid));
            path.push("cgroup");
            let found = read_into(path, buf)
                .ok()
                .and_then(|()| container_line(buf))
                .map(|(container, controllers, rel)| {
                    let cgroup = cgroup_dir(cgroupfs, v2_root.as_deref(), controllers, rel);
                    (container, cgroup)
                });
            let (container, cgroup) = found.unwrap_or_else(|| (system(), None));
            Placement {
                container,
                cgroup,
                seen: tick,
            }
        });
        placement.seen = tick;
        placement
    }

    /// Forgets pids not reported in `tick`.
    fn prune(&mut self, tick: u64) {
        self.cache.retain(|_, p| p.seen == tick);
    }
}

/// The directory of the cgroup at `path` of a `/proc/<pid>/cgroup` line: under the v2 root
/// for a v2 line (no controllers), else under the v1 hierarchy of its controllers.
pub fn cgroup_dir(
    cgroupfs: &Path,
    v2_root: Option<&Path>,
    controllers: &str,
    path: &str,
) -> Option<PathBuf> {
    let rel = path.trim_start_matches('/');
    if controllers.is_empty() {
        return v2_root.map(|r| r.join(rel));
    }
    let hierarchy = controllers.strip_prefix("name=").unwrap_or(controllers);
    Some(cgroupfs.join(hierarchy).join(rel))
}

/// One container's GPU accounts.
#[derive(Debug, Clone, PartialEq)]
struct Account {
    source: &'static str,
    seconds: f64,
    /// GPU memory of its processes this tick (NVML).
    memory: f64,
    cgroup: Option<PathBuf>,
    /// Tick in which one of its processes was last reported.
    seen: u64,
}

/// The running totals: per device busy seconds, per container GPU seconds.
#[derive(Debug, Default)]
pub struct Totals {
    busy: Vec<(String, f64)>,
    containers: HashMap<ContainerRef, Account>,
}

impl Totals {
    /// Adds `ratio` × `dt` seconds to device `gpu`'s busy time; returns what was added.
    fn add_busy(&mut self, gpu: &str, ratio: Option<f64>, dt: f64) -> f64 {
        let add = ratio.map_or(0.0, |r| clamp_ratio(r) * dt);
        match self.busy.iter_mut().find(|(g, _)| g == gpu) {
            Some((_, total)) => *total += add,
            None => self.busy.push((gpu.to_string(), add)),
        }
        add
    }

    /// Adds to a container's account, creating it on first use.
    fn add(
        &mut self,
        container: &ContainerRef,
        cgroup: Option<&Path>,
        source: &'static str,
        seconds: f64,
        memory: f64,
        tick: u64,
    ) {
        let account = match self.containers.get_mut(container) {
            Some(a) => a,
            None => self
                .containers
                .entry(container.clone())
                .or_insert_with(|| Account {
                    source,
                    seconds: 0.0,
                    memory: 0.0,
                    cgroup: cgroup.map(Path::to_path_buf),
                    seen: tick,
                }),
        };
        if account.seen != tick {
            account.memory = 0.0;
        }
        account.source = source;
        account.seconds += seconds;
        account.memory += memory;
        account.seen = tick;
    }

    /// Drops devices not in this tick's sample, and containers none of whose processes was
    /// reported in `tick` and whose cgroup is gone (`system` stays).
    fn retire(&mut self, devices: &[DeviceSample], tick: u64, exists: impl Fn(&Path) -> bool) {
        self.busy
            .retain(|(gpu, _)| devices.iter().any(|d| &d.gpu == gpu));
        self.containers.retain(|_, a| {
            if a.seen == tick {
                return true;
            }
            a.memory = 0.0;
            a.cgroup.as_deref().is_none_or(&exists)
        });
    }
}

fn clamp_ratio(r: f64) -> f64 {
    if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

struct GpuCollector {
    source: Box<dyn Source>,
    placer: Placer,
    totals: Totals,
    last: Option<Instant>,
    max_gap: Duration,
    tick: u64,
}

impl GpuCollector {
    fn new(source: Box<dyn Source>, ctx: &Context<'_>) -> GpuCollector {
        GpuCollector {
            source,
            placer: Placer::new(&ctx.paths.procfs, &ctx.paths.cgroupfs),
            totals: Totals::default(),
            last: None,
            max_gap: ctx.interval * MAX_GAP_TICKS,
            tick: 0,
        }
    }

    /// Accounts one sample taken `dt` seconds after the previous one.
    fn account(&mut self, sample: &Sample, dt: f64) {
        self.tick += 1;
        let tick = self.tick;
        let mut busy = 0.0;
        for d in &sample.devices {
            busy += self.totals.add_busy(&d.gpu, d.utilization_ratio, dt);
        }
        match &sample.users {
            Users::Processes(processes) => {
                for p in processes {
                    let place = self.placer.place(p.pid, tick);
                    self.totals.add(
                        &place.container,
                        place.cgroup.as_deref(),
                        source::NVML,
                        clamp_ratio(p.utilization_ratio) * dt,
                        p.memory_used_bytes
                            .filter(|m| m.is_finite() && *m >= 0.0)
                            .unwrap_or(0.0),
                        tick,
                    );
                }
            }
            Users::Holders(pids) => {
                // Distinct containers, in first-seen order (a handful: a linear scan).
                let mut holders: Vec<(ContainerRef, Option<PathBuf>)> = Vec::new();
                for &pid in pids {
                    let place = self.placer.place(pid, tick);
                    if !holders.iter().any(|(c, _)| *c == place.container) {
                        holders.push((place.container.clone(), place.cgroup.clone()));
                    }
                }
                if holders.is_empty() {
                    holders.push((system(), None));
                }
                let share = busy / holders.len() as f64;
                for (container, cgroup) in &holders {
                    self.totals.add(
                        container,
                        cgroup.as_deref(),
                        source::DEVICE_HOLDERS,
                        share,
                        0.0,
                        tick,
                    );
                }
            }
        }
        self.placer.prune(tick);
        self.totals
            .retire(&sample.devices, tick, |dir| dir.exists());
    }
}

fn emit(out: &mut MetricSet, sample: &Sample, totals: &Totals) {
    use contract::gpu;
    for d in &sample.devices {
        let labels = [(label::GPU, d.gpu.as_str())];
        let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
        if let Some(v) = finite(d.utilization_ratio) {
            out.push(&gpu::UTILIZATION_RATIO, &labels, v);
        }
        if let Some(v) = finite(d.memory_utilization_ratio) {
            out.push(&gpu::MEMORY_UTILIZATION_RATIO, &labels, v);
        }
        if let Some(v) = finite(d.memory_used_bytes) {
            out.push(&gpu::MEMORY_USED_BYTES, &labels, v);
        }
        if let Some(v) = finite(d.frequency_hertz) {
            out.push(&gpu::FREQUENCY_HERTZ, &labels, v);
        }
        out.push(
            &gpu::INFO,
            &[
                (label::GPU, d.gpu.as_str()),
                (label::GPU_MODEL, d.model.as_str()),
                (label::UUID, d.uuid.as_str()),
            ],
            1.0,
        );
    }
    for (g, seconds) in &totals.busy {
        out.push(
            &gpu::BUSY_SECONDS_TOTAL,
            &[(label::GPU, g.as_str())],
            *seconds,
        );
    }
    if let Some(mode) = &sample.power_mode {
        out.push(&gpu::POWER_MODE_INFO, &[(label::POWER_MODE, mode)], 1.0);
    }
    for (c, a) in &totals.containers {
        let labels = [
            (label::CONTAINER_ID, c.container_id.as_str()),
            (label::POD_UID, c.pod_uid.as_str()),
            (label::SOURCE, a.source),
        ];
        out.push(&contract::container::GPU_SECONDS_TOTAL, &labels, a.seconds);
        if a.source == source::NVML {
            out.push(&contract::container::GPU_MEMORY_BYTES, &labels, a.memory);
        }
    }
}

impl Collector for GpuCollector {
    fn collect(&mut self, out: &mut MetricSet, _report: &mut Report) -> Result<(), CollectError> {
        let sample = match self.source.sample() {
            Ok(s) => s,
            Err(e) => {
                // The time of a failed sample is not integrated.
                self.last = None;
                return Err(e);
            }
        };
        let now = Instant::now();
        let dt = match self.last.replace(now) {
            Some(t) if now.duration_since(t) <= self.max_gap => now.duration_since(t),
            _ => Duration::ZERO,
        };
        self.account(&sample, dt.as_secs_f64());
        emit(out, &sample, &self.totals);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn device(gpu: &str, util: f64) -> DeviceSample {
        DeviceSample {
            gpu: gpu.into(),
            model: "NVIDIA T4".into(),
            uuid: format!("GPU-{gpu}"),
            utilization_ratio: Some(util),
            ..DeviceSample::default()
        }
    }

    fn process(pid: u32, util: f64, memory: f64) -> ProcessSample {
        ProcessSample {
            pid,
            gpu: "0".into(),
            utilization_ratio: util,
            memory_used_bytes: Some(memory),
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        procfs: PathBuf,
        cgroupfs: PathBuf,
    }

    /// A procfs with pids 10 and 11 in one pod's container, 20 in another, 30 on the host,
    /// and a v2 cgroupfs with both containers' directories.
    fn fixture() -> (Fixture, [String; 2]) {
        let dir = tempfile::tempdir().unwrap();
        let procfs = dir.path().join("proc");
        let cgroupfs = dir.path().join("cgroup");
        fs::create_dir_all(&cgroupfs).unwrap();
        fs::write(cgroupfs.join("cgroup.controllers"), "cpu memory\n").unwrap();
        let ids = ["a".repeat(64), "b".repeat(64)];
        let pod = "0b9e2a4c-1111-2222-3333-444455556666";
        let paths = [
            format!("/kubepods/besteffort/pod{pod}/{}", ids[0]),
            format!("/kubepods/besteffort/pod{pod}/{}", ids[1]),
        ];
        for (pid, path) in [
            (10, paths[0].as_str()),
            (11, paths[0].as_str()),
            (20, paths[1].as_str()),
            (30, "/system.slice/ssh.service"),
        ] {
            let p = procfs.join(pid.to_string());
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("cgroup"), format!("0::{path}\n")).unwrap();
        }
        for path in &paths {
            fs::create_dir_all(cgroupfs.join(path.trim_start_matches('/'))).unwrap();
        }
        (
            Fixture {
                _dir: dir,
                procfs,
                cgroupfs,
            },
            ids,
        )
    }

    struct Scripted(Vec<Sample>);

    impl Source for Scripted {
        fn sample(&mut self) -> Result<Sample, CollectError> {
            Ok(self.0.remove(0))
        }
    }

    fn collector(f: &Fixture, samples: Vec<Sample>) -> GpuCollector {
        GpuCollector {
            source: Box::new(Scripted(samples)),
            placer: Placer::new(&f.procfs, &f.cgroupfs),
            totals: Totals::default(),
            last: None,
            max_gap: Duration::from_secs(3600),
            tick: 0,
        }
    }

    fn seconds(c: &GpuCollector, id: &str) -> Option<(f64, f64, &'static str)> {
        c.totals
            .containers
            .iter()
            .find(|(k, _)| k.container_id == id)
            .map(|(_, a)| (a.seconds, a.memory, a.source))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn processes_are_summed_into_their_containers() {
        let (f, ids) = fixture();
        let sample = Sample {
            devices: vec![device("0", 0.9)],
            users: Users::Processes(vec![
                process(10, 0.5, 100.0),
                process(11, 0.25, 50.0),
                process(20, 0.1, 10.0),
                process(30, 0.05, 1.0),
                process(99, 0.05, 1.0), // gone: system
            ]),
            power_mode: None,
        };
        let mut c = collector(&f, vec![]);
        c.account(&sample, 2.0);
        let (s, m, src) = seconds(&c, &ids[0]).unwrap();
        assert!(
            close(s, 1.5) && close(m, 150.0) && src == source::NVML,
            "{s} {m}"
        );
        let (s, m, _) = seconds(&c, &ids[1]).unwrap();
        assert!(close(s, 0.2) && close(m, 10.0));
        let (s, m, _) = seconds(&c, SYSTEM_CONTAINER).unwrap();
        assert!(close(s, 0.2) && close(m, 2.0));
        assert!(close(c.totals.busy[0].1, 1.8));
        let pod = &c
            .totals
            .containers
            .keys()
            .find(|k| k.container_id == ids[0])
            .unwrap()
            .pod_uid;
        assert_eq!(pod, "0b9e2a4c-1111-2222-3333-444455556666");

        // Next tick: only pid 20 runs. The first container keeps its seconds (its cgroup is
        // still there), with no memory; then its cgroup goes and its series with it.
        let next = Sample {
            users: Users::Processes(vec![process(20, 1.0, 10.0)]),
            ..sample
        };
        c.account(&next, 1.0);
        let (s, m, _) = seconds(&c, &ids[0]).unwrap();
        assert!(close(s, 1.5) && m == 0.0);
        assert!(close(seconds(&c, &ids[1]).unwrap().0, 1.2));
        assert!(c.placer.cache.len() == 1, "pids not reported are forgotten");
        let gone = f.cgroupfs.join(
            "kubepods/besteffort/pod0b9e2a4c-1111-2222-3333-444455556666".to_string()
                + "/"
                + &ids[0],
        );
        fs::remove_dir(gone).unwrap();
        c.account(&next, 1.0);
        assert_eq!(seconds(&c, &ids[0]), None);
        assert!(seconds(&c, SYSTEM_CONTAINER).is_some(), "system stays");
    }

    #[test]
    fn holders_split_the_busy_time_evenly_over_containers() {
        let (f, ids) = fixture();
        let sample = |pids: Vec<u32>| Sample {
            devices: vec![device("gpu", 0.6)],
            users: Users::Holders(pids),
            power_mode: Some("0:MAXN".into()),
        };
        let mut c = collector(&f, vec![]);
        // Two processes of one container and one of another: two shares, not three.
        c.account(&sample(vec![10, 11, 20]), 1.0);
        let (s, _, src) = seconds(&c, &ids[0]).unwrap();
        assert!(close(s, 0.3) && src == source::DEVICE_HOLDERS);
        assert!(close(seconds(&c, &ids[1]).unwrap().0, 0.3));
        // Nobody holds it: the busy time goes to system.
        c.account(&sample(vec![]), 1.0);
        assert!(close(seconds(&c, SYSTEM_CONTAINER).unwrap().0, 0.6));
        let mut out = MetricSet::new();
        emit(&mut out, &sample(vec![]), &c.totals);
        let text = String::from_utf8(out.encode_text("n")).unwrap();
        assert!(
            text.contains("greenpipe_gpu_power_mode_info{node=\"n\",power_mode=\"0:MAXN\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("greenpipe_container_gpu_memory_bytes"),
            "no memory from holders: {text}"
        );
    }

    #[test]
    fn busy_time_integrates_utilisation_and_ignores_nonsense() {
        let mut t = Totals::default();
        t.add_busy("0", Some(0.5), 2.0);
        t.add_busy("0", Some(7.0), 1.0);
        t.add_busy("0", Some(f64::NAN), 1.0);
        t.add_busy("0", None, 1.0);
        t.add_busy("0", Some(-1.0), 1.0);
        assert_eq!(t.busy, vec![("0".to_string(), 2.0)]);
    }

    #[test]
    fn collect_emits_device_series_and_counts_real_time() {
        let (f, _) = fixture();
        let s = Sample {
            devices: vec![DeviceSample {
                memory_utilization_ratio: Some(0.2),
                memory_used_bytes: Some(1e9),
                frequency_hertz: Some(1.5e9),
                ..device("0", 1.0)
            }],
            users: Users::Processes(vec![]),
            power_mode: None,
        };
        let mut c = collector(&f, vec![s.clone(), s]);
        let mut out = MetricSet::new();
        // Busy time is integrated between the two collects' own clock reads, which lie between
        // these two instants and at least the sleep apart: bounds, not a timing threshold.
        let before_first = Instant::now();
        c.collect(&mut out, &mut Report::default()).unwrap();
        let text = String::from_utf8(out.encode_text("n")).unwrap();
        for want in [
            "greenpipe_gpu_utilization_ratio{node=\"n\",gpu=\"0\"} 1",
            "greenpipe_gpu_memory_utilization_ratio{node=\"n\",gpu=\"0\"} 0.2",
            "greenpipe_gpu_memory_used_bytes{node=\"n\",gpu=\"0\"} 1000000000",
            "greenpipe_gpu_frequency_hertz{node=\"n\",gpu=\"0\"} 1500000000",
            "greenpipe_gpu_info{node=\"n\",gpu=\"0\",gpu_model=\"NVIDIA T4\",uuid=\"GPU-0\"} 1",
            "greenpipe_gpu_busy_seconds_total{node=\"n\",gpu=\"0\"} 0",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
        c.collect(&mut MetricSet::new(), &mut Report::default())
            .unwrap();
        let busy = c.totals.busy[0].1;
        assert!(
            busy >= 0.02 && busy <= before_first.elapsed().as_secs_f64(),
            "{busy}"
        );
    }

    #[test]
    fn cgroup_dirs_of_v2_and_v1_lines() {
        let fs = Path::new("/sys/fs/cgroup");
        assert_eq!(
            cgroup_dir(fs, Some(fs), "", "/kubepods/x"),
            Some(fs.join("kubepods/x"))
        );
        assert_eq!(cgroup_dir(fs, None, "", "/x"), None);
        assert_eq!(
            cgroup_dir(fs, None, "cpu,cpuacct", "/docker/x"),
            Some(fs.join("cpu,cpuacct/docker/x"))
        );
        assert_eq!(
            cgroup_dir(fs, None, "name=systemd", "/docker/x"),
            Some(fs.join("systemd/docker/x"))
        );
    }
}
