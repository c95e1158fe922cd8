//! Where samples of the intensity metric go.
//!
//! [`SampleSink`] is the seam between the carbon commands and where their samples go.
//! [`RemoteWrite`] posts one request per batch (a few dozen samples per run, so no batching or
//! retry loop: a failed run fails the command and the next run writes again); the wire format is
//! the shared `greenpipe-remote-write` crate, the same encoder the estimator uses.

use bytes::Bytes;
use greenpipe_remote_write::{
    Label, TimeSeries, CONTENT_ENCODING, CONTENT_TYPE, VERSION, VERSION_HEADER,
};
use std::future::Future;

/// A batch that did not reach the receiver; each names the URL.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// No HTTP answer (connection refused, timeout, TLS).
    #[error("remote write to {url}")]
    Request {
        /// The remote-write URL.
        url: String,
        /// The transport error.
        source: reqwest::Error,
    },
    /// The receiver refused the batch.
    #[error("remote write to {url}: HTTP {status}: {body}")]
    Status {
        /// The remote-write URL.
        url: String,
        /// The status code.
        status: reqwest::StatusCode,
        /// The receiver's answer, trimmed (Prometheus says why it refused).
        body: String,
    },
}

/// One sample: labels including `__name__`, value, timestamp in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label pairs; `__name__` carries the metric name.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
    /// Unix milliseconds.
    pub timestamp_ms: i64,
}

impl Sample {
    /// A sample of metric `name` with `labels`.
    pub fn new(name: &str, labels: &[(&str, &str)], value: f64, timestamp_ms: i64) -> Self {
        let mut all = vec![("__name__".to_string(), name.to_string())];
        all.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Sample {
            labels: all,
            value,
            timestamp_ms,
        }
    }
}

/// Something that accepts samples.
pub trait SampleSink {
    /// Writes a batch.
    fn write(&self, samples: &[Sample]) -> impl Future<Output = Result<(), WriteError>> + Send;
}

/// The remote-write body of `samples`: one series per sample, through the shared protocol crate
/// (labels sorted, empty values left out, raw snappy).
pub fn encode(samples: &[Sample]) -> Vec<u8> {
    let series = samples
        .iter()
        .map(|s| {
            let labels = s
                .labels
                .iter()
                .map(|(name, value)| Label {
                    name: Bytes::copy_from_slice(name.as_bytes()),
                    value: Bytes::copy_from_slice(value.as_bytes()),
                })
                .collect();
            let mut ts = TimeSeries::from_labels(labels);
            ts.samples.push(greenpipe_remote_write::Sample {
                value: s.value,
                timestamp: s.timestamp_ms,
            });
            ts
        })
        .collect();
    greenpipe_remote_write::encode(series)
}

/// Minimal remote-write client.
#[derive(Debug, Clone)]
pub struct RemoteWrite {
    client: reqwest::Client,
    url: String,
}

impl RemoteWrite {
    /// A client for `url` (e.g. `http://prometheus:9090/api/v1/write`).
    pub fn new(client: reqwest::Client, url: impl Into<String>) -> Self {
        RemoteWrite {
            client,
            url: url.into(),
        }
    }
}

impl SampleSink for RemoteWrite {
    async fn write(&self, samples: &[Sample]) -> Result<(), WriteError> {
        if samples.is_empty() {
            return Ok(());
        }
        let body = encode(samples);
        let resp = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_ENCODING, CONTENT_ENCODING)
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .header(VERSION_HEADER, VERSION)
            .body(body)
            .send()
            .await
            .map_err(|source| WriteError::Request {
                url: self.url.clone(),
                source,
            })?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(WriteError::Status {
                url: self.url.clone(),
                status,
                body: text.trim().to_string(),
            });
        }
        Ok(())
    }
}

/// Prints samples in the text exposition style (dry runs).
#[derive(Debug, Clone, Copy)]
pub struct Stdout;

impl SampleSink for Stdout {
    async fn write(&self, samples: &[Sample]) -> Result<(), WriteError> {
        for s in samples {
            let name = s
                .labels
                .iter()
                .find(|(k, _)| k == "__name__")
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            let labels: Vec<String> = s
                .labels
                .iter()
                .filter(|(k, _)| k != "__name__")
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            println!(
                "{name}{{{}}} {} {}",
                labels.join(","),
                s.value,
                s.timestamp_ms
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_decodes_with_sorted_labels() {
        let s = Sample::new("m", &[("zone", "A"), ("kind", "actual")], 1.5, 7);
        let req = greenpipe_remote_write::decode(&encode(&[s])).unwrap();
        assert_eq!(req.timeseries.len(), 1);
        let ts = &req.timeseries[0];
        let names: Vec<&[u8]> = ts.labels.iter().map(|l| l.name.as_ref()).collect();
        assert_eq!(names, [&b"__name__"[..], b"kind", b"zone"]);
        assert_eq!(ts.label("zone"), Some("A"));
        assert_eq!(
            ts.samples,
            [greenpipe_remote_write::Sample {
                value: 1.5,
                timestamp: 7
            }]
        );
    }

    /// A receiver that answers every request with `answer` (raw HTTP/1.1) on a loopback port.
    async fn answering(answer: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = vec![0; 65536];
                let _ = conn.read(&mut buf).await;
                let _ = conn.write_all(answer.as_bytes()).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn a_refused_batch_names_the_url_the_status_and_the_reason() {
        let url = answering(
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 19\r\nconnection: close\r\n\r\nout of order sample",
        )
        .await;
        let sink = RemoteWrite::new(reqwest::Client::new(), url.clone());
        let e = sink
            .write(&[Sample::new("m", &[], 1.0, 7)])
            .await
            .unwrap_err();
        assert!(
            matches!(&e, WriteError::Status { status, .. } if status.as_u16() == 400),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!("remote write to {url}: HTTP 400 Bad Request: out of order sample")
        );
    }

    #[tokio::test]
    async fn an_unreachable_receiver_names_the_url() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/api/v1/write");
        let sink = RemoteWrite::new(reqwest::Client::new(), url.clone());
        let e = sink
            .write(&[Sample::new("m", &[], 1.0, 7)])
            .await
            .unwrap_err();
        assert!(matches!(&e, WriteError::Request { .. }), "{e}");
        assert_eq!(e.to_string(), format!("remote write to {url}"));
        assert!(
            std::error::Error::source(&e).is_some(),
            "the transport error is kept"
        );
    }
}
