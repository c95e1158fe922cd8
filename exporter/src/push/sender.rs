//! The sender loop: takes the oldest segment of the buffer, sends it, and only then moves on, so
//! the receiver sees every series in time order. 2xx deletes the segment; 5xx, 429 and network
//! errors put it back and wait a backoff (the bounds may drop it meanwhile); other statuses drop
//! it and count its samples `rejected`, as the remote-write spec says.

use std::sync::Arc;
use std::time::Duration;

use greenpipe_remote_write::client::{request, Disposition, Endpoint, RetryPolicy};
use greenpipe_remote_write::{CONTENT_TYPE, VERSION};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use super::buffer::DropReason;
use super::{now_ms, SharedBuffer};

enum Outcome {
    Accepted,
    Retry(String),
    Refused(u16, String),
}

/// Sends until the runtime stops; `wake` is notified when a segment is added.
pub async fn run(endpoint: Endpoint, retry: RetryPolicy, buffer: SharedBuffer, wake: Arc<Notify>) {
    let mut attempt = 0u32;
    loop {
        let next = buffer.lock().unwrap_or_else(|e| e.into_inner()).begin();
        let Some((segment, path)) = next else {
            // Woken by the writer; the timeout only guards against a missed wake-up.
            let _ = tokio::time::timeout(Duration::from_secs(1), wake.notified()).await;
            continue;
        };
        let body = match tokio::fs::read(&path).await {
            Ok(body) => body,
            Err(e) => {
                warn!(file = %path.display(), error = %e, "push segment unreadable; dropping it");
                lock(&buffer).reject(segment.seq, DropReason::Corrupt);
                continue;
            }
        };
        match send(&endpoint, body).await {
            Outcome::Accepted => {
                if attempt > 0 {
                    info!(
                        attempts = attempt + 1,
                        "push receiver reachable again; sending the buffer"
                    );
                }
                attempt = 0;
                debug!(samples = segment.samples, "push segment accepted");
                lock(&buffer).ack(segment.seq);
            }
            Outcome::Refused(status, text) => {
                attempt = 0;
                warn!(status, samples = segment.samples, response = %text.trim(),
                    "push refused by the receiver; dropping the segment");
                lock(&buffer).reject(segment.seq, DropReason::Rejected);
            }
            Outcome::Retry(why) => {
                let wait = retry.backoff(attempt);
                // One warning per outage; the failures counter and the buffer gauges tell the rest.
                if attempt == 0 {
                    warn!(error = %why.trim(), ?wait, "push failed; buffering on disk and retrying");
                } else {
                    debug!(attempt, error = %why.trim(), ?wait, "push failed; retrying");
                }
                lock(&buffer).release(segment.seq, now_ms());
                attempt = attempt.saturating_add(1);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

fn lock(buffer: &SharedBuffer) -> std::sync::MutexGuard<'_, super::buffer::Buffer> {
    buffer.lock().unwrap_or_else(|e| e.into_inner())
}

async fn send(endpoint: &Endpoint, body: Vec<u8>) -> Outcome {
    let request = match request(endpoint, body, CONTENT_TYPE, VERSION) {
        Ok(r) => r,
        // An unreadable token file may be fixed by the operator (or the kubelet): retry.
        Err(e) => return Outcome::Retry(greenpipe_common::error_chain(&e)),
    };
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Retry(greenpipe_common::error_chain(&e)),
    };
    let status = response.status();
    match Disposition::of(status) {
        Disposition::Accepted => Outcome::Accepted,
        Disposition::Retry => {
            let text = response.text().await.unwrap_or_default();
            Outcome::Retry(format!("HTTP {status}: {text}"))
        }
        Disposition::Refused => {
            Outcome::Refused(status.as_u16(), response.text().await.unwrap_or_default())
        }
    }
}
