//! Roots of the host trees the collectors read.
//!
//! In a container the host's `/proc`, `/sys` and cgroup tree are bind-mounted elsewhere; in tests
//! they point at fixture trees. Collectors never spell an absolute host path themselves. Host
//! files outside those trees (a Jetson's `/etc/nvpmodel.conf` and `/var/lib/nvpmodel/status`)
//! are read under [`Paths::rootfs`], node_exporter's `--path.rootfs`.

use std::path::{Path, PathBuf};

/// Where to find procfs, sysfs and the cgroup filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Mount point of procfs (default `/proc`).
    pub procfs: PathBuf,
    /// Mount point of sysfs (default `/sys`).
    pub sysfs: PathBuf,
    /// Mount point of the cgroup filesystem (default `/sys/fs/cgroup`).
    pub cgroupfs: PathBuf,
    /// The host's root filesystem (default `/`), for host files outside procfs and sysfs.
    pub rootfs: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            procfs: PathBuf::from("/proc"),
            sysfs: PathBuf::from("/sys"),
            cgroupfs: PathBuf::from("/sys/fs/cgroup"),
            rootfs: PathBuf::from("/"),
        }
    }
}

impl Paths {
    /// A file under procfs.
    pub fn proc(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.procfs.join(rel)
    }

    /// A file under sysfs.
    pub fn sys(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.sysfs.join(rel)
    }

    /// A file under the cgroup filesystem.
    pub fn cgroup(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.cgroupfs.join(rel)
    }

    /// A host file under the root filesystem; `rel` is relative (`etc/nvpmodel.conf`).
    pub fn root(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.rootfs.join(rel)
    }
}
