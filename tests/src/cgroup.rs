//! Real cgroups for tests and benches, removed on drop even when a test fails.
//!
//! Test cgroups are named like Docker's systemd scopes (`docker-<64 hex>.scope`) so the exporter
//! recognises them through its real container-id parser, not through a test-only rule.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The cgroup v2 hierarchy: `/sys/fs/cgroup` on pure v2 hosts, `/sys/fs/cgroup/unified` on
/// hybrid ones; `None` when the kernel mounts no v2 hierarchy.
pub fn unified_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.controllers").exists())
}

/// v1 controller hierarchies present on this host (hybrid or v1), for benches that want
/// containers to look like a systemd-driver runtime's on a hybrid host.
pub fn v1_roots() -> Vec<PathBuf> {
    ["cpuacct", "memory", "blkio"]
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c))
        .filter(|p| p.join("cgroup.procs").exists() && !p.join("cgroup.controllers").exists())
        .collect()
}

/// CPU seconds the kernel charged to the cgroup at `dir` (`usage_usec` of its `cpu.stat`).
pub fn usage_seconds(dir: &Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).expect("reading cpu.stat");
    let usec: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec in cpu.stat");
    usec as f64 / 1e6
}

/// `stress-ng --cpu 1` for `seconds`, started inside the cgroup `dir` (the shell moves itself in
/// before it execs, so no CPU time is charged elsewhere); killed when the guard drops.
pub fn stress_cpu_in(dir: &Path, seconds: u32) -> crate::Guard {
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec stress-ng --cpu 1 --timeout {seconds}s --quiet",
            dir.display()
        ))
        .spawn()
        .expect("starting stress-ng (installed by scripts/setup.sh)");
    crate::Guard::new("stress-ng", child)
}

/// A 64-hex container id unique to this process and `index`.
pub fn container_id(index: u32) -> String {
    format!(
        "{:08x}{:056x}",
        std::process::id(),
        index as u64 + 0x9e37_79b9
    )
}

/// A parent cgroup in one or more hierarchies holding container-shaped children.
pub struct TestCgroup {
    roots: Vec<PathBuf>,
    parent: String,
    children: Vec<String>,
}

impl TestCgroup {
    /// Creates `<root>/<parent>` in every root given (v2 first, then any v1 hierarchies).
    pub fn create(roots: Vec<PathBuf>, parent: &str) -> anyhow::Result<TestCgroup> {
        let cg = TestCgroup {
            roots,
            parent: parent.to_string(),
            children: Vec::new(),
        };
        for root in &cg.roots {
            std::fs::create_dir(root.join(parent))
                .with_context(|| format!("creating cgroup {}", root.join(parent).display()))?;
        }
        Ok(cg)
    }

    /// Creates the child `docker-<id>.scope` in every hierarchy; returns its relative path.
    pub fn add_container(&mut self, id: &str) -> anyhow::Result<String> {
        let rel = format!("{}/docker-{id}.scope", self.parent);
        self.children.push(rel.clone());
        for root in &self.roots {
            std::fs::create_dir(root.join(&rel))
                .with_context(|| format!("creating cgroup {}", root.join(&rel).display()))?;
        }
        Ok(rel)
    }

    /// Creates `pod<uid>/docker-<id>.scope` (the kubelet's cgroupfs-driver shape) in every
    /// hierarchy; returns the container's relative path.
    pub fn add_pod_container(&mut self, pod_uid: &str, id: &str) -> anyhow::Result<String> {
        let pod = format!("{}/pod{pod_uid}", self.parent);
        let rel = format!("{pod}/docker-{id}.scope");
        for dir in [&pod, &rel] {
            self.children.push(dir.clone());
            for root in &self.roots {
                std::fs::create_dir(root.join(dir))
                    .with_context(|| format!("creating cgroup {}", root.join(dir).display()))?;
            }
        }
        Ok(rel)
    }

    /// The directory of `rel` in the first (v2) hierarchy.
    pub fn dir(&self, rel: &str) -> PathBuf {
        self.roots[0].join(rel)
    }

    /// Moves `pid` into `rel` in every hierarchy.
    pub fn attach(&self, rel: &str, pid: u32) -> anyhow::Result<()> {
        for root in &self.roots {
            let procs = root.join(rel).join("cgroup.procs");
            std::fs::write(&procs, pid.to_string())
                .with_context(|| format!("moving {pid} into {}", procs.display()))?;
        }
        Ok(())
    }
}

fn kill_members(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if pids.trim().is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: kill(2) with a pid read from the test's own cgroup.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for root in &self.roots {
            for rel in self.children.iter().rev() {
                let dir = root.join(rel);
                kill_members(&dir);
                let _ = std::fs::remove_dir(&dir);
            }
            let dir = root.join(&self.parent);
            kill_members(&dir);
            if let Err(e) = std::fs::remove_dir(&dir) {
                eprintln!("could not remove test cgroup {}: {e}", dir.display());
            }
        }
    }
}
