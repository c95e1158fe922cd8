//! cgroup v2 id → cgroup path → container, for sources keyed by cgroup id (BPF, perf).
//!
//! A cgroup v2 id is the inode number of the cgroup's directory (`bpf_get_current_cgroup_id`
//! returns it), so one walk of the v2 tree maps every live id to its path, and from the path
//! [`greenpipe_common::container_id::from_cgroup_path`] gives the container. On a hybrid host the v2 tree
//! is `<cgroupfs>/unified`; on a pure v2 host it is `<cgroupfs>` itself.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

use greenpipe_common::container_id::{from_cgroup_path, ContainerRef};

use crate::cgroup_watch::TreeWatch;

/// The mount point of the cgroup v2 hierarchy under `cgroupfs`, if there is one.
pub fn v2_root(cgroupfs: &Path) -> Option<PathBuf> {
    [cgroupfs.to_path_buf(), cgroupfs.join("unified")]
        .into_iter()
        .find(|dir| dir.join("cgroup.controllers").is_file())
}

/// `CGROUP2_SUPER_MAGIC` of `statfs(2)`.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The v2 root for sources keyed by real cgroup ids (BPF, perf): like [`v2_root`], but the
/// directory must be a mounted cgroup2 file system. A fixture tree (`--path.cgroupfs` in tests)
/// has inode numbers no kernel id will ever match, so those sources are unavailable there.
pub fn mounted_v2_root(cgroupfs: &Path) -> Result<PathBuf, String> {
    let root = v2_root(cgroupfs)
        .ok_or_else(|| format!("no cgroup v2 hierarchy under {}", cgroupfs.display()))?;
    let c_path = std::ffi::CString::new(root.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: path contains NUL", root.display()))?;
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c_path.as_ptr(), &mut fs) } != 0 {
        return Err(format!(
            "statfs {}: {}",
            root.display(),
            io::Error::last_os_error()
        ));
    }
    if fs.f_type as i64 != CGROUP2_SUPER_MAGIC {
        return Err(format!("{} is not a cgroup2 mount", root.display()));
    }
    Ok(root)
}

/// A live cgroup v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupEntry {
    /// Path within the hierarchy (`/system.slice/docker-<id>.scope`).
    pub path: String,
    /// The container it belongs to; `None` for host cgroups.
    pub container: Option<ContainerRef>,
}

/// The ids of every live cgroup v2, as of the last [`CgroupIndex::walk`].
#[derive(Debug)]
pub struct CgroupIndex {
    root: PathBuf,
    by_id: HashMap<u64, CgroupEntry>,
    watch: TreeWatch,
}

impl CgroupIndex {
    /// An empty index over the v2 tree mounted at `root`.
    pub fn new(root: PathBuf) -> CgroupIndex {
        CgroupIndex {
            root,
            by_id: HashMap::new(),
            watch: TreeWatch::new(),
        }
    }

    /// Mount point of the tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether a cgroup was made, removed or renamed since the last walk (or the tree was never
    /// walked, or changes cannot be seen: [`TreeWatch`]).
    pub fn changed(&mut self) -> bool {
        self.watch.changed()
    }

    /// Re-reads the whole tree. Directory inode numbers come from `readdir` (no `stat` per
    /// cgroup), so a walk costs one `getdents` per cgroup.
    pub fn walk(&mut self) -> io::Result<()> {
        self.watch.walking();
        let walked = self.walk_tree();
        if walked.is_err() {
            self.watch.walk_failed();
        }
        walked
    }

    fn walk_tree(&mut self) -> io::Result<()> {
        let mut by_id = HashMap::with_capacity(self.by_id.len().max(64));
        let root_id = std::fs::metadata(&self.root)?.ino();
        by_id.insert(
            root_id,
            CgroupEntry {
                path: "/".into(),
                container: None,
            },
        );
        let mut stack = vec![(self.root.clone(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            self.watch.watch(&dir);
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                // Removed while we walked: it is simply not live any more.
                Err(e) if e.kind() == io::ErrorKind::NotFound && dir != self.root => continue,
                Err(e) => return Err(e),
            };
            for entry in entries.flatten() {
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                if !is_dir {
                    continue;
                }
                let name = entry.file_name();
                let path = format!("{rel}/{}", name.to_string_lossy());
                by_id.insert(
                    entry.ino(),
                    CgroupEntry {
                        container: from_cgroup_path(&path),
                        path: path.clone(),
                    },
                );
                stack.push((entry.path(), path));
            }
        }
        self.by_id = by_id;
        Ok(())
    }

    /// The cgroup with this id, if it was live at the last walk.
    pub fn get(&self, id: u64) -> Option<&CgroupEntry> {
        self.by_id.get(&id)
    }

    /// Every live cgroup.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &CgroupEntry)> {
        self.by_id.iter().map(|(id, e)| (*id, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_maps_directory_inodes_to_paths_and_containers() {
        let dir = tempfile::tempdir().unwrap();
        let id = "ab".repeat(32);
        let scope = dir
            .path()
            .join("system.slice")
            .join(format!("docker-{id}.scope"));
        std::fs::create_dir_all(&scope).unwrap();
        std::fs::write(dir.path().join("cgroup.controllers"), "").unwrap();
        assert_eq!(v2_root(dir.path()).as_deref(), Some(dir.path()));
        let mut index = CgroupIndex::new(dir.path().to_path_buf());
        index.walk().unwrap();
        let ino = std::fs::metadata(&scope).unwrap().ino();
        let entry = index.get(ino).unwrap();
        assert_eq!(entry.path, format!("/system.slice/docker-{id}.scope"));
        assert_eq!(entry.container.as_ref().unwrap().container_id, id);
        let slice = std::fs::metadata(dir.path().join("system.slice"))
            .unwrap()
            .ino();
        assert_eq!(index.get(slice).unwrap().container, None);
        assert_eq!(index.iter().count(), 3);
    }

    #[test]
    fn fixture_trees_are_not_cgroup2_mounts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.controllers"), "").unwrap();
        let err = mounted_v2_root(dir.path()).unwrap_err();
        assert!(err.contains("not a cgroup2 mount"), "{err}");
        let err = mounted_v2_root(&dir.path().join("nope")).unwrap_err();
        assert!(err.contains("no cgroup v2 hierarchy"), "{err}");
    }

    #[test]
    fn hybrid_hosts_use_the_unified_mount() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("unified")).unwrap();
        std::fs::write(dir.path().join("unified/cgroup.controllers"), "").unwrap();
        assert_eq!(v2_root(dir.path()), Some(dir.path().join("unified")));
        assert_eq!(v2_root(&dir.path().join("nope")), None);
    }
}
