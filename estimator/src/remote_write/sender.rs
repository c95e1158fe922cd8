//! Sends batches to the receiver: retries 5xx, 429 and network errors with exponential backoff
//! and jitter until they succeed; drops (counts and logs) other 4xx, which would fail again.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn};

use crate::endpoint::Endpoint;
use crate::telemetry::Telemetry;
use greenpipe_remote_write::{
    BatchLimits, BatchWriter, EncodedBatch, TimeSeries, CONTENT_ENCODING, CONTENT_TYPE, VERSION,
    VERSION_HEADER,
};

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

/// What became of the samples handed to [`Sender::send`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Accepted by the receiver.
    pub written: usize,
    /// Refused for good (non-retryable status).
    pub dropped: usize,
}

/// A remote-write client for one receiver.
#[derive(Clone)]
pub struct Sender {
    endpoint: Endpoint,
    limits: BatchLimits,
    retry: RetryPolicy,
    telemetry: Arc<Telemetry>,
}

enum Attempt {
    Accepted,
    Retry(String),
    Refused(u16, String),
}

impl Sender {
    /// A sender to `endpoint` (the full write URL).
    pub fn new(
        endpoint: Endpoint,
        limits: BatchLimits,
        retry: RetryPolicy,
        telemetry: Arc<Telemetry>,
    ) -> Sender {
        Sender {
            endpoint,
            limits,
            retry,
            telemetry,
        }
    }

    /// The request limits bodies must keep to.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Sends `series` in order, batch after batch. Returns once every batch was accepted or
    /// refused; retryable failures are retried for as long as it takes (the caller's deadline,
    /// e.g. shutdown, cancels the future).
    pub async fn send(&self, series: Vec<TimeSeries>) -> SendReport {
        let mut writer = BatchWriter::compressing(self.limits);
        for ts in &series {
            writer.push(ts);
        }
        self.send_encoded(writer.finish()).await
    }

    /// [`Sender::send`] of bodies laid out already, by a [`BatchWriter::compressing`] with this
    /// sender's [`Sender::limits`].
    pub async fn send_encoded(&self, batches: Vec<EncodedBatch>) -> SendReport {
        let mut report = SendReport::default();
        for batch in batches {
            let samples = batch.samples;
            let body = batch.body;
            let mut attempt = 0u32;
            loop {
                match self.attempt(&body).await {
                    Attempt::Accepted => {
                        self.telemetry.samples_written.inc_by(samples as u64);
                        report.written += samples;
                        break;
                    }
                    Attempt::Refused(status, text) => {
                        warn!(status, samples, response = %text.trim(), "remote write refused; dropping the batch");
                        self.telemetry
                            .samples_dropped
                            .with_label_values(&[&format!("http_{status}")])
                            .inc_by(samples as u64);
                        report.dropped += samples;
                        break;
                    }
                    Attempt::Retry(why) => {
                        let wait = self.retry.backoff(attempt);
                        warn!(attempt, ?wait, samples, error = %why.trim(), "remote write failed; retrying");
                        self.telemetry.samples_retried.inc_by(samples as u64);
                        tokio::time::sleep(wait).await;
                        attempt = attempt.saturating_add(1);
                    }
                }
            }
        }
        report
    }

    async fn attempt(&self, body: &[u8]) -> Attempt {
        let request = self
            .endpoint
            .client
            .post(&self.endpoint.url)
            .header(reqwest::header::CONTENT_ENCODING, CONTENT_ENCODING)
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .header(VERSION_HEADER, VERSION)
            .body(body.to_vec());
        let request = match self.endpoint.authorise(request) {
            Ok(r) => r,
            // An unreadable token file may be fixed by the operator (or the kubelet): retry.
            Err(e) => return Attempt::Retry(format!("{e:#}")),
        };
        let outcome = match request.send().await {
            Err(e) => {
                self.count("network_error");
                return Attempt::Retry(format!("{e:#}"));
            }
            Ok(response) => response,
        };
        let status = outcome.status();
        self.count(status.as_str());
        if status.is_success() {
            debug!(status = status.as_u16(), "remote write accepted");
            return Attempt::Accepted;
        }
        let text = outcome.text().await.unwrap_or_default();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Attempt::Retry(format!("HTTP {status}: {text}"))
        } else {
            Attempt::Refused(status.as_u16(), text)
        }
    }

    fn count(&self, outcome: &str) {
        self.telemetry
            .remote_write_requests
            .with_label_values(&[outcome])
            .inc();
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
}
