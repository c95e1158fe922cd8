//! Reading small kernel text files cheaply, every tick.
//!
//! On a VM a system call costs microseconds, and with 100 containers the cgroup collector reads
//! about 400 files per tick. A [`TextFile`] therefore keeps its file open and re-reads it from
//! offset 0 with `pread`. procfs, sysfs and cgroupfs regenerate the text on a read at offset 0, so
//! this is one or two system calls per file per tick instead of six (`openat`, `statx`, `lseek`,
//! two `read`s and `close` for `fs::read_to_string`). The text goes into a buffer that is reused
//! across ticks.
//!
//! Open descriptors are capped at half the process's file limit (raised to its hard limit once);
//! past the cap, files are opened and closed on each read as before.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::CollectError;

/// Descriptors currently kept open by [`TextFile`]s.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// How many descriptors [`TextFile`]s may keep: half the (raised) `RLIMIT_NOFILE`.
fn keep_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        // SAFETY: getrlimit/setrlimit read and write the struct we own.
        let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        (lim.rlim_cur / 2).min(1 << 20) as usize
    })
}

/// Reads the whole of `file` from offset 0 into `buf`, replacing its contents.
///
/// A read that does not fill the buffer ends the file: seq_file (procfs, cgroupfs), sysfs and
/// regular files only return short at the end.
fn read_from_start(file: &File, buf: &mut String) -> std::io::Result<()> {
    let mut bytes = std::mem::take(buf).into_bytes();
    bytes.clear();
    bytes.resize(bytes.capacity().max(512), 0);
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len * 2, 0);
        }
        let room = bytes.len() - len;
        match file.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => break,
            Ok(n) if n < room => {
                len += n;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(len);
    *buf = String::from_utf8(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(())
}

/// Opens, reads and closes `path` into `buf` (for files read once or rarely).
pub fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    read_from_start(&File::open(path)?, buf)
}

/// A source file read every tick: its path, a kept descriptor and the buffer its text goes to.
#[derive(Debug)]
pub struct TextFile {
    path: PathBuf,
    file: Option<File>,
    buf: String,
}

impl TextFile {
    /// A file to be read each tick (opened on the first read).
    pub fn new(path: PathBuf) -> TextFile {
        TextFile {
            path,
            file: None,
            buf: String::new(),
        }
    }

    /// Fails with `Unavailable` if the file cannot be read now (used by collectors' `build`).
    pub fn probe(path: PathBuf) -> Result<TextFile, CollectError> {
        let mut file = TextFile::new(path);
        file.read()?;
        Ok(file)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file and returns its text (valid until the next read).
    pub fn read(&mut self) -> Result<&str, CollectError> {
        self.read_io()
            .map_err(|e| CollectError::from_io(&self.path, e))?;
        Ok(&self.buf)
    }

    fn read_io(&mut self) -> std::io::Result<()> {
        if let Some(file) = &self.file {
            if read_from_start(file, &mut self.buf).is_ok() {
                return Ok(());
            }
            // The file went away under the descriptor (cgroup removed, process exited):
            // reopen by path below to tell "gone" from "replaced".
            self.close();
        }
        let file = File::open(&self.path)?;
        read_from_start(&file, &mut self.buf)?;
        if KEPT.fetch_add(1, Ordering::Relaxed) < keep_budget() {
            self.file = Some(file);
        } else {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn close(&mut self) {
        if self.file.take().is_some() {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for TextFile {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_small_and_large_files_into_the_same_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(10_000);
        std::fs::write(dir.path().join("big"), &big).unwrap();
        std::fs::write(dir.path().join("small"), "42\n").unwrap();
        let mut buf = String::new();
        read_into(&dir.path().join("big"), &mut buf).unwrap();
        assert_eq!(buf, big);
        read_into(&dir.path().join("small"), &mut buf).unwrap();
        assert_eq!(buf, "42\n");
        assert!(read_into(&dir.path().join("missing"), &mut buf).is_err());
    }

    #[test]
    fn kept_file_sees_new_contents_and_reports_removal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value");
        std::fs::write(&path, "1\n").unwrap();
        let mut file = TextFile::new(path.clone());
        assert_eq!(file.read().unwrap(), "1\n");
        std::fs::write(&path, "22\n").unwrap(); // same inode, truncated and rewritten
        assert_eq!(file.read().unwrap(), "22\n");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "333\n").unwrap(); // a new file at the path
                                                 // A regular file stays readable through the old descriptor; kernel files do not.
                                                 // Either way the next read after the old one fails picks up the new file.
        let _ = file.read().unwrap();
    }

    #[test]
    fn procfs_is_regenerated_on_each_read() {
        // /proc/stat's CPU times, not /proc/self/stat: under qemu-user (scripts/test-arm.sh)
        // /proc/self is qemu's own snapshot, taken at open and never regenerated.
        let mut file = TextFile::new(PathBuf::from("/proc/stat"));
        let first = file.read().unwrap().to_string();
        let mut x = 0u64;
        for i in 0..30_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let second = file.read().unwrap().to_string();
        assert_ne!(first, second, "CPU times move while we spin");
    }
}
