//! Real load in real cgroups shaped like a Kubernetes pod's (cgroupfs driver:
//! `kubepods/besteffort/pod<uid>/<container id>`), so the exporter attributes it to a container
//! id and pod UID exactly as on a node, without a container runtime.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use crate::Guard;

/// The writable cgroup v2 mount, if any (`/sys/fs/cgroup` on pure v2, `/sys/fs/cgroup/unified`
/// on hybrid hosts).
pub fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, target, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "cgroup2").then(|| PathBuf::from(target))
        })
        .next()
}

/// A process tree running inside its own pod-shaped cgroup; killed and removed on drop.
pub struct DemoPod {
    /// Pod UID (the `pod_uid` label).
    pub pod_uid: String,
    /// Container id (the `container_id` label).
    pub container_id: String,
    top: PathBuf,
    leaf: PathBuf,
    guard: Option<Guard>,
}

impl DemoPod {
    /// Creates `<cgroup2 root>/<scope>/kubepods/besteffort/pod<uid>/<id>` and runs `stress-ng
    /// <args>` in it. `scope` keeps parallel test runs apart; `index` makes uid and id unique.
    pub fn start(scope: &str, index: u32, stress_args: &[&str]) -> anyhow::Result<DemoPod> {
        Self::start_program(scope, index, Path::new("stress-ng"), stress_args)
            .context("starting stress-ng (scripts/setup.sh installs it)")
    }

    /// Like [`DemoPod::start`], running `program <args>` instead of stress-ng.
    pub fn start_program(
        scope: &str,
        index: u32,
        program: &Path,
        args: &[&str],
    ) -> anyhow::Result<DemoPod> {
        let root = cgroup2_root().context("no cgroup2 mount")?;
        let pod_uid = format!("6e0c1d2a-0000-4000-8000-{:012x}", index);
        let container_id = format!("{:064x}", 0xc0ffee_u64 * 1000 + u64::from(index));
        let top = root.join(scope);
        let leaf = top
            .join("kubepods/besteffort")
            .join(format!("pod{pod_uid}"))
            .join(&container_id);
        std::fs::create_dir_all(&leaf)
            .with_context(|| format!("creating cgroup {}", leaf.display()))?;
        // The shell moves itself into the cgroup before exec, so the program and all its
        // workers start there.
        let child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
            .arg(&leaf)
            .arg(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let pod = DemoPod {
            pod_uid,
            container_id,
            top,
            leaf,
            guard: Some(Guard::new("demo pod", child)),
        };
        let moved = crate::wait_for(std::time::Duration::from_secs(5), || {
            let procs = std::fs::read_to_string(pod.leaf.join("cgroup.procs")).ok()?;
            (!procs.trim().is_empty()).then_some(())
        });
        if moved.is_none() {
            bail!(
                "{} did not appear in {}",
                program.display(),
                pod.leaf.display()
            );
        }
        Ok(pod)
    }
}

impl Drop for DemoPod {
    fn drop(&mut self) {
        if let Some(mut g) = self.guard.take() {
            g.terminate();
        }
        // Workers exit a moment after their parent; wait for the cgroup to empty.
        crate::wait_for(std::time::Duration::from_secs(10), || {
            let procs = std::fs::read_to_string(self.leaf.join("cgroup.procs")).ok()?;
            procs.trim().is_empty().then_some(())
        });
        greenpipe_campaign::pod::remove_scope(&self.top);
    }
}
