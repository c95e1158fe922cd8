//! Reading small kernel text files without allocating per tick.
//!
//! procfs, sysfs and cgroupfs files are generated on read and are small; a collector keeps one
//! [`TextFile`] (path + buffer) per file it reads every tick so the steady state allocates nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::CollectError;

/// Reads `path` into `buf`, replacing its contents.
pub fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    std::fs::File::open(path)?.read_to_string(buf)?;
    Ok(())
}

/// A source file and the buffer its text is read into.
#[derive(Debug)]
pub struct TextFile {
    path: PathBuf,
    buf: String,
}

impl TextFile {
    /// A file to be read each tick.
    pub fn new(path: PathBuf) -> TextFile {
        TextFile {
            path,
            buf: String::with_capacity(4096),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fails with `Unavailable` if the file cannot be read now (used by collectors' `build`).
    pub fn probe(path: PathBuf) -> Result<TextFile, CollectError> {
        let mut file = TextFile::new(path);
        file.read()?;
        Ok(file)
    }

    /// Reads the file and returns its text (valid until the next read).
    pub fn read(&mut self) -> Result<&str, CollectError> {
        read_into(&self.path, &mut self.buf).map_err(|e| CollectError::from_io(&self.path, e))?;
        Ok(&self.buf)
    }
}

/// Parses a `Key: value [kB]` or `key value` line's numeric value; `None` if malformed.
pub fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}
