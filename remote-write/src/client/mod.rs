//! The HTTP side of remote write that every GreenPipe sender shares (feature `client`): the
//! endpoint with its authentication, TLS roots and extra headers ([`endpoint`]), the backoff
//! between attempts ([`RetryPolicy`]), the request with the protocol's headers ([`request`]) and
//! what an answer means for the batch ([`Disposition`]). The estimator's sender and the
//! exporter's push loop differ in what they do with a batch; how they talk to the receiver is
//! this one module.

pub mod endpoint;

use std::time::Duration;

pub use endpoint::{Auth, AuthFlags, CaError, Endpoint, EndpointError, Headers};
use greenpipe_common::secret::SecretError;

/// Backoff between attempts of one request: `min * 2^attempt`, capped at `max`, times a random
/// factor in [0.5, 1) so replicas that failed together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// First backoff.
    pub min_backoff: Duration,
    /// Largest backoff.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .min_backoff
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max_backoff);
        base.mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

/// One `--*.header` argument as given. Parsing never fails here (clap would echo the value in
/// its error): [`Headers::parse`] checks it without repeating the value, and `Debug` shows the
/// name only.
#[derive(Clone)]
pub struct HeaderArg(String);

impl HeaderArg {
    /// The argument, `NAME=VALUE`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for HeaderArg {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(HeaderArg(s.to_string()))
    }
}

impl std::fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.0.split_once('=').map(|(n, _)| n).unwrap_or("?");
        write!(f, "{name}=<redacted>")
    }
}

/// A remote-write POST of `body` (raw snappy) to `endpoint`, with the protocol's three headers
/// (`content_type` and `version` say which message it is: [`crate::CONTENT_TYPE`] and
/// [`crate::VERSION`] for 1.0), the credentials and the extra headers. Fails only when the bearer
/// token file cannot be read, which the operator (or the kubelet) may fix: a caller retries.
pub fn request(
    endpoint: &Endpoint,
    body: Vec<u8>,
    content_type: &str,
    version: &str,
) -> Result<reqwest::RequestBuilder, SecretError> {
    let request = endpoint
        .client
        .post(&endpoint.url)
        .header(reqwest::header::CONTENT_ENCODING, crate::CONTENT_ENCODING)
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .header(crate::VERSION_HEADER, version)
        .body(body);
    endpoint.authorise(request)
}

/// What an HTTP answer means for the batch, as the remote-write spec says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// 2xx: stored.
    Accepted,
    /// 5xx or 429: may succeed later; send the same batch again after a backoff.
    Retry,
    /// Any other status: would fail again; drop the batch and count it.
    Refused,
}

impl Disposition {
    /// The disposition of an answer with `status`.
    pub fn of(status: reqwest::StatusCode) -> Disposition {
        if status.is_success() {
            Disposition::Accepted
        } else if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Disposition::Retry
        } else {
            Disposition::Refused
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let p = RetryPolicy {
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
        };
        for _ in 0..100 {
            let b0 = p.backoff(0);
            assert!(b0 >= Duration::from_millis(50) && b0 < Duration::from_millis(100));
            let b3 = p.backoff(3);
            assert!(b3 >= Duration::from_millis(400) && b3 < Duration::from_millis(800));
            assert!(p.backoff(40) < Duration::from_secs(1));
        }
    }

    #[test]
    fn statuses_as_the_spec_says() {
        use reqwest::StatusCode as S;
        assert_eq!(Disposition::of(S::NO_CONTENT), Disposition::Accepted);
        assert_eq!(Disposition::of(S::SERVICE_UNAVAILABLE), Disposition::Retry);
        assert_eq!(Disposition::of(S::TOO_MANY_REQUESTS), Disposition::Retry);
        assert_eq!(Disposition::of(S::BAD_REQUEST), Disposition::Refused);
        assert_eq!(Disposition::of(S::UNAUTHORIZED), Disposition::Refused);
    }

    #[test]
    fn a_header_argument_shows_its_name_only() {
        let h: HeaderArg = "X-Scope-OrgID=s3cret".parse().unwrap();
        assert_eq!(format!("{h:?}"), "X-Scope-OrgID=<redacted>");
        assert_eq!(h.as_str(), "X-Scope-OrgID=s3cret");
    }
}
