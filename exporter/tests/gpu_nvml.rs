//! NVIDIA GPUs without a GPU: the exporter binary loads a fake `libnvidia-ml.so.1`
//! (`tests/fixtures/fake_nvml/fake_nvml.c`, the real NVML ABI, built here with `cc`) the way it
//! loads the driver's, through the dynamic loader and `LD_LIBRARY_PATH`, and is scraped over
//! HTTP. The fake's values come from a key=value file the test rewrites while the exporter runs.
//!
//! Checked: per-container GPU seconds of two real processes in two pod-shaped cgroups, in the
//! ratio of the SM utilisation the fake reports for them, and the series dropped once a
//! container is gone; the device series and info; the `nvml` meter's energy from the device
//! counter (`energy_integrated 0`) and, where the counter is NOT_SUPPORTED, integrated from
//! power (`energy_integrated 1`); no library at all, and a driver that is not loaded: the
//! exporter runs and says why.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use greenpipe_common::names::{container, exporter, gpu, label, meter, source};
use greenpipe_exporter::cgroup_ids::v2_root;
use greenpipe_exporter::collector::REGISTRY;

use crate::kernel_support::{container_id, require_root};

/// How long a state may take to show in a scrape: the exporter ticks every 100 ms, so this is
/// only the bound after which the test reports what it saw instead of waiting for ever.
const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// The fake library, built once per test process: a directory holding `libnvidia-ml.so.1`,
/// the name nvml-wrapper `dlopen`s.
fn fake_library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("greenpipe-fake-nvml-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_nvml/fake_nvml.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(dir.join("libnvidia-ml.so.1"))
            .arg(&source)
            .output()
            .expect("cc (gcc) is installed");
        assert!(
            out.status.success(),
            "building the fake NVML: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// The fake's state file; rewritten whole and renamed into place, so no call reads half of it.
struct State {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl State {
    fn new(text: &str) -> State {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let s = State { _dir: dir, path };
        s.set(text);
        s
    }

    fn set(&self, text: &str) {
        let tmp = self.path.with_extension("new");
        fs::write(&tmp, text).unwrap();
        fs::rename(&tmp, &self.path).unwrap();
    }
}

/// The exporter binary with only the `gpu` and `meter` collectors, killed on drop.
struct Exporter {
    child: Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Exporter {
    /// Starts it with the fake library (`lib`) or with no NVML at all (`None`).
    fn start(lib: Option<(&Path, &State)>, meters: &[&str]) -> Exporter {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("exporter.log");
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_greenpipe-exporter"));
        cmd.args(["--node-name", "gpu-node", "--collection.interval", "100ms"])
            .arg("--web.listen-address")
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("FAKE_NVML_STATE")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        for spec in REGISTRY {
            if spec.default_enabled && spec.name != "gpu" && spec.name != "meter" {
                cmd.arg(format!("--no-collector.{}", spec.name));
            }
        }
        for m in meters {
            cmd.args(["--meter", m]);
        }
        if let Some((lib, state)) = lib {
            cmd.env("LD_LIBRARY_PATH", lib)
                .env("FAKE_NVML_STATE", &state.path);
        }
        let child = cmd.spawn().expect("start the exporter binary");
        Exporter {
            child,
            url: format!("http://127.0.0.1:{port}/metrics"),
            log,
            _dir: dir,
        }
    }

    fn scrape(&mut self) -> Option<String> {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("exporter exited with {status}:\n{}", self.log_text());
        }
        let mut response = ureq::get(&self.url).call().ok()?;
        response.body_mut().read_to_string().ok()
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Scrapes until `check` returns a value; panics with the last scrape and the log after
    /// [`DEADLINE`].
    fn until<T>(&mut self, what: &str, check: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        let mut last = String::new();
        loop {
            if let Some(text) = self.scrape() {
                if let Some(v) = check(&text) {
                    return v;
                }
                last = text;
            }
            if Instant::now() > deadline {
                panic!(
                    "never reached: {what}\nlast scrape:\n{}\nlog:\n{}",
                    relevant(&last),
                    self.log_text()
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The GPU, meter and availability lines of a scrape, for failure messages.
fn relevant(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('#') && (l.contains("gpu") || l.contains("meter")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of the series of `name` whose labels include every `(key, value)`.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

/// A cgroup shaped like a Kubernetes container (`pod<uid>/<container id>`, cgroupfs driver)
/// holding one `sleep`; killed and removed on drop.
struct PodContainer {
    pod_dir: PathBuf,
    dir: PathBuf,
    container_id: String,
    pod_uid: String,
    child: Child,
}

impl PodContainer {
    fn start() -> PodContainer {
        let root = v2_root(Path::new("/sys/fs/cgroup")).expect("a cgroup v2 hierarchy");
        let hex = container_id();
        let pod_uid = format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        );
        let container_id = container_id();
        let pod_dir = root.join(format!("pod{pod_uid}"));
        let dir = pod_dir.join(&container_id);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let procs = dir.join("cgroup.procs");
        // The shell moves itself in, then becomes the sleep: one pid, inside the container.
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {} && exec sleep 600", procs.display()))
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let me = PodContainer {
            pod_dir,
            dir,
            container_id,
            pod_uid,
            child,
        };
        let pid = me.pid().to_string();
        let deadline = Instant::now() + DEADLINE;
        while !fs::read_to_string(&procs)
            .unwrap_or_default()
            .lines()
            .any(|l| l == pid)
        {
            assert!(
                Instant::now() < deadline,
                "pid {pid} never entered {procs:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        me
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn labels(&self) -> [(&'static str, &str); 3] {
        [
            (label::CONTAINER_ID, self.container_id.as_str()),
            (label::POD_UID, self.pod_uid.as_str()),
            (label::SOURCE, source::NVML),
        ]
    }
}

impl Drop for PodContainer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        for dir in [&self.dir, &self.pod_dir] {
            while fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn gpu_state(procs: &str, energy_mj: &str) -> String {
    format!(
        "count=2\n\
         0.name=NVIDIA T4\n0.uuid=GPU-1b2c3d4e-0000-1111-2222-333344445555\n\
         0.power_mw=70000\n0.energy_mj={energy_mj}\n0.util_gpu=80\n0.util_mem=30\n\
         0.mem_total=16000000000\n0.mem_used=4000000000\n0.clock_sm=1590\n0.procs={procs}\n\
         1.name=NVIDIA A2\n1.uuid=GPU-9f8e7d6c-0000-1111-2222-333344445555\n\
         1.power_mw=50000\n1.energy_mj=NOT_SUPPORTED\n1.util_gpu=10\n1.util_mem=5\n\
         1.mem_total=16000000000\n1.mem_used=1000\n1.clock_sm=NOT_SUPPORTED\n"
    )
}

#[test]
fn processes_in_pods_get_gpu_seconds_in_the_ratio_nvml_reports() {
    require_root();
    let a = PodContainer::start();
    let b = PodContainer::start();
    let both = format!("{}:78:1048576,{}:15:2097152", a.pid(), b.pid());
    let state = State::new(&gpu_state(&both, "1000"));
    let mut exp = Exporter::start(Some((fake_library_dir(), &state)), &[]);

    // Once both containers have been integrated over at least one tick.
    let seconds =
        |text: &str, c: &PodContainer| value(text, container::GPU_SECONDS_TOTAL, &c.labels());
    let (a1, b1) = exp.until("both containers have GPU seconds", |t| {
        let (sa, sb) = (seconds(t, &a)?, seconds(t, &b)?);
        (sa > 0.0 && sb > 0.0).then_some((sa, sb))
    });
    let ratio = 78.0 / 15.0;
    assert!((a1 / b1 - ratio).abs() < 1e-9 * ratio, "{a1} / {b1}");
    // ... and they keep growing in that ratio.
    let text = exp.until("GPU seconds grow", |t| {
        (seconds(t, &b)? > b1).then(|| t.to_string())
    });
    let (a2, b2) = (seconds(&text, &a).unwrap(), seconds(&text, &b).unwrap());
    assert!(a2 > a1, "counters never decrease: {a1} then {a2}");
    assert!(
        ((a2 - a1) / (b2 - b1) - ratio).abs() < 1e-6 * ratio,
        "{a1} {a2} / {b1} {b2}"
    );
    assert_eq!(
        value(&text, container::GPU_MEMORY_BYTES, &a.labels()),
        Some(1048576.0)
    );
    assert_eq!(
        value(&text, container::GPU_MEMORY_BYTES, &b.labels()),
        Some(2097152.0)
    );

    // The device series, and a value the GPU does not support (gpu 1's clock) left out.
    let g0 = [(label::GPU, "0")];
    let g1 = [(label::GPU, "1")];
    assert_eq!(value(&text, gpu::UTILIZATION_RATIO, &g0), Some(0.8));
    assert_eq!(value(&text, gpu::MEMORY_UTILIZATION_RATIO, &g0), Some(0.3));
    assert_eq!(value(&text, gpu::MEMORY_USED_BYTES, &g0), Some(4e9));
    assert_eq!(value(&text, gpu::FREQUENCY_HERTZ, &g0), Some(1.59e9));
    assert_eq!(value(&text, gpu::UTILIZATION_RATIO, &g1), Some(0.1));
    assert_eq!(
        value(&text, gpu::FREQUENCY_HERTZ, &g1),
        None,
        "{}",
        relevant(&text)
    );
    assert!(value(&text, gpu::BUSY_SECONDS_TOTAL, &g0).unwrap() > 0.0);
    assert_eq!(
        value(
            &text,
            gpu::INFO,
            &[
                (label::GPU, "0"),
                (label::GPU_MODEL, "NVIDIA T4"),
                (label::UUID, "GPU-1b2c3d4e-0000-1111-2222-333344445555")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            exporter::COLLECTOR_AVAILABLE,
            &[(label::COLLECTOR, "gpu"), (label::REASON, "")]
        ),
        Some(1.0)
    );

    // Container b goes: NVML stops reporting its process, its cgroup is removed, its series
    // go; a's counter stays.
    let b_labels: Vec<(&str, String)> = b
        .labels()
        .iter()
        .map(|(k, v)| (*k, v.to_string()))
        .collect();
    state.set(&gpu_state(&format!("{}:78:1048576", a.pid()), "1000"));
    drop(b);
    let text = exp.until("the gone container's series are dropped", |t| {
        let labels: Vec<(&str, &str)> = b_labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        value(t, container::GPU_SECONDS_TOTAL, &labels)
            .is_none()
            .then(|| t.to_string())
    });
    assert!(seconds(&text, &a).unwrap() >= a2, "{}", relevant(&text));
}

#[test]
fn meter_energy_from_the_device_counter_or_integrated_from_power() {
    let state = State::new(&gpu_state("", "1000"));
    let mut exp = Exporter::start(Some((fake_library_dir(), &state)), &["nvml:auto"]);
    let m = |channel| [(label::METER, channel), (label::KIND, "nvml")];
    let text = exp.until("both GPUs read", |t| {
        let up = |c| value(t, meter::UP, &m(c)) == Some(1.0);
        let integrated_known = |c| value(t, meter::ENERGY_INTEGRATED, &m(c)).is_some();
        (up("gpu0") && up("gpu1") && integrated_known("gpu0") && integrated_known("gpu1"))
            .then(|| t.to_string())
    });
    assert_eq!(value(&text, meter::POWER_WATTS, &m("gpu0")), Some(70.0));
    assert_eq!(value(&text, meter::POWER_WATTS, &m("gpu1")), Some(50.0));
    assert_eq!(
        value(&text, meter::ENERGY_INTEGRATED, &m("gpu0")),
        Some(0.0)
    );
    assert_eq!(
        value(&text, meter::ENERGY_INTEGRATED, &m("gpu1")),
        Some(1.0)
    );

    // GPU 0: the total follows the device's counter exactly (1 000 mJ → 6 000 mJ = 5 J).
    assert_eq!(
        value(&text, meter::ENERGY_JOULES_TOTAL, &m("gpu0")),
        Some(0.0)
    );
    state.set(&gpu_state("", "6000"));
    exp.until("gpu0's total follows its counter", |t| {
        (value(t, meter::ENERGY_JOULES_TOTAL, &m("gpu0"))? == 5.0).then_some(())
    });
    // GPU 1: no counter, so 50 W integrated over the ticks.
    exp.until("gpu1's integrated total grows", |t| {
        (value(t, meter::ENERGY_JOULES_TOTAL, &m("gpu1"))? > 0.0).then_some(())
    });
    assert!(
        exp.log_text()
            .contains("NVML GPU 1 has no energy counter (total energy consumption not supported)"),
        "{}",
        exp.log_text()
    );
}

#[test]
fn without_the_library_the_exporter_runs_and_says_why() {
    let mut exp = Exporter::start(None, &["nvml:auto"]);
    let text = exp.until("the collectors report unavailable", |t| {
        t.contains("collector=\"meter\",reason=")
            .then(|| t.to_string())
    });
    let unavailable = |collector: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(exporter::COLLECTOR_AVAILABLE)
                    && l.contains(&format!("collector=\"{collector}\""))
            })
            .unwrap_or_else(|| panic!("no availability of {collector}:\n{text}"))
            .to_string()
    };
    let gpu = unavailable("gpu");
    assert!(
        gpu.contains(
            "reason=\"no NVIDIA driver: libnvidia-ml.so.1: cannot open shared object file"
        ) && gpu.ends_with(" 0"),
        "{gpu}"
    );
    let meters = unavailable("meter");
    assert!(
        meters.contains("reason=\"nvml:auto: no NVIDIA driver: libnvidia-ml.so.1")
            && meters.ends_with(" 0"),
        "{meters}"
    );
    // Logged at start, not on every tick: the log does not grow over ten more collections.
    let collections = |t: &str| value(t, exporter::COLLECTIONS_TOTAL, &[]);
    let now = collections(&text).expect("collections counter");
    let mentions = |log: &str| log.matches("cannot open shared object file").count();
    let before = mentions(&exp.log_text());
    assert!(before >= 1, "{}", exp.log_text());
    exp.until("ten more collections", |t| {
        (collections(t)? >= now + 10.0).then_some(())
    });
    let log = exp.log_text();
    assert_eq!(mentions(&log), before, "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_driver_that_is_not_loaded_is_a_reason_too() {
    let state = State::new("init=DRIVER_NOT_LOADED\n");
    let mut exp = Exporter::start(Some((fake_library_dir(), &state)), &["nvml:0"]);
    exp.until("the driver's absence is the reason", |t| {
        // The Jetson source's reason follows NVML's.
        let want = "reason=\"NVML: the NVIDIA kernel driver is not loaded; no Jetson";
        (t.lines()
            .any(|l| l.contains("collector=\"gpu\"") && l.contains(want) && l.ends_with(" 0"))
            && t.lines().any(|l| {
                l.contains("collector=\"meter\",reason=\"nvml:0: NVML: the NVIDIA kernel driver")
            }))
        .then_some(())
    });
}

#[test]
fn meter_targets_by_uuid_and_a_missing_index_is_named() {
    let state = State::new(&gpu_state("", "1000"));
    let mut exp = Exporter::start(
        Some((fake_library_dir(), &state)),
        &["nvml:GPU-9f8e7d6c-0000-1111-2222-333344445555", "nvml:7"],
    );
    let text = exp.until("the GPU named by UUID reads", |t| {
        let m = [(label::METER, "gpu1"), (label::KIND, "nvml")];
        (value(t, meter::UP, &m) == Some(1.0)).then(|| t.to_string())
    });
    assert_eq!(
        value(&text, meter::POWER_WATTS, &[(label::METER, "gpu1")]),
        Some(50.0)
    );
    assert_eq!(value(&text, meter::UP, &[(label::METER, "gpu0")]), None);
    assert!(
        exp.log_text().contains("no GPU 7: NVML sees 2 (0..1)"),
        "{}",
        exp.log_text()
    );
}
