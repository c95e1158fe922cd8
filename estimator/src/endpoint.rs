//! An HTTP endpoint the estimator talks to (Prometheus' query API, the remote-write receiver) with
//! its authentication: basic auth, a bearer token read from a file, and TLS with a custom CA.
//!
//! Secrets come from files, never from the command line, so they do not show in `ps`. The bearer
//! token file is read again for every request because Kubernetes rotates projected service-account
//! tokens in place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use greenpipe_common::secret::{read_secret_file, SecretError};

/// Why an endpoint's flags were refused. Each names the flag (`--{prefix}.…`) it is about.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The URL does not parse.
    #[error("{prefix} URL {url:?}: {reason}")]
    Url {
        /// Flag prefix (`prometheus`, `remote-write`, …).
        prefix: String,
        /// The URL given.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// The URL is not http(s).
    #[error("{prefix} URL {url:?} must be http:// or https://")]
    Scheme {
        /// Flag prefix.
        prefix: String,
        /// The URL given.
        url: String,
    },
    /// A secret file could not be used.
    #[error("--{prefix}.{flag}")]
    Secret {
        /// Flag prefix.
        prefix: String,
        /// `password-file` or `bearer-token-file`.
        flag: &'static str,
        /// Why.
        source: SecretError,
    },
    /// A password without a user.
    #[error("--{prefix}.password-file needs --{prefix}.username")]
    PasswordWithoutUsername {
        /// Flag prefix.
        prefix: String,
    },
    /// Both basic auth and a bearer token.
    #[error("--{prefix}: use either basic auth or a bearer token, not both")]
    BasicAndBearer {
        /// Flag prefix.
        prefix: String,
    },
    /// The CA file could not be used.
    #[error("--{prefix}.ca-file")]
    CaFile {
        /// Flag prefix.
        prefix: String,
        /// Why.
        source: CaError,
    },
    /// reqwest refused the client settings.
    #[error("building the HTTP client")]
    Client(#[source] reqwest::Error),
}

/// Why a CA bundle could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not PEM.
    #[error("{} is not a PEM certificate bundle", path.display())]
    NotPem {
        /// The file.
        path: PathBuf,
        /// reqwest's complaint.
        source: reqwest::Error,
    },
    /// The file holds no certificate.
    #[error("{} holds no certificate", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// How requests authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No credentials.
    None,
    /// HTTP basic auth; the password was read from a file at start.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
    /// `Authorization: Bearer <token>`, the token read from this file for every request.
    BearerFile(PathBuf),
}

/// Flags shared by both endpoints, before validation.
#[derive(Debug, Clone, Default)]
pub struct AuthFlags {
    /// Basic-auth user.
    pub username: Option<String>,
    /// File holding the basic-auth password.
    pub password_file: Option<PathBuf>,
    /// File holding a bearer token.
    pub bearer_token_file: Option<PathBuf>,
    /// PEM file of CA certificates to trust in addition to the system's.
    pub ca_file: Option<PathBuf>,
}

/// A base URL, its credentials and a client that trusts its CA.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// URL (for Prometheus the server root, for remote write the full write URL).
    pub url: String,
    /// Credentials.
    pub auth: Auth,
    /// The HTTP client (connection pool, TLS roots, timeout).
    pub client: reqwest::Client,
}

impl Endpoint {
    /// Validates the flags of the endpoint whose flags start with `--{flag_prefix}.`.
    pub fn new(
        flag_prefix: &str,
        url: &str,
        flags: &AuthFlags,
        timeout: Duration,
    ) -> Result<Endpoint, EndpointError> {
        let prefix = || flag_prefix.to_string();
        let parsed = reqwest::Url::parse(url).map_err(|e| EndpointError::Url {
            prefix: prefix(),
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(EndpointError::Scheme {
                prefix: prefix(),
                url: url.to_string(),
            });
        }
        let secret = |flag: &'static str| {
            move |source| EndpointError::Secret {
                prefix: prefix(),
                flag,
                source,
            }
        };
        let auth = match (
            &flags.username,
            &flags.password_file,
            &flags.bearer_token_file,
        ) {
            (None, None, None) => Auth::None,
            (Some(user), pw, None) => Auth::Basic {
                username: user.clone(),
                password: match pw {
                    Some(path) => read_secret_file(path).map_err(secret("password-file"))?,
                    None => String::new(),
                },
            },
            (None, None, Some(path)) => {
                read_secret_file(path).map_err(secret("bearer-token-file"))?;
                Auth::BearerFile(path.clone())
            }
            (None, Some(_), _) => {
                return Err(EndpointError::PasswordWithoutUsername { prefix: prefix() })
            }
            (Some(_), _, Some(_)) => {
                return Err(EndpointError::BasicAndBearer { prefix: prefix() })
            }
        };
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("greenpipe-estimator/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &flags.ca_file {
            for cert in read_ca(ca).map_err(|source| EndpointError::CaFile {
                prefix: prefix(),
                source,
            })? {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Endpoint {
            url: url.trim_end_matches('/').to_string(),
            auth,
            client: builder.build().map_err(EndpointError::Client)?,
        })
    }

    /// Adds the credentials to a request.
    pub fn authorise(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, SecretError> {
        Ok(match &self.auth {
            Auth::None => request,
            Auth::Basic { username, password } => request.basic_auth(username, Some(password)),
            Auth::BearerFile(path) => request.bearer_auth(read_secret_file(path)?),
        })
    }
}

fn read_ca(path: &Path) -> Result<Vec<reqwest::Certificate>, CaError> {
    let pem = std::fs::read(path).map_err(|source| CaError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| CaError::NotPem {
        path: path.to_path_buf(),
        source,
    })?;
    if certs.is_empty() {
        return Err(CaError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> AuthFlags {
        AuthFlags::default()
    }

    #[test]
    fn auth_variants_and_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let t = Duration::from_secs(1);
        let none = Endpoint::new("prometheus", "http://p:9090/", &flags(), t).unwrap();
        assert_eq!(none.auth, Auth::None);
        assert_eq!(none.url, "http://p:9090");
        let bearer = AuthFlags {
            bearer_token_file: Some(token.clone()),
            ..flags()
        };
        let e = Endpoint::new("prometheus", "https://p", &bearer, t).unwrap();
        assert_eq!(e.auth, Auth::BearerFile(token.clone()));
        let basic = AuthFlags {
            username: Some("u".into()),
            password_file: Some(token.clone()),
            ..flags()
        };
        let e = Endpoint::new("prometheus", "https://p", &basic, t).unwrap();
        assert_eq!(
            e.auth,
            Auth::Basic {
                username: "u".into(),
                password: "s3cret".into()
            }
        );
        let both = AuthFlags {
            bearer_token_file: Some(token.clone()),
            ..basic
        };
        let err = Endpoint::new("prometheus", "https://p", &both, t).unwrap_err();
        assert!(format!("{err:#}").contains("not both"), "{err:#}");
        let err = Endpoint::new("remote-write", "ftp://x", &flags(), t).unwrap_err();
        assert!(format!("{err:#}").contains("http"), "{err:#}");
        let bad_ca = AuthFlags {
            ca_file: Some(token),
            ..flags()
        };
        let err = Endpoint::new("prometheus", "https://p", &bad_ca, t).unwrap_err();
        assert!(format!("{err:#}").contains("ca-file"), "{err:#}");
        // The chain names the flag, then the file, each once.
        let text = crate::error_chain(&err);
        assert!(
            text.starts_with("--prometheus.ca-file: ") && text.matches("token").count() == 1,
            "{text}"
        );
    }
}
