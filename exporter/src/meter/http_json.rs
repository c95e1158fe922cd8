//! Blocking HTTP GET of a small JSON document, shared by the smart-plug meters.
//!
//! `ureq` rather than reqwest's blocking client: reqwest::blocking runs a Tokio runtime on a
//! hidden thread per client, one more thread per plug on a 4-core Pi, for a 300-byte GET once a
//! second. ureq is a plain blocking client on std sockets with one global timeout per call,
//! which is exactly the bound the meter worker needs. Plugs speak plain HTTP on the LAN, so no
//! TLS stack is built in.

use std::time::Duration;

use super::{ReadError, Reason};

/// Failure reasons of the HTTP plugs.
pub const REASONS: &[Reason] = &[
    Reason::Unplugged,
    Reason::Timeout,
    Reason::HttpStatus,
    Reason::BadResponse,
    Reason::Io,
];

/// Why `meters` finds no plug.
pub const NOT_DISCOVERED: &str =
    "network plugs are not discovered; configure --meter KIND:http://ADDRESS";

/// The target of an HTTP plug is a base URL.
pub fn check_target(target: &str) -> Result<(), String> {
    BaseUrl::parse(target).map(|_| ())
}

/// Largest body accepted; plug answers are well under 4 KiB.
const BODY_LIMIT: u64 = 64 * 1024;

/// A plug's base URL: `http://host[:port][/path]`, optional query kept apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `http://host[:port][/path]` without a trailing slash.
    pub base: String,
    /// `host[:port]`, used as the default `meter` label.
    pub authority: String,
    /// Query pairs given after `?`.
    pub query: Vec<(String, String)>,
}

impl BaseUrl {
    /// Parses and checks a base URL.
    pub fn parse(text: &str) -> Result<BaseUrl, String> {
        let rest = match text.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err("https is not supported: plugs serve plain HTTP on the LAN".into())
            }
            _ => return Err("expected a URL starting with http://".into()),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q),
            None => (rest, ""),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() || authority.contains('@') {
            return Err("expected http://HOST[:PORT] (no user info)".into());
        }
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (p.to_string(), String::new()),
            })
            .collect();
        Ok(BaseUrl {
            base: format!("http://{}", rest.trim_end_matches('/')),
            authority: authority.to_string(),
            query,
        })
    }

    /// Value of a query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A blocking client whose every call, connect to last body byte, ends within `timeout`.
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

/// GETs `url` and parses the body as JSON.
pub fn get(agent: &ureq::Agent, url: &str) -> Result<serde_json::Value, ReadError> {
    let mut response = agent.get(url).call().map_err(|e| classify(url, e))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(BODY_LIMIT)
        .read_to_string()
        .map_err(|e| classify(url, e))?;
    if status != 200 {
        return Err(ReadError::new(
            Reason::HttpStatus,
            format!("GET {url}: HTTP {status}: {}", excerpt(&body)),
        ));
    }
    serde_json::from_str(&body).map_err(|e| {
        ReadError::new(
            Reason::BadResponse,
            format!("GET {url}: not JSON ({e}): {}", excerpt(&body)),
        )
    })
}

fn excerpt(body: &str) -> String {
    let cut: String = body.chars().take(120).collect();
    format!("{cut:?}")
}

fn classify(url: &str, err: ureq::Error) -> ReadError {
    let reason = match &err {
        ureq::Error::Timeout(_) => Reason::Timeout,
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Reason::Unplugged,
        ureq::Error::Io(e) => match e.kind() {
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Reason::Timeout,
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::HostUnreachable
            | std::io::ErrorKind::NetworkUnreachable => Reason::Unplugged,
            _ => Reason::Io,
        },
        ureq::Error::BodyExceedsLimit(_) | ureq::Error::Protocol(_) => Reason::BadResponse,
        _ => Reason::Io,
    };
    ReadError::new(reason, format!("GET {url}: {err}"))
}

/// A number at a JSON pointer, or a `bad_response` error naming the field.
pub fn number(doc: &serde_json::Value, pointer: &str, url: &str) -> Result<f64, ReadError> {
    doc.pointer(pointer)
        .and_then(serde_json::Value::as_f64)
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            ReadError::new(
                Reason::BadResponse,
                format!("GET {url}: no number at {pointer}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let u = BaseUrl::parse("http://plug.local:8080/").unwrap();
        assert_eq!(u.base, "http://plug.local:8080");
        assert_eq!(u.authority, "plug.local:8080");
        let u = BaseUrl::parse("http://10.0.0.5/?id=1").unwrap();
        assert_eq!(u.base, "http://10.0.0.5");
        assert_eq!(u.param("id"), Some("1"));
        assert!(BaseUrl::parse("https://x").unwrap_err().contains("https"));
        assert!(BaseUrl::parse("plug.local").is_err());
        assert!(BaseUrl::parse("http://").is_err());
        assert!(BaseUrl::parse("http://admin:pw@plug").is_err());
    }
}
