//! An HTTP endpoint a GreenPipe program talks to (Prometheus' query API, a remote-write receiver)
//! with its authentication: basic auth, a bearer token read from a file, TLS with a custom CA, and
//! extra request headers (`--{prefix}.header NAME=VALUE`: tenants such as Mimir's `X-Scope-OrgID`
//! or Thanos' `THANOS-TENANT`, API keys of hosted receivers).
//!
//! Header values may be credentials: they are marked sensitive for the HTTP stack, the `Debug`
//! output of [`Headers`] and [`Auth`] shows names only, and no error message repeats a value.
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
    /// A header argument is not `NAME=VALUE`. The argument is not repeated: it may be a value.
    #[error("--{prefix}.header: argument {index} has no '=' (expected NAME=VALUE)")]
    HeaderSyntax {
        /// Flag prefix.
        prefix: String,
        /// 1-based position among the `--{prefix}.header` arguments.
        index: usize,
    },
    /// A header name that HTTP does not allow.
    #[error("--{prefix}.header: {name:?} is not a valid HTTP header name")]
    HeaderName {
        /// Flag prefix.
        prefix: String,
        /// The name given.
        name: String,
    },
    /// A header value that HTTP does not allow, or an empty one (an unset variable, most likely).
    #[error("--{prefix}.header {name}: the value is {problem}")]
    HeaderValue {
        /// Flag prefix.
        prefix: String,
        /// The header's name.
        name: String,
        /// `empty` or what is wrong with it (the value itself is never shown).
        problem: &'static str,
    },
    /// A header the sender sets itself (or that authentication flags set).
    #[error("--{prefix}.header {name}: {why}")]
    HeaderReserved {
        /// Flag prefix.
        prefix: String,
        /// The header's name.
        name: String,
        /// What sets it instead.
        why: &'static str,
    },
    /// The same header twice (names compare case-insensitively).
    #[error("--{prefix}.header {name} is given more than once")]
    HeaderTwice {
        /// Flag prefix.
        prefix: String,
        /// The header's name.
        name: String,
    },
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

/// How requests authenticate. `Debug` leaves the password out.
#[derive(Clone, PartialEq, Eq)]
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

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Auth::BearerFile(path) => f.debug_tuple("BearerFile").field(path).finish(),
        }
    }
}

/// Headers the HTTP stack (or the remote-write protocol) sets, or that an authentication flag
/// sets: a `--{prefix}.header` of one of them is refused rather than sent twice or overridden.
const RESERVED_HEADERS: &[(&str, &str)] = &[
    (
        "authorization",
        "set by the username/password-file or bearer-token-file flags",
    ),
    ("host", "set from the URL"),
    ("content-type", "set by the sender"),
    ("content-encoding", "set by the sender"),
    ("content-length", "set by the HTTP client"),
    ("transfer-encoding", "set by the HTTP client"),
    ("connection", "set by the HTTP client"),
    ("keep-alive", "set by the HTTP client"),
    ("upgrade", "set by the HTTP client"),
    ("te", "set by the HTTP client"),
    ("trailer", "set by the HTTP client"),
    ("accept-encoding", "set by the HTTP client"),
    ("user-agent", "set by the sender"),
    ("proxy-authorization", "not for an origin server"),
    (
        "x-prometheus-remote-write-version",
        "set by the remote-write protocol",
    ),
    (
        "x-prometheus-remote-read-version",
        "set by the remote-read protocol",
    ),
];

/// Extra headers sent with every request to one endpoint, in the order given. Values are marked
/// sensitive (HTTP/2 never indexes them) and `Debug` prints only the names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>);

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(n, _)| (n.as_str(), "<redacted>")))
            .finish()
    }
}

impl Headers {
    /// Parses `NAME=VALUE` arguments of `--{prefix}.header` (the value may contain `=`).
    pub fn parse(prefix: &str, args: &[String]) -> Result<Headers, EndpointError> {
        let mut out: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)> = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            let Some((name, value)) = arg.split_once('=') else {
                return Err(EndpointError::HeaderSyntax {
                    prefix: prefix.to_string(),
                    index: i + 1,
                });
            };
            let name_error = || EndpointError::HeaderName {
                prefix: prefix.to_string(),
                name: name.to_string(),
            };
            let header_name = reqwest::header::HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| name_error())?;
            if name.trim() != name {
                return Err(name_error());
            }
            let value_error = |problem| EndpointError::HeaderValue {
                prefix: prefix.to_string(),
                name: header_name.to_string(),
                problem,
            };
            if value.trim().is_empty() {
                return Err(value_error("empty"));
            }
            let mut header_value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                value_error("not valid in HTTP (visible ASCII, spaces and tabs only)")
            })?;
            header_value.set_sensitive(true);
            if let Some((_, why)) = RESERVED_HEADERS
                .iter()
                .find(|(reserved, _)| *reserved == header_name.as_str())
            {
                return Err(EndpointError::HeaderReserved {
                    prefix: prefix.to_string(),
                    name: header_name.to_string(),
                    why,
                });
            }
            if out.iter().any(|(n, _)| *n == header_name) {
                return Err(EndpointError::HeaderTwice {
                    prefix: prefix.to_string(),
                    name: header_name.to_string(),
                });
            }
            out.push((header_name, header_value));
        }
        Ok(Headers(out))
    }

    /// Header names (lower case), in the order given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the headers to a request.
    pub fn apply(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (name, value) in &self.0 {
            request = request.header(name.clone(), value.clone());
        }
        request
    }
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
    /// Extra request headers, `NAME=VALUE` (flags first, then the config file's).
    pub headers: Vec<String>,
}

/// A base URL, its credentials and a client that trusts its CA.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// URL (for Prometheus the server root, for remote write the full write URL).
    pub url: String,
    /// Credentials.
    pub auth: Auth,
    /// Extra request headers.
    pub headers: Headers,
    /// The HTTP client (connection pool, TLS roots, timeout).
    pub client: reqwest::Client,
}

impl Endpoint {
    /// Validates the flags of the endpoint whose flags start with `--{flag_prefix}.`; requests
    /// say they come from `user_agent` (`greenpipe-estimator/0.1.0`).
    pub fn new(
        user_agent: &str,
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
        let headers = Headers::parse(flag_prefix, &flags.headers)?;
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .user_agent(user_agent);
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
            headers,
            client: builder.build().map_err(EndpointError::Client)?,
        })
    }

    /// Adds the credentials and the extra headers to a request.
    pub fn authorise(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, SecretError> {
        let request = self.headers.apply(request);
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

    const AGENT: &str = "greenpipe-test/0";

    fn flags() -> AuthFlags {
        AuthFlags::default()
    }

    #[test]
    fn auth_variants_and_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let t = Duration::from_secs(1);
        let none = Endpoint::new(AGENT, "prometheus", "http://p:9090/", &flags(), t).unwrap();
        assert_eq!(none.auth, Auth::None);
        assert_eq!(none.url, "http://p:9090");
        let bearer = AuthFlags {
            bearer_token_file: Some(token.clone()),
            ..flags()
        };
        let e = Endpoint::new(AGENT, "prometheus", "https://p", &bearer, t).unwrap();
        assert_eq!(e.auth, Auth::BearerFile(token.clone()));
        let basic = AuthFlags {
            username: Some("u".into()),
            password_file: Some(token.clone()),
            ..flags()
        };
        let e = Endpoint::new(AGENT, "prometheus", "https://p", &basic, t).unwrap();
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
        let err = Endpoint::new(AGENT, "prometheus", "https://p", &both, t).unwrap_err();
        assert!(format!("{err:#}").contains("not both"), "{err:#}");
        let err = Endpoint::new(AGENT, "remote-write", "ftp://x", &flags(), t).unwrap_err();
        assert!(format!("{err:#}").contains("http"), "{err:#}");
        let bad_ca = AuthFlags {
            ca_file: Some(token),
            ..flags()
        };
        let err = Endpoint::new(AGENT, "prometheus", "https://p", &bad_ca, t).unwrap_err();
        assert!(format!("{err:#}").contains("ca-file"), "{err:#}");
        let debug = format!(
            "{:?}",
            Auth::Basic {
                username: "u".into(),
                password: "s3cret".into(),
            }
        );
        assert!(
            debug.contains("\"u\"") && !debug.contains("s3cret"),
            "{debug}"
        );
        // The chain names the flag, then the file, each once.
        let text = greenpipe_common::error_chain(&err);
        assert!(
            text.starts_with("--prometheus.ca-file: ") && text.matches("token").count() == 1,
            "{text}"
        );
    }

    #[test]
    fn headers_keep_their_order_and_show_names_only() {
        let args = vec!["X-Scope-OrgID=a".to_string(), "X-Api-Key=k=v".to_string()];
        let h = Headers::parse("remote-write", &args).unwrap();
        assert_eq!(
            h.names().collect::<Vec<_>>(),
            ["x-scope-orgid", "x-api-key"]
        );
        assert_eq!(
            format!("{h:?}"),
            r#"{"x-scope-orgid": "<redacted>", "x-api-key": "<redacted>"}"#
        );
        let e = Endpoint::new(
            AGENT,
            "remote-write",
            "http://r/api/v1/write",
            &AuthFlags {
                headers: args,
                ..flags()
            },
            Duration::from_secs(1),
        )
        .unwrap();
        assert!(!format!("{e:?}").contains("k=v"));
        assert!(Headers::parse("p", &[]).unwrap().is_empty());
    }
}
