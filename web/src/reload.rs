//! The loaded web configuration, rebuilt when the file or a certificate it names changes.
//!
//! exporter-toolkit re-reads the file for every request and every TLS handshake. Here a change is
//! noticed by `stat`-ing the file and the certificate, key and CA files (modification time, size,
//! inode: cert-manager and kubelet swap a symlink, which changes the inode) on every request and
//! connection, and only then re-read: the same rotation without parsing a key per scrape. Whether
//! TLS is on is fixed at start, as in exporter-toolkit. A changed file that no longer loads is
//! logged and the last good configuration stays in force, so a half-written rotation does not
//! take the endpoint down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use tracing::{info, warn};

use crate::config::{ConfigError, WebConfigFile};
use crate::tls::{self, TlsError};

/// A web config file that does not load; each names the file, key or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read or is not the schema.
    #[error(transparent)]
    File(#[from] ConfigError),
    /// A `basic_auth_users` entry whose value is not a bcrypt hash.
    #[error("basic_auth_users.{user}: not a bcrypt hash: {error}")]
    NotBcrypt {
        /// The user.
        user: String,
        /// bcrypt's reason.
        error: bcrypt::BcryptError,
    },
    /// A header name that is not a valid HTTP header name.
    #[error("http_server_config.headers: {header:?}")]
    HeaderName {
        /// The name in the file.
        header: String,
        /// Why.
        source: axum::http::header::InvalidHeaderName,
    },
    /// A header value that is not a valid HTTP header value.
    #[error("http_server_config.headers.{header}: {value:?}")]
    HeaderValue {
        /// The header.
        header: String,
        /// The value in the file.
        value: String,
        /// Why.
        source: axum::http::header::InvalidHeaderValue,
    },
    /// `tls_server_config` does not make a TLS configuration.
    #[error("web config {}", path.display())]
    Tls {
        /// The web config file.
        path: PathBuf,
        /// What is wrong in its `tls_server_config` (boxed: rustls' errors are large).
        source: Box<TlsError>,
    },
    /// `rate_limit` is not valid.
    #[error("web config {}", path.display())]
    RateLimit {
        /// The web config file.
        path: PathBuf,
        /// What is wrong in its `rate_limit`.
        source: ConfigError,
    },
}

/// What one load of the file produced.
pub struct Settings {
    /// TLS configuration for new connections (`None`: plain HTTP).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User → bcrypt hash; empty means no authentication.
    pub users: BTreeMap<String, String>,
    /// Extra response headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `(interval, burst)`.
    pub rate_limit: Option<(Duration, u32)>,
    /// HTTP/2 offered over TLS.
    pub http2: bool,
    stamps: Stamps,
}

/// Each watched file and what `stat` said about it (`None`: missing).
type Stamps = Vec<(PathBuf, Option<Stamp>)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    ino: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    // metadata follows symlinks: a swapped ..data link shows as a new inode.
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        ino: m.ino(),
    })
}

/// Loads and checks the whole file, certificates included. Every error names the key or file.
pub fn load_settings(path: &Path) -> Result<Settings, LoadError> {
    let file = WebConfigFile::read(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let users = file.users();
    for (user, hash) in &users {
        hash.parse::<bcrypt::HashParts>()
            .map_err(|error| LoadError::NotBcrypt {
                user: user.clone(),
                error,
            })?;
    }
    let headers = file
        .headers()
        .into_iter()
        .map(|(k, v)| {
            let name =
                HeaderName::try_from(k.as_str()).map_err(|source| LoadError::HeaderName {
                    header: k.clone(),
                    source,
                })?;
            let value =
                HeaderValue::try_from(v.as_str()).map_err(|source| LoadError::HeaderValue {
                    header: k.clone(),
                    value: v.clone(),
                    source,
                })?;
            Ok((name, value))
        })
        .collect::<Result<Vec<_>, LoadError>>()?;
    let http2 = file.http2();
    let tls_section = file.tls_server_config.clone().unwrap_or_default();
    let mut stamps = vec![(path.to_path_buf(), stamp(path))];
    let tls = if tls_section.is_enabled() {
        let built = tls::build(&tls_section, dir, http2).map_err(|source| LoadError::Tls {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
        stamps.extend(built.files.iter().map(|f| (f.clone(), stamp(f))));
        Some(built.config)
    } else {
        None
    };
    Ok(Settings {
        tls,
        users,
        headers,
        rate_limit: file.rate_limit().map_err(|source| LoadError::RateLimit {
            path: path.to_path_buf(),
            source,
        })?,
        http2,
        stamps,
    })
}

/// The configuration in force, reloaded on change.
pub struct WebConfig {
    path: PathBuf,
    current: RwLock<Arc<Settings>>,
    tls_at_start: bool,
    /// The stamps of the last version that failed to load, so one bad version is logged once.
    failed: Mutex<Option<Stamps>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls_at_start)
            .finish()
    }
}

impl WebConfig {
    /// Loads `path`; any error is a start-up error.
    pub fn load(path: &Path) -> Result<Arc<WebConfig>, LoadError> {
        let settings = load_settings(path)?;
        info!(
            file = %path.display(),
            tls = settings.tls.is_some(),
            basic_auth_users = settings.users.len(),
            http2 = settings.http2,
            "web config loaded"
        );
        Ok(Arc::new(WebConfig {
            path: path.to_path_buf(),
            tls_at_start: settings.tls.is_some(),
            current: RwLock::new(Arc::new(settings)),
            failed: Mutex::new(None),
        }))
    }

    /// Whether the server speaks TLS (fixed at start).
    pub fn tls(&self) -> bool {
        self.tls_at_start
    }

    /// The settings for a new request or connection, reloading them first if a file changed.
    pub fn current(&self) -> Arc<Settings> {
        let now = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stamps: Vec<_> = now
            .stamps
            .iter()
            .map(|(p, _)| (p.clone(), stamp(p)))
            .collect();
        if stamps == now.stamps {
            return now;
        }
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.as_ref() == Some(&stamps) {
            return now;
        }
        match load_settings(&self.path) {
            Ok(new) if new.tls.is_some() != self.tls_at_start => {
                warn!(file = %self.path.display(), "turning TLS on or off needs a restart; keeping the previous web config");
                *failed = Some(stamps);
                now
            }
            Ok(new) => {
                info!(file = %self.path.display(), "web config or certificate changed; reloaded");
                let new = Arc::new(new);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
                *failed = None;
                new
            }
            Err(e) => {
                warn!(error = %greenpipe_common::error_chain(&e), "web config changed but does not load; keeping the previous one");
                *failed = Some(stamps);
                now
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_errors_name_the_user_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        std::fs::write(&path, "basic_auth_users:\n  alice: plaintext\n").unwrap();
        let e = load_settings(&path).err().unwrap();
        assert!(
            matches!(&e, LoadError::NotBcrypt { user, .. } if user == "alice"),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("basic_auth_users.alice: not a bcrypt hash"),
            "{e}"
        );

        std::fs::write(
            &path,
            "tls_server_config:\n  cert_file: absent.pem\n  key_file: k\n",
        )
        .unwrap();
        let e = load_settings(&path).err().unwrap();
        assert!(matches!(&e, LoadError::Tls { .. }), "{e}");
        // The log line of a failed reload carries the whole chain: file, key, file read, errno.
        let line = greenpipe_common::error_chain(&e);
        assert!(
            line.starts_with(&format!(
                "web config {}: failed to read cert_file (",
                path.display()
            )) && line.contains("absent.pem")
                && line.contains("No such file"),
            "{line}"
        );
    }
}
