//! Where the cgroup hierarchies are mounted: pure v2, hybrid (v1 controllers + v2 at
//! `unified/`) or pure v1.

use std::path::{Path, PathBuf};

/// Roots of the hierarchies the collector reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// The unified (v2) hierarchy.
    pub v2: Option<PathBuf>,
    /// v1 `cpuacct` controller.
    pub cpuacct: Option<PathBuf>,
    /// v1 `memory` controller.
    pub memory: Option<PathBuf>,
    /// v1 `blkio` controller.
    pub blkio: Option<PathBuf>,
    /// The v1 hierarchy walked to find containers (cpuacct, else memory, pids, systemd).
    pub v1_discovery: Option<PathBuf>,
}

impl Layout {
    /// Detects the layout under the cgroup filesystem root.
    pub fn detect(cgroupfs: &Path) -> Layout {
        if cgroupfs.join("cgroup.controllers").exists() {
            return Layout {
                v2: Some(cgroupfs.to_path_buf()),
                ..Layout::default()
            };
        }
        let unified = cgroupfs.join("unified");
        let v1 = |names: &[&str], marker: &str| {
            names
                .iter()
                .map(|n| cgroupfs.join(n))
                .find(|p| p.join(marker).exists())
        };
        let cpuacct = v1(&["cpuacct", "cpu,cpuacct", "cpuacct,cpu"], "cpuacct.usage");
        let memory = v1(&["memory"], "memory.usage_in_bytes");
        let blkio = v1(&["blkio"], "blkio.throttle.io_service_bytes");
        let v1_discovery = cpuacct
            .clone()
            .or_else(|| memory.clone())
            .or_else(|| v1(&["pids", "systemd"], "cgroup.procs"));
        Layout {
            v2: unified
                .join("cgroup.controllers")
                .exists()
                .then_some(unified),
            cpuacct,
            memory,
            blkio,
            v1_discovery,
        }
    }

    /// True when no hierarchy was found.
    pub fn is_empty(&self) -> bool {
        self.v2.is_none() && self.v1_discovery.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn pure_v2() {
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "cgroup.controllers");
        let l = Layout::detect(d.path());
        assert_eq!(l.v2.as_deref(), Some(d.path()));
        assert!(l.cpuacct.is_none() && l.v1_discovery.is_none());
    }

    #[test]
    fn hybrid_with_combined_cpu_controller() {
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "unified/cgroup.controllers");
        touch(d.path(), "cpu,cpuacct/cpuacct.usage");
        touch(d.path(), "memory/memory.usage_in_bytes");
        let l = Layout::detect(d.path());
        assert_eq!(l.v2, Some(d.path().join("unified")));
        assert_eq!(l.cpuacct, Some(d.path().join("cpu,cpuacct")));
        assert_eq!(l.v1_discovery, l.cpuacct);
        assert!(l.blkio.is_none());
    }

    #[test]
    fn nothing_mounted() {
        let d = tempfile::tempdir().unwrap();
        assert!(Layout::detect(d.path()).is_empty());
    }
}
