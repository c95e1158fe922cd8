//! Helpers of the kernel tests: test cgroups shaped like real containers, processes started
//! inside them, and reading collector output back.
#![allow(dead_code)] // each test binary uses a different subset

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use greenpipe_exporter::cgroup_ids::v2_root;
use greenpipe_exporter::collector::{Collector, Report, Spec};
use greenpipe_exporter::config::Config;
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::paths::Paths;

/// Panics unless the tests run as root: they load BPF programs and create cgroups.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "kernel tests need root (BPF, cgroups): run scripts/test.sh as root"
    );
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A fresh 64-hex container id.
pub fn container_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut state =
        nanos ^ ((std::process::id() as u64) << 32) ^ COUNTER.fetch_add(1, Ordering::Relaxed);
    (0..4)
        .map(|_| format!("{:016x}", splitmix(&mut state)))
        .collect()
}

/// A cgroup v2 named like a Docker container (`docker-<id>.scope`), killed and removed on drop.
pub struct TestCgroup {
    /// Its directory.
    pub dir: PathBuf,
    /// The container id the real parser derives from its path.
    pub container_id: String,
}

impl TestCgroup {
    /// Creates it under the v2 hierarchy of `/sys/fs/cgroup`.
    pub fn new() -> TestCgroup {
        let root = v2_root(Path::new("/sys/fs/cgroup")).expect("a cgroup v2 hierarchy");
        let container_id = container_id();
        let dir = root.join(format!("docker-{container_id}.scope"));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TestCgroup { dir, container_id }
    }

    /// The cgroup id (inode of the directory).
    pub fn id(&self) -> u64 {
        std::fs::metadata(&self.dir).unwrap().ino()
    }

    /// Starts `sh -c script` inside the cgroup: the shell moves itself in before running it.
    pub fn spawn(&self, script: &str) -> Child {
        let procs = self.dir.join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {} && {script}", procs.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn sh")
    }

    /// Runs `sh -c script` inside the cgroup to completion; panics if it fails.
    pub fn run(&self, script: &str) {
        let status = self.spawn(script).wait().expect("wait sh");
        assert!(status.success(), "{script}: {status}");
    }

    /// `usage_usec` of `cpu.stat`: the kernel's own CPU time of the cgroup.
    pub fn usage_usec(&self) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse().ok())
            .expect("usage_usec in cpu.stat")
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        eprintln!("could not remove test cgroup {}", self.dir.display());
    }
}

/// Builds a collector from the registry with the host's default paths.
pub fn build(spec: &Spec) -> Box<dyn Collector> {
    build_with(spec, |_| {})
}

/// [`build`] with the default configuration changed by `adjust` first.
pub fn build_with(spec: &Spec, adjust: impl FnOnce(&mut Config)) -> Box<dyn Collector> {
    let mut config = Config::for_paths(Paths::default(), "test-node");
    adjust(&mut config);
    match (spec.build)(&config.context()) {
        Ok(c) => c,
        Err(e) => panic!("collector {} did not build: {e}", spec.name),
    }
}

/// Runs a collector once.
pub fn collect(collector: &mut dyn Collector) -> MetricSet {
    let mut out = MetricSet::new();
    collector
        .collect(&mut out, &mut Report::default())
        .unwrap_or_else(|e| panic!("collect: {e}"));
    out
}

/// The value of the series of `name` whose labels include all of `labels`.
pub fn value(set: &MetricSet, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = set.family(name)?;
    family
        .series
        .iter()
        .find(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.value)
}

/// A forked copy of the test process that runs one piece of work inside a test cgroup, then
/// stays alive until [`Forked::finish`]: per-process counters are read while the process still
/// exists (the BPF side deletes a process's entry when it exits). The child only makes raw
/// system calls after the fork, which is what a forked copy of a multi-threaded process may do.
pub struct Forked {
    /// The child's pid (= its tgid).
    pub pid: i32,
    go: i32,
    done: i32,
}

fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Forked {
    /// Forks; the child waits until it is in `cg`, runs `work` (which returns false on
    /// failure), reports, and waits for [`Forked::finish`].
    pub fn start(cg: &TestCgroup, work: impl FnOnce() -> bool) -> Forked {
        let (go_read, go_write) = pipe();
        let (done_read, done_write) = pipe();
        // SAFETY: the child below only makes raw system calls (read, the work's calls, write,
        // _exit): no allocation, no lock another thread could hold.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut byte = 0u8;
            // SAFETY (child): reads and writes on descriptors we own, then _exit.
            unsafe {
                libc::close(go_write);
                libc::close(done_read);
                if libc::read(go_read, (&mut byte as *mut u8).cast(), 1) != 1 {
                    libc::_exit(2);
                }
                let ok = work();
                if !ok {
                    libc::_exit(1);
                }
                libc::write(done_write, (&byte as *const u8).cast(), 1);
                // EOF when the parent calls finish (or dies).
                libc::read(go_read, (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        // SAFETY: closing the child's ends, which the parent does not use.
        unsafe {
            libc::close(go_read);
            libc::close(done_write);
        }
        std::fs::write(cg.dir.join("cgroup.procs"), pid.to_string()).unwrap();
        let forked = Forked {
            pid,
            go: go_write,
            done: done_read,
        };
        // SAFETY: a write to the pipe we own.
        assert_eq!(
            unsafe { libc::write(forked.go, [1u8].as_ptr().cast(), 1) },
            1
        );
        forked
    }

    /// Waits until the child's work is done; panics if it failed.
    pub fn wait_done(&self) {
        let mut byte = 0u8;
        // SAFETY: a read into a byte we own.
        let n = unsafe { libc::read(self.done, (&mut byte as *mut u8).cast(), 1) };
        assert_eq!(n, 1, "the forked child's work failed");
    }

    /// Lets the child exit and reaps it.
    pub fn finish(self) {
        // SAFETY: closing our pipe ends and reaping our child.
        unsafe {
            libc::close(self.go);
            libc::close(self.done);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// A loopback TCP receiver on a free port: its thread returns the bytes it read once the sender
/// closes the connection.
pub fn loopback_sink() -> (u16, std::thread::JoinHandle<usize>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let receiver = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            match conn.read(&mut buf).unwrap() {
                0 => return total,
                n => total += n,
            }
        }
    });
    (port, receiver)
}

/// Runs `body` in a process of its own: this test binary again, with only the calling test
/// selected. What the body reads of the whole process (its RSS, its threads) is then its own,
/// not that of another test running beside it in the crate's one integration binary. The
/// calling test fails unless that process ran exactly this test and it passed.
pub fn alone_in_process(module: &str, test: &str, body: fn()) {
    const SELECTED: &str = "GREENPIPE_TEST_ALONE";
    // module_path!() starts with the binary's crate name, which libtest's names leave out.
    let name = format!(
        "{}::{test}",
        module.split_once("::").map_or(module, |(_, m)| m)
    );
    if std::env::var(SELECTED).is_ok_and(|v| v == name) {
        return body();
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(SELECTED, &name)
        .output()
        .expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in a process of its own: {} (its output above)",
        out.status
    );
}
