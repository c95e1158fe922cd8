//! Tells the cgroup and eBPF collectors when a cgroup hierarchy changed shape, so they walk it
//! only then.
//!
//! Walking costs a `stat`, and for inner cgroups an `openat`, `fstat`, two `getdents64` and a
//! `close`, per directory per hierarchy: on a systemd host with 100 pods that was ~2,800 system
//! calls per tick, two thirds of the collector's kernel time, to find the same directories again.
//! Cgroups are created and removed only by `mkdir`, `rmdir` and `rename` on the cgroup
//! filesystem (the kernel never adds a cgroup directory by itself), and the VFS reports those to
//! inotify on any filesystem, so a watch on every directory walked sees every change below it.
//! A directory is watched before it is listed: a child made after the listing is an event, one
//! made before is in the listing.
//!
//! Anything uncertain means "walk": no inotify (logged once), a watch that cannot be added (the
//! `fs.inotify.max_user_watches` limit), a queue overflow, or a read error.

use std::path::Path;

use inotify::{EventMask, Inotify, WatchMask};
use tracing::warn;

/// Events on a watched directory that change the set of cgroups below it.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// Whether the trees must be walked again.
#[derive(Debug)]
pub struct TreeWatch {
    inotify: Option<Inotify>,
    /// Set when a change was seen or a watch could not be added; cleared by [`TreeWatch::walking`].
    stale: bool,
    buffer: Vec<u8>,
}

impl Default for TreeWatch {
    fn default() -> TreeWatch {
        TreeWatch::new()
    }
}

impl TreeWatch {
    /// A watch with nothing watched yet: the first [`TreeWatch::changed`] says walk.
    pub fn new() -> TreeWatch {
        let inotify = Inotify::init()
            .inspect_err(|e| {
                warn!(error = %e, "inotify unavailable: the cgroup trees are walked every tick");
            })
            .ok();
        TreeWatch {
            inotify,
            stale: true,
            buffer: vec![0; 4096],
        }
    }

    /// Watches `dir` for cgroups made, removed or renamed in it. Call it before listing `dir`.
    pub fn watch(&mut self, dir: &Path) {
        let Some(inotify) = &mut self.inotify else {
            return;
        };
        if let Err(e) = inotify.watches().add(dir, mask()) {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                warn!(dir = %dir.display(), "fs.inotify.max_user_watches reached: the cgroup trees are walked every tick");
                self.inotify = None;
            }
            // Any other error (the directory went away) is a change the next walk sees.
            self.stale = true;
        }
    }

    /// Whether anything below a watched directory changed since the last walk (or the trees were
    /// never walked, or changes cannot be seen).
    pub fn changed(&mut self) -> bool {
        let Some(inotify) = &mut self.inotify else {
            return true;
        };
        loop {
            match inotify.read_events(&mut self.buffer) {
                Ok(events) => {
                    let mut any = false;
                    for event in events {
                        any = true;
                        // Files made or removed in a watched directory (not on cgroupfs, where
                        // the kernel makes them) and IGNORED, which follows a removal the
                        // parent's DELETE already reported, change no cgroup.
                        if event.mask.intersects(
                            EventMask::ISDIR
                                | EventMask::DELETE_SELF
                                | EventMask::MOVE_SELF
                                | EventMask::Q_OVERFLOW,
                        ) {
                            self.stale = true;
                        }
                    }
                    if !any {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.stale = true;
                    break;
                }
            }
        }
        self.stale
    }

    /// The trees are about to be walked: changes from now on (and watches the walk fails to add)
    /// make the next walk.
    pub fn walking(&mut self) {
        self.stale = false;
    }

    /// The walk did not finish: walk again next tick.
    pub fn walk_failed(&mut self) {
        self.stale = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_removed_and_renamed_directories_are_changes_and_nothing_else_is() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir(root.join("a")).unwrap();
        let mut w = TreeWatch::new();
        assert!(w.changed(), "never walked");
        w.watch(root);
        w.watch(&root.join("a"));
        w.walking();
        assert!(!w.changed());

        std::fs::write(root.join("a/cpu.stat"), "usage_usec 1\n").unwrap();
        assert!(!w.changed(), "a file written is not a new cgroup");
        std::fs::remove_file(root.join("a/cpu.stat")).unwrap();

        std::fs::create_dir(root.join("a/b")).unwrap();
        assert!(w.changed(), "made below a watched directory");
        assert!(w.changed(), "stays stale until walked");
        w.watch(&root.join("a/b"));
        w.walking();
        assert!(!w.changed());

        std::fs::rename(root.join("a/b"), root.join("a/c")).unwrap();
        assert!(w.changed(), "renamed");
        w.walking();
        std::fs::remove_dir(root.join("a/c")).unwrap();
        assert!(w.changed(), "removed");
        w.walking();
        assert!(
            !w.changed(),
            "the removed directory's own IGNORED is not another change"
        );
    }

    #[test]
    fn a_directory_that_cannot_be_watched_means_walk_again() {
        let d = tempfile::tempdir().unwrap();
        let mut w = TreeWatch::new();
        w.watch(&d.path().join("gone"));
        assert!(w.changed());
    }
}
