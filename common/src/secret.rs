//! Secrets (tokens, passwords) are read from files, never taken from the command line where
//! `ps` and shell history would show them. One reader for the estimator's endpoint credentials
//! and the carbon providers' tokens, trimmed like Prometheus trims `*_file` secrets.

use std::path::{Path, PathBuf};

/// Why a secret file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds only whitespace.
    #[error("{} is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads the secret in `path`, surrounding whitespace (the trailing newline) removed; an
/// unreadable or empty file is an error.
pub fn read_secret_file(path: &Path) -> Result<String, SecretError> {
    let text = std::fs::read_to_string(path).map_err(|source| SecretError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(SecretError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(secret.to_string())
}
