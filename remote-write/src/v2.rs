//! Prometheus remote write 2.0 (`io.prometheus.write.v2.Request`): every string of a request
//! (label names and values, help texts, units) is written once in a symbols table and referred
//! to by index; each series carries its metadata (type, help, unit), and each sample an optional
//! start ("created") timestamp.
//!
//! The messages follow `prompb/io/prometheus/write/v2/types.proto` as Prometheus 3.16
//! (module v0.316.0) ships it, spec version 2.0-rc.5: the created timestamp is
//! `Sample.start_timestamp` (field 3); the rc.4 text's `TimeSeries.created_timestamp` (field 6) is
//! reserved there and not written. Histograms and exemplars are not declared: the estimator sends
//! float samples only.
//!
//! As for 1.0, prost's derive is the reference and the decoder, and [`encode_request`] writes the
//! same bytes in one pass (a test compares them). A 2.0 body is made from the series of a 1.0
//! body laid out by [`crate::BatchWriter::new`] ([`transcode`]), so both protocols cut requests at
//! the same places and a sender can fall back to 1.0 with the body it already has.

use std::collections::HashMap;

use bytes::Bytes;
use prost::Message;

use crate::proto::{TimeSeries as V1Series, WriteRequest};
use crate::wire::{field_len, put_varint, varint_len};

/// `Content-Type` of a 2.0 request.
pub const CONTENT_TYPE: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
/// `X-Prometheus-Remote-Write-Version` of a 2.0 request.
pub const VERSION: &str = "2.0.0";
/// Response header: float samples the receiver wrote.
pub const SAMPLES_WRITTEN_HEADER: &str = "X-Prometheus-Remote-Write-Samples-Written";
/// Response header: histogram samples the receiver wrote.
pub const HISTOGRAMS_WRITTEN_HEADER: &str = "X-Prometheus-Remote-Write-Histograms-Written";
/// Response header: exemplars the receiver wrote.
pub const EXEMPLARS_WRITTEN_HEADER: &str = "X-Prometheus-Remote-Write-Exemplars-Written";

/// `io.prometheus.write.v2.Request`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Strings referred to by index; the first is always `""`.
    #[prost(string, repeated, tag = "4")]
    pub symbols: Vec<String>,
    /// Series.
    #[prost(message, repeated, tag = "5")]
    pub timeseries: Vec<TimeSeries>,
}

/// `io.prometheus.write.v2.TimeSeries` (float samples only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Name, value, name, value … as indices into [`Request::symbols`], sorted by name.
    #[prost(uint32, repeated, tag = "1")]
    pub labels_refs: Vec<u32>,
    /// Samples, oldest first.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Type, help and unit.
    #[prost(message, optional, tag = "5")]
    pub metadata: Option<Metadata>,
}

/// `io.prometheus.write.v2.Sample`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Sample {
    /// The value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
    /// When a counter started counting, ms (0: unknown).
    #[prost(int64, tag = "3")]
    pub start_timestamp: i64,
}

/// `io.prometheus.write.v2.Metadata`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Metadata {
    /// [`MetricType`].
    #[prost(enumeration = "MetricType", tag = "1")]
    pub r#type: i32,
    /// Index of the help text in [`Request::symbols`] (0: none).
    #[prost(uint32, tag = "3")]
    pub help_ref: u32,
    /// Index of the unit in [`Request::symbols`] (0: none).
    #[prost(uint32, tag = "4")]
    pub unit_ref: u32,
}

/// `io.prometheus.write.v2.Metadata.MetricType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MetricType {
    /// Not known.
    Unspecified = 0,
    /// Counter.
    Counter = 1,
    /// Gauge.
    Gauge = 2,
    /// Histogram.
    Histogram = 3,
    /// Gauge histogram.
    Gaugehistogram = 4,
    /// Summary.
    Summary = 5,
    /// Info.
    Info = 6,
    /// State set.
    Stateset = 7,
}

/// What a sender knows about a series beyond its labels and samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Description {
    /// Type of the metric.
    pub kind: MetricType,
    /// Help text (empty: none).
    pub help: &'static str,
    /// Unit, e.g. `joules` (empty: none).
    pub unit: &'static str,
    /// Start timestamp of every sample, ms (0: unknown).
    pub start_timestamp: i64,
}

/// Interns strings into the symbols table, `""` first.
struct Symbols<'a> {
    order: Vec<&'a [u8]>,
    index: HashMap<&'a [u8], u32>,
}

impl<'a> Symbols<'a> {
    fn new() -> Symbols<'a> {
        let mut s = Symbols {
            order: Vec::new(),
            index: HashMap::new(),
        };
        s.get(b"");
        s
    }

    fn get(&mut self, text: &'a [u8]) -> u32 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.order.len() as u32;
        self.order.push(text);
        self.index.insert(text, i);
        i
    }
}

fn sample_len(s: &crate::Sample, start: i64) -> usize {
    let mut n = 0;
    if s.value != 0.0 {
        n += 9;
    }
    if s.timestamp != 0 {
        n += 1 + varint_len(s.timestamp as u64);
    }
    if start != 0 {
        n += 1 + varint_len(start as u64);
    }
    n
}

fn metadata_len(m: &Metadata) -> usize {
    let field = |v: u64| if v == 0 { 0 } else { 1 + varint_len(v) };
    // The type is an int32 enum: negative values would take 10 bytes, there are none.
    field(m.r#type as u64) + field(m.help_ref as u64) + field(m.unit_ref as u64)
}

/// `Request` protobuf bytes of `series`, with what `describe` says about each (`None`: no
/// metadata, no start timestamps). Labels must be sorted by name and without empty values, as
/// [`V1Series::from_labels`] leaves them.
pub fn encode_request(
    series: &[V1Series],
    describe: impl Fn(&V1Series) -> Option<Description>,
) -> Vec<u8> {
    let mut symbols = Symbols::new();
    let mut body = Vec::new();
    let mut refs: Vec<u32> = Vec::new();
    for ts in series {
        refs.clear();
        for l in &ts.labels {
            refs.push(symbols.get(&l.name));
            refs.push(symbols.get(&l.value));
        }
        let description = describe(ts);
        let metadata = description.map(|d| Metadata {
            r#type: d.kind as i32,
            help_ref: symbols.get(d.help.as_bytes()),
            unit_ref: symbols.get(d.unit.as_bytes()),
        });
        let start = description.map_or(0, |d| d.start_timestamp);
        let refs_len: usize = refs.iter().map(|&r| varint_len(r as u64)).sum();
        let mut len = if refs.is_empty() {
            0
        } else {
            field_len(refs_len)
        };
        len += ts
            .samples
            .iter()
            .map(|s| field_len(sample_len(s, start)))
            .sum::<usize>();
        if let Some(m) = &metadata {
            len += field_len(metadata_len(m));
        }
        body.push(0x2a); // field 5 (timeseries), length-delimited
        put_varint(&mut body, len as u64);
        if !refs.is_empty() {
            body.push(0x0a); // field 1 (labels_refs), packed
            put_varint(&mut body, refs_len as u64);
            for &r in &refs {
                put_varint(&mut body, r as u64);
            }
        }
        for s in &ts.samples {
            body.push(0x12); // field 2 (samples)
            put_varint(&mut body, sample_len(s, start) as u64);
            if s.value != 0.0 {
                body.push(0x09); // field 1 (value), 64-bit
                body.extend_from_slice(&s.value.to_le_bytes());
            }
            if s.timestamp != 0 {
                body.push(0x10); // field 2 (timestamp)
                put_varint(&mut body, s.timestamp as u64);
            }
            if start != 0 {
                body.push(0x18); // field 3 (start_timestamp)
                put_varint(&mut body, start as u64);
            }
        }
        if let Some(m) = &metadata {
            body.push(0x2a); // field 5 (metadata)
            put_varint(&mut body, metadata_len(m) as u64);
            for (key, v) in [
                (0x08, m.r#type as u64),
                (0x18, m.help_ref as u64),
                (0x20, m.unit_ref as u64),
            ] {
                if v != 0 {
                    body.push(key);
                    put_varint(&mut body, v);
                }
            }
        }
    }
    let symbols_len: usize = symbols.order.iter().map(|s| field_len(s.len())).sum();
    let mut out = Vec::with_capacity(symbols_len + body.len());
    for s in &symbols.order {
        out.push(0x22); // field 4 (symbols)
        put_varint(&mut out, s.len() as u64);
        out.extend_from_slice(s);
    }
    out.extend_from_slice(&body);
    out
}

/// Why a 1.0 body could not be turned into a 2.0 one.
#[derive(Debug, thiserror::Error)]
#[error("not a prometheus.WriteRequest protobuf body")]
pub struct TranscodeError(#[from] prost::DecodeError);

/// The 2.0 `Request` bytes (uncompressed) holding the series of a 1.0 `WriteRequest` body
/// (uncompressed, as [`crate::BatchWriter::new`] writes it), in the same order.
pub fn transcode(
    v1_protobuf: &[u8],
    describe: impl Fn(&V1Series) -> Option<Description>,
) -> Result<Vec<u8>, TranscodeError> {
    let request = WriteRequest::decode(Bytes::copy_from_slice(v1_protobuf))?;
    Ok(encode_request(&request.timeseries, describe))
}

/// A decoded 2.0 series: labels as (name, value) text, samples, metadata as (type, help, unit).
pub type DecodedSeries = (
    Vec<(String, String)>,
    Vec<Sample>,
    Option<(MetricType, String, String)>,
);

/// Why a 2.0 body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not raw snappy.
    #[error("remote-write 2.0 body is not raw snappy")]
    Snappy(#[from] snap::Error),
    /// Not a `Request` protobuf.
    #[error("remote-write 2.0 body is not an io.prometheus.write.v2.Request protobuf")]
    Protobuf(#[from] prost::DecodeError),
    /// A reference past the symbols table, an odd number of label references, or a symbols
    /// table that does not start with `""`.
    #[error("remote-write 2.0 request: {0}")]
    Symbols(String),
}

/// Decodes a compressed 2.0 body and resolves its references (for receivers in tests).
pub fn decode(body: &[u8]) -> Result<Vec<DecodedSeries>, DecodeError> {
    let raw = snap::raw::Decoder::new().decompress_vec(body)?;
    let request = Request::decode(raw.as_slice())?;
    if request.symbols.first().map(String::as_str) != Some("") {
        return Err(DecodeError::Symbols("symbols[0] is not \"\"".into()));
    }
    let symbol =
        |i: u32| {
            request.symbols.get(i as usize).cloned().ok_or_else(|| {
                DecodeError::Symbols(format!("reference {i} past the symbols table"))
            })
        };
    let mut out = Vec::new();
    for ts in &request.timeseries {
        if ts.labels_refs.len() % 2 != 0 {
            return Err(DecodeError::Symbols(
                "odd number of label references".into(),
            ));
        }
        let labels = ts
            .labels_refs
            .chunks(2)
            .map(|p| Ok((symbol(p[0])?, symbol(p[1])?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let metadata = match &ts.metadata {
            Some(m) => Some((
                MetricType::try_from(m.r#type).unwrap_or(MetricType::Unspecified),
                symbol(m.help_ref)?,
                symbol(m.unit_ref)?,
            )),
            None => None,
        };
        out.push((labels, ts.samples.clone(), metadata));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchLimits, BatchWriter};

    fn series() -> Vec<V1Series> {
        let long = "y".repeat(200);
        let mut a = V1Series::new("energy_joules_total", &[("node", "n1"), ("long", &long)]);
        a.samples = [
            (0.0, 0),
            (-0.0, -1),
            (1.5, 1_790_000_000_123),
            (f64::NAN, i64::MIN),
        ]
        .iter()
        .map(|&(value, timestamp)| crate::Sample { value, timestamp })
        .collect();
        let mut b = V1Series::new("power_watts", &[("node", "n1")]);
        b.samples.push(crate::Sample {
            value: 2.0,
            timestamp: 16384,
        });
        vec![a, b, V1Series::from_labels(vec![])]
    }

    fn describe(ts: &V1Series) -> Option<Description> {
        match ts.label("__name__") {
            Some("energy_joules_total") => Some(Description {
                kind: MetricType::Counter,
                help: "Energy.",
                unit: "joules",
                start_timestamp: 1_789_999_000_000,
            }),
            // Metadata with nothing but a type, the unit symbol shared with another series'.
            Some("power_watts") => Some(Description {
                kind: MetricType::Gauge,
                help: "",
                unit: "joules",
                start_timestamp: 0,
            }),
            _ => None,
        }
    }

    /// The same request built with prost's structs.
    fn reference(series: &[V1Series]) -> Vec<u8> {
        let mut symbols: Vec<String> = vec![String::new()];
        let mut get = |s: &[u8]| {
            let s = String::from_utf8(s.to_vec()).unwrap();
            match symbols.iter().position(|x| *x == s) {
                Some(i) => i as u32,
                None => {
                    symbols.push(s);
                    symbols.len() as u32 - 1
                }
            }
        };
        let mut timeseries = Vec::new();
        for ts in series {
            let labels_refs = ts
                .labels
                .iter()
                .flat_map(|l| [get(&l.name), get(&l.value)])
                .collect();
            let d = describe(ts);
            let metadata = d.map(|d| Metadata {
                r#type: d.kind as i32,
                help_ref: get(d.help.as_bytes()),
                unit_ref: get(d.unit.as_bytes()),
            });
            let start = d.map_or(0, |d| d.start_timestamp);
            timeseries.push(TimeSeries {
                labels_refs,
                samples: ts
                    .samples
                    .iter()
                    .map(|s| Sample {
                        value: s.value,
                        timestamp: s.timestamp,
                        start_timestamp: start,
                    })
                    .collect(),
                metadata,
            });
        }
        Request {
            symbols,
            timeseries,
        }
        .encode_to_vec()
    }

    #[test]
    fn identical_to_prost() {
        let series = series();
        let ours = encode_request(&series, describe);
        assert_eq!(ours, reference(&series));
        let decoded = Request::decode(ours.as_slice()).unwrap();
        assert_eq!(decoded.symbols[0], "");
        assert_eq!(
            decoded.symbols.iter().filter(|s| *s == "n1").count(),
            1,
            "a string shared by two series is written once"
        );
        assert_eq!(decoded.timeseries.len(), 3);
        assert_eq!(
            decoded.timeseries[0].samples[2].start_timestamp,
            1_789_999_000_000
        );
    }

    #[test]
    fn transcoding_a_batch_writer_body_keeps_every_series_and_sample() {
        let series = series();
        let mut w = BatchWriter::new(BatchLimits::default());
        for ts in &series {
            w.push(ts);
        }
        let batch = w.finish().remove(0);
        let v2 = transcode(&batch.body, describe).unwrap();
        // The series without samples is not written by the batch writer.
        assert_eq!(v2, reference(&series[..2]));
        let decoded = decode(&crate::compress(&v2)).unwrap();
        let (labels, samples, metadata) = &decoded[0];
        assert_eq!(labels[0], ("__name__".into(), "energy_joules_total".into()));
        assert_eq!(samples.len(), 4);
        assert_eq!(
            metadata,
            &Some((MetricType::Counter, "Energy.".into(), "joules".into()))
        );
        assert_eq!(
            decoded[1].2,
            Some((MetricType::Gauge, String::new(), "joules".into()))
        );
        let err = transcode(b"\x0a\xff\xff", describe).unwrap_err();
        assert!(err.to_string().contains("WriteRequest"), "{err}");
    }

    #[test]
    fn bad_references_are_errors() {
        let bad = Request {
            symbols: vec![String::new(), "a".into()],
            timeseries: vec![TimeSeries {
                labels_refs: vec![1, 7],
                samples: vec![],
                metadata: None,
            }],
        }
        .encode_to_vec();
        let err = decode(&crate::compress(&bad)).unwrap_err();
        assert!(err.to_string().contains("reference 7"), "{err}");
    }
}
