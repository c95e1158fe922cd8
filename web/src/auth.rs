//! Per-request rules of the web config: rate limit, basic auth against bcrypt hashes, extra
//! headers. Every route goes through it, health endpoints included.
//!
//! As in exporter-toolkit: an unknown user is checked against a fixed hash so timing does not
//! tell which users exist; a bcrypt verdict is cached per (user, hash, password) because a cost-10
//! hash takes tens of milliseconds (far more on a Pi) and a scraper sends the same credentials
//! every time; a refusal is `401` with `WWW-Authenticate: Basic` and nothing else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::reload::WebConfig;

/// bcrypt of "fakepassword" (exporter-toolkit's decoy for unknown users).
const DECOY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
/// Cached verdicts kept before the cache is emptied.
const CACHE_LIMIT: usize = 256;

/// State of the middleware.
#[derive(Debug)]
pub struct Guard {
    web: Arc<WebConfig>,
    verdicts: Mutex<HashMap<(String, String, String), bool>>,
    /// One bcrypt at a time, like exporter-toolkit: it is CPU-bound.
    bcrypt: tokio::sync::Mutex<()>,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Guard {
    /// Middleware state over a loaded config.
    pub fn new(web: Arc<WebConfig>) -> Arc<Guard> {
        Arc::new(Guard {
            web,
            verdicts: Mutex::new(HashMap::new()),
            bcrypt: tokio::sync::Mutex::new(()),
            bucket: Mutex::new(Bucket {
                tokens: f64::INFINITY,
                at: Instant::now(),
            }),
        })
    }

    fn allow(&self, interval: std::time::Duration, burst: u32) -> bool {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let burst = f64::from(burst);
        let refill = now.duration_since(b.at).as_secs_f64() / interval.as_secs_f64();
        b.tokens = (b.tokens + refill).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    async fn authorised(
        &self,
        users: &std::collections::BTreeMap<String, String>,
        headers: &HeaderMap,
    ) -> bool {
        let Some((user, pass)) = basic_credentials(headers) else {
            return false;
        };
        let (hash, known) = match users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (DECOY_HASH.to_string(), false),
        };
        let key = (user, hash.clone(), pass.clone());
        let cached = self
            .verdicts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let ok = match cached {
            Some(ok) => ok,
            None => {
                let _one = self.bcrypt.lock().await;
                let ok = tokio::task::spawn_blocking(move || {
                    bcrypt::verify(pass, &hash).unwrap_or(false)
                })
                .await
                .unwrap_or(false);
                let mut cache = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(key, ok);
                ok
            }
        };
        ok && known
    }
}

/// `Authorization: Basic base64(user:password)`, split at the first colon as Go does.
pub fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

/// The middleware: `axum::middleware::from_fn_with_state(guard, guard::check)`.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let settings = guard.web.current();
    if let Some((interval, burst)) = settings.rate_limit {
        if !guard.allow(interval, burst) {
            return with_headers(
                (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response(),
                &settings.headers,
            );
        }
    }
    let response = if settings.users.is_empty()
        || guard.authorised(&settings.users, request.headers()).await
    {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic")],
            "Unauthorized\n",
        )
            .into_response()
    };
    with_headers(response, &settings.headers)
}

fn with_headers(
    mut response: Response,
    headers: &[(axum::http::HeaderName, axum::http::HeaderValue)],
) -> Response {
    for (k, v) in headers {
        response.headers_mut().entry(k).or_insert_with(|| v.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_split_at_the_first_colon() {
        let mut h = HeaderMap::new();
        let enc = base64::engine::general_purpose::STANDARD.encode("al:ice:pa:ss");
        h.insert(
            header::AUTHORIZATION,
            format!("basic {enc}").parse().unwrap(),
        );
        assert_eq!(
            basic_credentials(&h),
            Some(("al".to_string(), "ice:pa:ss".to_string()))
        );
        h.insert(header::AUTHORIZATION, "Bearer xyz".parse().unwrap());
        assert_eq!(basic_credentials(&h), None);
        h.insert(header::AUTHORIZATION, "Basic !!!".parse().unwrap());
        assert_eq!(basic_credentials(&h), None);
    }

    #[test]
    fn the_decoy_hash_is_a_valid_bcrypt_hash() {
        assert!(bcrypt::verify("fakepassword", DECOY_HASH).unwrap());
    }
}
