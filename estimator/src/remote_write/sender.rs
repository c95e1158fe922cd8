//! Sends batches to the receiver: retries 5xx, 429 and network errors with exponential backoff
//! and jitter until they succeed; drops (counts and logs) other 4xx, which would fail again.
//!
//! With `--remote-write.protocol 2.0` it sends `io.prometheus.write.v2.Request` and follows the
//! 2.0 spec's content negotiation: a 415 answer, or a 2xx without the written-samples header,
//! means a 1.0-only receiver, and the batch and all later ones go as 1.0. The written-samples
//! count of a 2.0 answer is what counts as written; the rest of a partial write is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tracing::{debug, warn};

use crate::endpoint::Endpoint;
use crate::telemetry::Telemetry;
use greenpipe_remote_write::client::{request, Disposition, RetryPolicy};
use greenpipe_remote_write::{
    compress, v2, BatchLimits, BatchWriter, EncodedBatch, TimeSeries, CONTENT_TYPE, VERSION,
};

/// What became of the samples handed to [`Sender::send`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Accepted by the receiver (for 2.0: as its `X-Prometheus-Remote-Write-Samples-Written`
    /// response header says).
    pub written: usize,
    /// Refused for good (non-retryable status, or left out of a partial 2.0 write).
    pub dropped: usize,
}

/// Which remote-write message is sent (`--remote-write.protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// `prometheus.WriteRequest`.
    #[default]
    #[value(name = "1.0")]
    V1,
    /// `io.prometheus.write.v2.Request` with metadata; falls back to 1.0 for good when the
    /// receiver answers 415 Unsupported Media Type, or 2xx without the 2.0 written-samples
    /// header (a 1.0 receiver that does not check the Content-Type stores nothing of a 2.0 body).
    #[value(name = "2.0")]
    V2,
}

/// A remote-write client for one receiver.
#[derive(Clone)]
pub struct Sender {
    endpoint: Endpoint,
    limits: BatchLimits,
    retry: RetryPolicy,
    telemetry: Arc<Telemetry>,
    protocol: Protocol,
    /// Set once a 2.0 receiver turned out to speak 1.0 only; shared by clones.
    fell_back: Arc<AtomicBool>,
}

enum Attempt {
    /// 2xx, with the written-samples count where the receiver sent one.
    Accepted(Option<usize>),
    Retry(String),
    /// A non-retryable status, its text and the written-samples count if any.
    Refused(u16, String, Option<usize>),
    /// 415 to a 2.0 request.
    Unsupported(String),
}

impl Sender {
    /// A sender to `endpoint` (the full write URL), speaking 1.0.
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
            protocol: Protocol::V1,
            fell_back: Arc::default(),
        }
    }

    /// The same sender speaking `protocol`.
    pub fn with_protocol(mut self, protocol: Protocol) -> Sender {
        self.protocol = protocol;
        self
    }

    /// The protocol requests are sent with now (2.0 until a fallback to 1.0).
    pub fn protocol(&self) -> Protocol {
        match self.protocol {
            Protocol::V2 if !self.fell_back.load(Ordering::Relaxed) => Protocol::V2,
            _ => Protocol::V1,
        }
    }

    /// The request limits bodies must keep to.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// A writer laying out bodies for [`Sender::send_encoded`]: raw-snappy 1.0 bodies for 1.0,
    /// uncompressed 1.0 bodies (turned into 2.0 when sent) for 2.0.
    pub fn writer(&self) -> BatchWriter {
        match self.protocol {
            Protocol::V1 => BatchWriter::compressing(self.limits),
            Protocol::V2 => BatchWriter::new(self.limits),
        }
    }

    /// Sends `series` in order, batch after batch. Returns once every batch was accepted or
    /// refused; retryable failures are retried for as long as it takes (the caller's deadline,
    /// e.g. shutdown, cancels the future).
    pub async fn send(&self, series: Vec<TimeSeries>) -> SendReport {
        let mut writer = self.writer();
        for ts in &series {
            writer.push(ts);
        }
        self.send_encoded(writer.finish()).await
    }

    /// [`Sender::send`] of bodies laid out already, by this sender's [`Sender::writer`].
    pub async fn send_encoded(&self, batches: Vec<EncodedBatch>) -> SendReport {
        let mut report = SendReport::default();
        for batch in batches {
            let samples = batch.samples;
            // For 2.0 the batch is uncompressed 1.0: both bodies are made from it on demand.
            let mut v2_body = None;
            let mut v1_body = None;
            let mut attempt = 0u32;
            loop {
                let protocol = self.protocol();
                let body: &[u8] = match (self.protocol, protocol) {
                    (Protocol::V1, _) => &batch.body,
                    (Protocol::V2, Protocol::V2) => v2_body.get_or_insert_with(|| {
                        match v2::transcode(&batch.body, super::metadata::describe) {
                            Ok(v2) => compress(&v2),
                            // Only a bug of this crate's writer could get here.
                            Err(e) => panic!("the batch writer's body does not decode: {e}"),
                        }
                    }),
                    (Protocol::V2, Protocol::V1) => {
                        v1_body.get_or_insert_with(|| compress(&batch.body))
                    }
                };
                match self.attempt(body, protocol).await {
                    Attempt::Accepted(count) => {
                        let written = match (protocol, count) {
                            (Protocol::V2, None) if samples > 0 => {
                                self.fall_back(
                                    "the receiver answered 2xx without X-Prometheus-Remote-Write-Samples-Written",
                                );
                                continue;
                            }
                            (Protocol::V2, Some(n)) => n.min(samples),
                            _ => samples,
                        };
                        self.telemetry.samples_written.inc_by(written as u64);
                        report.written += written;
                        if written < samples {
                            self.drop_samples(samples - written, "partial_write", &mut report);
                            warn!(
                                samples,
                                written, "remote write 2.0: the receiver wrote part of the batch"
                            );
                        }
                        break;
                    }
                    Attempt::Unsupported(text) => {
                        self.fall_back(&format!("HTTP 415: {}", text.trim()));
                    }
                    Attempt::Refused(status, text, count) => {
                        let written = count.unwrap_or(0).min(samples);
                        warn!(status, samples, written, response = %text.trim(), "remote write refused; dropping the batch");
                        self.telemetry.samples_written.inc_by(written as u64);
                        report.written += written;
                        self.drop_samples(
                            samples - written,
                            &format!("http_{status}"),
                            &mut report,
                        );
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

    fn drop_samples(&self, n: usize, reason: &str, report: &mut SendReport) {
        if n == 0 {
            return;
        }
        self.telemetry
            .samples_dropped
            .with_label_values(&[reason])
            .inc_by(n as u64);
        report.dropped += n;
    }

    fn fall_back(&self, why: &str) {
        if !self.fell_back.swap(true, Ordering::Relaxed) {
            warn!(
                reason = why,
                "the receiver does not take remote write 2.0; sending 1.0 from now on"
            );
        }
    }

    async fn attempt(&self, body: &[u8], protocol: Protocol) -> Attempt {
        let (content_type, version) = match protocol {
            Protocol::V1 => (CONTENT_TYPE, VERSION),
            Protocol::V2 => (v2::CONTENT_TYPE, v2::VERSION),
        };
        let request = match request(&self.endpoint, body.to_vec(), content_type, version) {
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
        // The spec's written counts; 1.0 receivers send none (and are not asked to).
        let written = match protocol {
            Protocol::V1 => None,
            Protocol::V2 => outcome
                .headers()
                .get(v2::SAMPLES_WRITTEN_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<usize>().ok()),
        };
        let disposition = Disposition::of(status);
        if disposition == Disposition::Accepted {
            debug!(status = status.as_u16(), ?written, "remote write accepted");
            return Attempt::Accepted(written);
        }
        let text = outcome.text().await.unwrap_or_default();
        if protocol == Protocol::V2 && status == reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE {
            Attempt::Unsupported(text)
        } else if disposition == Disposition::Retry {
            Attempt::Retry(format!("HTTP {status}: {text}"))
        } else {
            Attempt::Refused(status.as_u16(), text, written)
        }
    }

    fn count(&self, outcome: &str) {
        self.telemetry
            .remote_write_requests
            .with_label_values(&[outcome])
            .inc();
    }
}
