//! Real load in real cgroups shaped like a Kubernetes pod's (cgroupfs driver:
//! `kubepods/besteffort/pod<uid>/<container id>`), so the exporter attributes it to a container
//! id and pod UID exactly as on a node, without a container runtime: the campaign's [`Pod`],
//! which also runs the profiling steps, with the waits a test needs around it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use greenpipe_campaign::pod::{remove_scope, Pod};

/// The writable cgroup v2 mount, if any (`/sys/fs/cgroup` on pure v2, `/sys/fs/cgroup/unified`
/// on hybrid hosts).
pub fn cgroup2_root() -> Option<PathBuf> {
    greenpipe_campaign::pod::cgroup2_root().ok()
}

/// A process tree running inside its own pod-shaped cgroup; stopped and removed on drop.
pub struct DemoPod {
    /// Pod UID (the `pod_uid` label).
    pub pod_uid: String,
    /// Container id (the `container_id` label).
    pub container_id: String,
    top: PathBuf,
    pod: Pod,
}

impl DemoPod {
    /// Creates `<cgroup2 root>/<scope>/kubepods/besteffort/pod<uid>/<id>` and runs `stress-ng
    /// <args>` in it. `scope` keeps parallel test runs apart.
    pub fn start(scope: &str, stress_args: &[&str]) -> anyhow::Result<DemoPod> {
        Self::start_program(scope, Path::new("stress-ng"), stress_args)
            .context("starting stress-ng (scripts/setup.sh installs it)")
    }

    /// Like [`DemoPod::start`], running `program <args>` instead of stress-ng.
    pub fn start_program(scope: &str, program: &Path, args: &[&str]) -> anyhow::Result<DemoPod> {
        let top = cgroup2_root().context("no cgroup2 mount")?.join(scope);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let pod = Pod::start(&top, program, &args, Path::new("/dev/null"))?;
        let pod = DemoPod {
            pod_uid: pod.pod_uid.clone(),
            container_id: pod.container_id.clone(),
            top,
            pod,
        };
        let procs = pod.pod.cgroup().join("cgroup.procs");
        let moved = crate::wait_for(Duration::from_secs(5), || {
            let procs = std::fs::read_to_string(&procs).ok()?;
            (!procs.trim().is_empty()).then_some(())
        });
        if moved.is_none() {
            bail!(
                "{} did not appear in {}",
                program.display(),
                procs.display()
            );
        }
        Ok(pod)
    }

    /// The container's cgroup directory.
    pub fn cgroup(&self) -> &Path {
        self.pod.cgroup()
    }

    /// The processes in the container's cgroup now.
    pub fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.cgroup().join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for DemoPod {
    fn drop(&mut self) {
        self.pod.stop(Duration::from_secs(10));
        remove_scope(&self.top);
    }
}
