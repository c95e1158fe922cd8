//! The `--web.config.file` schema, key for key as Prometheus' exporter-toolkit reads it
//! (`web/tls_config.go`, `docs/web-configuration.md`), so a file written for node_exporter works
//! here unchanged. Unknown keys are errors, as with Go's `yaml.UnmarshalStrict`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A web config file that cannot be read or is not exporter-toolkit's schema.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("reading web config {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not YAML, or a key or value outside the schema (the parser's message names it).
    #[error("web config {name}: {message}")]
    Syntax {
        /// The file (as given to [`WebConfigFile::parse`]).
        name: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// `http_server_config.headers` names a header exporter-toolkit does not let a file set.
    #[error("web config {name}: HTTP header {header:?} can not be configured")]
    HeaderNotAllowed {
        /// The file.
        name: String,
        /// The header.
        header: String,
    },
    /// A settable header with a value outside the ones exporter-toolkit accepts.
    #[error(
        "web config {name}: invalid value for {header}: expected one of {allowed:?}, got {value:?}"
    )]
    HeaderValue {
        /// The file.
        name: String,
        /// The header.
        header: String,
        /// The accepted values.
        allowed: &'static [&'static str],
        /// The value in the file.
        value: String,
    },
    /// `rate_limit.interval` is not a duration.
    #[error("rate_limit.interval {text:?}")]
    RateLimitInterval {
        /// The value in the file.
        text: String,
        /// Why it does not parse.
        source: humantime::DurationError,
    },
}

/// The whole file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfigFile {
    /// TLS; absent (or empty) means plain HTTP.
    #[serde(default)]
    pub tls_server_config: Option<TlsServerConfig>,
    /// HTTP/2 and extra response headers.
    #[serde(default)]
    pub http_server_config: Option<HttpServerConfig>,
    /// User name → bcrypt hash. Empty means no authentication.
    #[serde(default)]
    pub basic_auth_users: Option<BTreeMap<String, String>>,
    /// Token-bucket rate limit over all requests.
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
}

/// `tls_server_config`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    /// Inline PEM certificate (chain).
    #[serde(default)]
    pub cert: Option<String>,
    /// Inline PEM private key.
    #[serde(default)]
    pub key: Option<String>,
    /// Inline PEM CA bundle for client certificates.
    #[serde(default)]
    pub client_ca: Option<String>,
    /// Certificate chain file (relative paths are relative to the web config file).
    #[serde(default)]
    pub cert_file: Option<String>,
    /// Private key file.
    #[serde(default)]
    pub key_file: Option<String>,
    /// `NoClientCert` (default), `RequestClientCert`, `RequireAnyClientCert`,
    /// `VerifyClientCertIfGiven`, `RequireAndVerifyClientCert`.
    #[serde(default)]
    pub client_auth_type: Option<String>,
    /// CA bundle file for client certificates.
    #[serde(default)]
    pub client_ca_file: Option<String>,
    /// Client certificates must carry one of these SANs (DNS, IP, URI; exact match).
    #[serde(default)]
    pub client_allowed_sans: Option<Vec<String>>,
    /// `TLS10` … `TLS13`, default `TLS12`.
    #[serde(default)]
    pub min_version: Option<String>,
    /// Default `TLS13`.
    #[serde(default)]
    pub max_version: Option<String>,
    /// TLS 1.2 cipher suites by their Go names; TLS 1.3 suites are not configurable (as in Go).
    #[serde(default)]
    pub cipher_suites: Option<Vec<String>>,
    /// Server order of `cipher_suites` wins (default true).
    #[serde(default)]
    pub prefer_server_cipher_suites: Option<bool>,
    /// Key-exchange groups by Go name (`X25519`, `CurveP256`, `CurveP384`), in preference order.
    #[serde(default)]
    pub curve_preferences: Option<Vec<String>>,
}

impl TlsServerConfig {
    /// Whether any TLS key is set (exporter-toolkit's `IsEnabled`): then a certificate and key
    /// are required.
    pub fn is_enabled(&self) -> bool {
        let set = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
        set(&self.cert)
            || set(&self.key)
            || set(&self.cert_file)
            || set(&self.key_file)
            || set(&self.client_ca)
            || set(&self.client_ca_file)
            || set(&self.client_auth_type)
    }
}

/// `http_server_config`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpServerConfig {
    /// Offer HTTP/2 over TLS (default true). Read at start only.
    #[serde(default)]
    pub http2: Option<bool>,
    /// Extra response headers (only the five exporter-toolkit allows).
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
}

/// `rate_limit`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Time between two requests (Go duration, e.g. `100ms`); `0` disables.
    #[serde(default)]
    pub interval: Option<String>,
    /// Requests allowed in a burst.
    #[serde(default)]
    pub burst: Option<u32>,
}

/// Headers exporter-toolkit lets a web config set, with the values it accepts (empty: any).
const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

impl WebConfigFile {
    /// Parses the YAML text; `name` is used in error messages.
    pub fn parse(text: &str, name: &str) -> Result<WebConfigFile, ConfigError> {
        // An empty file (or only comments) is a valid config with nothing in it.
        let meaningful = text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if !meaningful {
            return Ok(WebConfigFile::default());
        }
        let file: WebConfigFile =
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Syntax {
                name: name.to_string(),
                message: e.to_string().trim_end().to_string(),
            })?;
        file.check_headers(name)?;
        Ok(file)
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<WebConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        WebConfigFile::parse(&text, &path.display().to_string())
    }

    fn check_headers(&self, file: &str) -> Result<(), ConfigError> {
        let headers = self
            .http_server_config
            .as_ref()
            .and_then(|h| h.headers.as_ref());
        for (name, value) in headers.into_iter().flatten() {
            let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(h, _)| h == name) else {
                return Err(ConfigError::HeaderNotAllowed {
                    name: file.to_string(),
                    header: name.clone(),
                });
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(ConfigError::HeaderValue {
                    name: file.to_string(),
                    header: name.clone(),
                    allowed,
                    value: value.clone(),
                });
            }
        }
        Ok(())
    }

    /// The configured users (empty map when none).
    pub fn users(&self) -> BTreeMap<String, String> {
        self.basic_auth_users.clone().unwrap_or_default()
    }

    /// `http_server_config.http2`, default true.
    pub fn http2(&self) -> bool {
        self.http_server_config
            .as_ref()
            .and_then(|h| h.http2)
            .unwrap_or(true)
    }

    /// Extra headers (validated at parse).
    pub fn headers(&self) -> BTreeMap<String, String> {
        self.http_server_config
            .as_ref()
            .and_then(|h| h.headers.clone())
            .unwrap_or_default()
    }

    /// `(interval, burst)` when a rate limit is on.
    pub fn rate_limit(&self) -> Result<Option<(Duration, u32)>, ConfigError> {
        let Some(r) = &self.rate_limit else {
            return Ok(None);
        };
        let interval = match r.interval.as_deref() {
            None | Some("0") | Some("") => return Ok(None),
            Some(text) => humantime::parse_duration(text).map_err(|source| {
                ConfigError::RateLimitInterval {
                    text: text.to_string(),
                    source,
                }
            })?,
        };
        if interval.is_zero() {
            return Ok(None);
        }
        Ok(Some((interval, r.burst.unwrap_or(0))))
    }
}

/// A path from the file, made relative to the file's directory (exporter-toolkit's
/// `SetDirectory`).
pub fn resolve(dir: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_example() {
        let text = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
                    client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  \
                    min_version: TLS12\n  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n  \
                    curve_preferences: [X25519]\n  prefer_server_cipher_suites: true\n\
                    http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n\
                    basic_auth_users:\n  alice: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n\
                    rate_limit:\n  interval: 100ms\n  burst: 5\n";
        let c = WebConfigFile::parse(text, "t").unwrap();
        let tls = c.tls_server_config.as_ref().unwrap();
        assert!(tls.is_enabled());
        assert_eq!(tls.cert_file.as_deref(), Some("server.crt"));
        assert!(!c.http2());
        assert_eq!(c.users().len(), 1);
        assert_eq!(
            c.rate_limit().unwrap(),
            Some((Duration::from_millis(100), 5))
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        for (text, word) in [
            ("tls_server_config:\n  cert_fil: x\n", "cert_fil"),
            ("basic_auth_user:\n  a: b\n", "basic_auth_user"),
            ("http_server_config:\n  http3: true\n", "http3"),
        ] {
            let e = WebConfigFile::parse(text, "t").unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
    }

    #[test]
    fn headers_are_checked_like_exporter_toolkit() {
        let bad = "http_server_config:\n  headers:\n    Server: x\n";
        assert!(format!("{:#}", WebConfigFile::parse(bad, "t").unwrap_err()).contains("Server"));
        let bad = "http_server_config:\n  headers:\n    X-Frame-Options: allow\n";
        assert!(WebConfigFile::parse(bad, "t").is_err());
    }

    #[test]
    fn errors_name_the_file_the_header_and_the_value() {
        let bad = "http_server_config:\n  headers:\n    Server: x\n";
        let e = WebConfigFile::parse(bad, "web.yml").unwrap_err();
        assert!(matches!(&e, ConfigError::HeaderNotAllowed { header, .. } if header == "Server"));
        assert_eq!(
            e.to_string(),
            "web config web.yml: HTTP header \"Server\" can not be configured"
        );
        let bad = "http_server_config:\n  headers:\n    X-Frame-Options: allow\n";
        let e = WebConfigFile::parse(bad, "web.yml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("web.yml") && e.contains("X-Frame-Options") && e.contains("\"allow\""),
            "{e}"
        );
        let missing = Path::new("/nonexistent/web.yml");
        let e = WebConfigFile::read(missing).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }), "{e}");
        assert_eq!(e.to_string(), "reading web config /nonexistent/web.yml");
        let c = WebConfigFile::parse("rate_limit:\n  interval: soon\n", "t").unwrap();
        let e = c.rate_limit().unwrap_err();
        assert!(
            matches!(&e, ConfigError::RateLimitInterval { text, .. } if text == "soon"),
            "{e}"
        );
    }

    #[test]
    fn empty_file_and_empty_sections_are_plain_http() {
        assert!(WebConfigFile::parse("", "t")
            .unwrap()
            .tls_server_config
            .is_none());
        assert!(WebConfigFile::parse("# nothing\n", "t")
            .unwrap()
            .users()
            .is_empty());
        let c = WebConfigFile::parse("tls_server_config:\nbasic_auth_users:\n", "t").unwrap();
        assert!(!c.tls_server_config.unwrap_or_default().is_enabled());
    }
}
