//! Prometheus remote write on the wire: 1.0 (protobuf `WriteRequest`), 2.0 ([`v2`]:
//! `io.prometheus.write.v2.Request`, made from the same batches), raw (block) snappy, the standard
//! headers and batching by samples and bytes. Shared by every GreenPipe writer (the estimator's
//! retrying sender, the carbon intensity writer) so there is one encoder to trust.
//!
//! Ordering rule: Prometheus (2.42) refuses a whole request for one out-of-order sample, so
//! callers hand over series whose samples are in time order and newer than anything sent before;
//! batches keep the order they were given and are sent one after the other.

#[cfg(feature = "client")]
pub mod client;
pub mod proto;
pub mod v2;
pub mod wire;
pub mod writer;

pub use proto::{Label, Sample, TimeSeries, WriteRequest};
pub use writer::{BatchWriter, EncodedBatch, LabelTail};

use prost::Message;

/// `Content-Encoding`.
pub const CONTENT_ENCODING: &str = "snappy";
/// `Content-Type`.
pub const CONTENT_TYPE: &str = "application/x-protobuf";
/// `X-Prometheus-Remote-Write-Version`.
pub const VERSION_HEADER: &str = "X-Prometheus-Remote-Write-Version";
/// Protocol version sent.
pub const VERSION: &str = "0.1.0";

/// Upper bounds of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Samples per request.
    pub max_samples: usize,
    /// Protobuf bytes (before compression) per request.
    pub max_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        // Prometheus' own sender uses 2000 samples; receivers commonly cap bodies at a few MiB.
        BatchLimits {
            max_samples: 2000,
            max_bytes: 1 << 20,
        }
    }
}

/// Splits series into requests within `limits`, keeping their order. A series with more samples
/// than fit is cut into consecutive pieces, oldest first, so time order holds across requests.
pub fn batches(series: Vec<TimeSeries>, limits: BatchLimits) -> Vec<Vec<TimeSeries>> {
    let max_samples = limits.max_samples.max(1);
    let mut out: Vec<Vec<TimeSeries>> = Vec::new();
    let mut current: Vec<TimeSeries> = Vec::new();
    let (mut samples, mut bytes) = (0usize, 0usize);
    for mut ts in series {
        while !ts.samples.is_empty() {
            let room = max_samples - samples;
            let piece = if ts.samples.len() > room {
                let rest = ts.samples.split_off(room);
                TimeSeries {
                    labels: ts.labels.clone(),
                    samples: std::mem::replace(&mut ts.samples, rest),
                }
            } else {
                // The whole (rest of the) series fits: move it, labels included.
                std::mem::take(&mut ts)
            };
            let len = wire::series_len(&piece) + 4;
            if !current.is_empty() && bytes + len > limits.max_bytes {
                out.push(std::mem::take(&mut current));
                (samples, bytes) = (0, 0);
            }
            samples += piece.samples.len();
            bytes += len;
            current.push(piece);
            if samples >= max_samples {
                out.push(std::mem::take(&mut current));
                (samples, bytes) = (0, 0);
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The request body: protobuf, then raw snappy.
pub fn encode(series: Vec<TimeSeries>) -> Vec<u8> {
    compress(&wire::encode_request(&series))
}

/// Raw (block) snappy of a protobuf body.
pub fn compress(protobuf: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(protobuf)
        .expect("snappy accepts any input below 4 GiB")
}

/// Why a request body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The body is not raw (block-format) snappy.
    #[error("remote-write body is not raw snappy")]
    Snappy(#[from] snap::Error),
    /// The decompressed body is not a `prometheus.WriteRequest`.
    #[error("remote-write body is not a WriteRequest protobuf")]
    Protobuf(#[from] prost::DecodeError),
}

/// Decodes a request body (for receivers in tests, and to inspect what was sent).
pub fn decode(body: &[u8]) -> Result<WriteRequest, DecodeError> {
    let raw = snap::raw::Decoder::new().decompress_vec(body)?;
    Ok(WriteRequest::decode(raw.as_slice())?)
}

/// Samples in a batch.
pub fn sample_count(series: &[TimeSeries]) -> usize {
    series.iter().map(|s| s.samples.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, n: i64) -> TimeSeries {
        let mut ts = TimeSeries::new(name, &[("node", "a"), ("b", "x")]);
        ts.samples = (0..n)
            .map(|i| Sample {
                value: i as f64,
                timestamp: i * 1000,
            })
            .collect();
        ts
    }

    #[test]
    fn labels_are_sorted_with_name_first() {
        let ts = series("m", 0);
        let names: Vec<&[u8]> = ts.labels.iter().map(|l| l.name.as_ref()).collect();
        assert_eq!(names, [&b"__name__"[..], b"b", b"node"]);
    }

    #[test]
    fn batches_respect_limits_and_keep_time_order() {
        let limits = BatchLimits {
            max_samples: 4,
            max_bytes: 1 << 20,
        };
        let out = batches(vec![series("a", 3), series("b", 6), series("c", 1)], limits);
        assert!(out.iter().all(|b| sample_count(b) <= 4));
        let flat: Vec<(String, i64)> = out
            .iter()
            .flatten()
            .flat_map(|s| {
                let n = s.label("__name__").unwrap().to_string();
                s.samples.iter().map(move |x| (n.clone(), x.timestamp))
            })
            .collect();
        let expected: Vec<(String, i64)> = [("a", 3), ("b", 6), ("c", 1)]
            .iter()
            .flat_map(|(n, k)| (0..*k).map(move |i| (n.to_string(), i * 1000)))
            .collect();
        assert_eq!(flat, expected);
        let small = BatchLimits {
            max_samples: 1000,
            max_bytes: 60,
        };
        let out = batches(vec![series("a", 1), series("b", 1), series("c", 1)], small);
        assert_eq!(out.len(), 3, "each series alone fills the byte budget");
    }

    #[test]
    fn encode_decode_round_trip() {
        let input = vec![series("a", 2), series("b", 1)];
        let body = encode(input.clone());
        assert_eq!(decode(&body).unwrap().timeseries, input);
        // Raw snappy, not the framed format (which starts with a stream identifier chunk).
        assert_ne!(body[0], 0xff);
    }

    #[test]
    fn bodies_that_are_not_snappy_or_not_a_write_request_say_which() {
        let not_snappy = decode(b"\xff\xff\xff\xff\xff").unwrap_err();
        assert!(matches!(not_snappy, DecodeError::Snappy(_)), "{not_snappy}");
        let not_protobuf = snap::raw::Encoder::new()
            .compress_vec(b"\x0a\xff\xff\xff")
            .unwrap();
        let err = decode(&not_protobuf).unwrap_err();
        assert!(matches!(err, DecodeError::Protobuf(_)), "{err}");
        assert!(err.to_string().contains("WriteRequest"), "{err}");
    }
}
