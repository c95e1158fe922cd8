//! Where samples of the intensity metric go.
//!
//! [`SampleSink`] is the seam: the estimator's own remote-write client (issue 5, being written
//! in parallel) can implement it, and this crate then needs no client of its own. Until the two
//! are unified, [`RemoteWrite`] is a minimal Prometheus remote-write 1.0 client: prost-encoded
//! `WriteRequest`, raw (block) snappy, and the three protocol headers.

use anyhow::{bail, Context, Result};
use std::future::Future;

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
    fn write(&self, samples: &[Sample]) -> impl Future<Output = Result<()>> + Send;
}

/// Prometheus remote-write protobuf messages (prometheus/prompb/types.proto, the fields used).
pub mod proto {
    /// `prometheus.WriteRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WriteRequest {
        /// Series.
        #[prost(message, repeated, tag = "1")]
        pub timeseries: Vec<TimeSeries>,
    }
    /// `prometheus.TimeSeries`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TimeSeries {
        /// Labels sorted by name.
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<Label>,
        /// Samples in time order.
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
    }
    /// `prometheus.Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        /// Name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Value.
        #[prost(string, tag = "2")]
        pub value: String,
    }
    /// `prometheus.Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// Value.
        #[prost(double, tag = "1")]
        pub value: f64,
        /// Unix milliseconds.
        #[prost(int64, tag = "2")]
        pub timestamp: i64,
    }
}

/// Encodes samples as a snappy-compressed `WriteRequest` body.
pub fn encode(samples: &[Sample]) -> Result<Vec<u8>> {
    use prost::Message;
    let timeseries = samples
        .iter()
        .map(|s| {
            let mut labels: Vec<proto::Label> = s
                .labels
                .iter()
                .map(|(name, value)| proto::Label {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect();
            labels.sort_by(|a, b| a.name.cmp(&b.name));
            proto::TimeSeries {
                labels,
                samples: vec![proto::Sample {
                    value: s.value,
                    timestamp: s.timestamp_ms,
                }],
            }
        })
        .collect();
    let raw = proto::WriteRequest { timeseries }.encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .context("snappy")
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
    async fn write(&self, samples: &[Sample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let body = encode(samples)?;
        let resp = self
            .client
            .post(&self.url)
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(body)
            .send()
            .await
            .with_context(|| format!("remote write to {}", self.url))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            bail!(
                "remote write to {}: HTTP {status}: {}",
                self.url,
                text.trim()
            );
        }
        Ok(())
    }
}

/// Prints samples in the text exposition style (dry runs).
#[derive(Debug, Clone, Copy)]
pub struct Stdout;

impl SampleSink for Stdout {
    async fn write(&self, samples: &[Sample]) -> Result<()> {
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
    use prost::Message;

    #[test]
    fn body_decodes_with_sorted_labels() {
        let s = Sample::new("m", &[("zone", "A"), ("kind", "actual")], 1.5, 7);
        let body = encode(&[s]).unwrap();
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let req = proto::WriteRequest::decode(raw.as_slice()).unwrap();
        let names: Vec<&str> = req.timeseries[0]
            .labels
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(names, vec!["__name__", "kind", "zone"]);
        assert_eq!(
            req.timeseries[0].samples[0],
            proto::Sample {
                value: 1.5,
                timestamp: 7
            }
        );
    }
}
