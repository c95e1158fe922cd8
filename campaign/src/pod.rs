//! A process in its own pod-shaped cgroup: `<cgroup2>/<scope>/kubepods/besteffort/pod<uid>/<id>`,
//! the cgroupfs-driver layout of a kubelet, so the exporter attributes its usage to a container id
//! and pod UID through its ordinary cgroup parser, exactly as for a pod on a node.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why a pod could not be set up or its program found.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error("reading /proc/self/mounts")]
    Mounts(#[source] std::io::Error),
    #[error(
        "no cgroup v2 hierarchy is mounted: campaign steps need one to run in pod-shaped cgroups"
    )]
    NoCgroup2,
    #[error("creating cgroup {}", path.display())]
    Cgroup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("creating {}", path.display())]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting {}", command.display())]
    Start {
        command: PathBuf,
        source: std::io::Error,
    },
    #[error("{command} does not exist")]
    Missing { command: String },
    #[error("{command} is neither beside this binary nor on PATH")]
    NotFound { command: String },
}

/// The cgroup v2 mount.
pub fn cgroup2_root() -> Result<PathBuf, PodError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(PodError::Mounts)?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, target, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "cgroup2").then(|| PathBuf::from(target))
        })
        .next()
        .ok_or(PodError::NoCgroup2)
}

/// 64 random hex digits (a container id).
pub fn random_container_id() -> String {
    (0..4)
        .map(|_| format!("{:016x}", fastrand::u64(..)))
        .collect()
}

/// A random RFC 4122 version-4 UUID (a pod UID).
pub fn random_pod_uid() -> String {
    let a = fastrand::u64(..);
    let b = fastrand::u64(..);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// One running process and its cgroup.
pub struct Pod {
    /// Container id.
    pub container_id: String,
    /// Pod UID.
    pub pod_uid: String,
    pod_dir: PathBuf,
    leaf: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
}

impl std::fmt::Debug for Pod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pod").field("leaf", &self.leaf).finish()
    }
}

impl Pod {
    /// Creates the cgroup under `scope` and starts `command args` inside it (the shell moves
    /// itself into the cgroup before `exec`, so the program and all its children start there).
    /// Output goes to `log`. The process gets its own process group: a Ctrl-C at the terminal
    /// reaches the runner, which stops steps itself.
    pub fn start(
        scope: &Path,
        command: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Pod, PodError> {
        let container_id = random_container_id();
        let pod_uid = random_pod_uid();
        let pod_dir = scope
            .join("kubepods/besteffort")
            .join(format!("pod{pod_uid}"));
        let leaf = pod_dir.join(&container_id);
        std::fs::create_dir_all(&leaf).map_err(|source| PodError::Cgroup {
            path: leaf.clone(),
            source,
        })?;
        let log_error = |source| PodError::Log {
            path: log.to_path_buf(),
            source,
        };
        let out = std::fs::File::create(log).map_err(log_error)?;
        let err = out.try_clone().map_err(log_error)?;
        use std::os::unix::process::CommandExt as _;
        let spawned = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
            .arg(&leaf)
            .arg(command)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn();
        let mut pod = Pod {
            container_id,
            pod_uid,
            pod_dir,
            leaf,
            child: None,
            status: None,
        };
        pod.child = Some(spawned.map_err(|source| PodError::Start {
            command: command.to_path_buf(),
            source,
        })?);
        Ok(pod)
    }

    /// The container's cgroup (the leaf the process runs in).
    pub fn cgroup(&self) -> &Path {
        &self.leaf
    }

    /// The exit status, once the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(c) = &mut self.child {
                self.status = c.try_wait().ok().flatten();
            }
        }
        self.status
    }

    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.leaf.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGTERM to every process of the cgroup, SIGKILL to what is left after `grace`; then the
    /// cgroup is removed.
    pub fn stop(&mut self, grace: Duration) {
        for pid in self.members() {
            // SAFETY: kill(2) on pids read from this pod's own cgroup.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while !self.members().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let kill_deadline = Instant::now() + Duration::from_secs(5);
        while !self.members().is_empty() && Instant::now() < kill_deadline {
            for pid in self.members() {
                // SAFETY: as above.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(c) = &mut self.child {
            if self.status.is_none() {
                self.status = c.wait().ok();
            }
        }
        let _ = std::fs::remove_dir(&self.leaf);
        let _ = std::fs::remove_dir(&self.pod_dir);
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if self.leaf.exists() {
            self.stop(Duration::from_secs(2));
        }
    }
}

/// Removes the empty directories of a campaign's cgroup scope.
pub fn remove_scope(scope: &Path) {
    fn remove(dir: &Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    remove(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    remove(scope);
}

/// A program: a path as given, or a bare name found beside the running binary, then on `PATH`.
pub fn resolve_command(command: &str) -> Result<PathBuf, PodError> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        if !p.exists() {
            return Err(PodError::Missing {
                command: command.into(),
            });
        }
        return Ok(p);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(command)));
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(path_dirs.into_iter().map(|d| d.join(command)))
        .find(|p| p.is_file())
        .ok_or_else(|| PodError::NotFound {
            command: command.into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_shapes_the_exporter_parses() {
        let id = random_container_id();
        assert_eq!(id.len(), 64);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        let uid = random_pod_uid();
        let parts: Vec<usize> = uid.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{uid}");
        assert!(resolve_command("sh").is_ok());
        assert!(resolve_command("no-such-program-here").is_err());
    }
}
