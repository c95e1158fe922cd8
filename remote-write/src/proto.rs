//! The messages of Prometheus remote write 1.0 (`prometheus/prompb/{remote,types}.proto`), declared
//! with prost's derive so no `protoc` is needed at build time. Only the fields a sender of float
//! samples uses are declared; the field numbers are the upstream ones.
//!
//! Label names and values are declared as `bytes` (the same wire encoding as `string`) holding
//! [`Bytes`]: a node's name or a container id is shared by all of its series by reference count
//! instead of being copied into every series — at fleet scale that was most of the encoding time.

use bytes::Bytes;

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// Series with their samples.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: labels sorted by name (`__name__` first), samples in time order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Label pairs, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// Samples, oldest first.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label` (UTF-8 name and value).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Label {
    /// Label name.
    #[prost(bytes = "bytes", tag = "1")]
    pub name: Bytes,
    /// Label value.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

impl Label {
    /// A label from a static name and a shared value.
    pub fn new(name: &'static str, value: Bytes) -> Label {
        Label {
            name: Bytes::from_static(name.as_bytes()),
            value,
        }
    }
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

impl TimeSeries {
    /// A series named `name` with `labels` (any order), sorted as the protocol requires. Labels
    /// with an empty value are left out: in Prometheus an empty label is an absent label.
    pub fn new(name: &str, labels: &[(&str, &str)]) -> TimeSeries {
        let labels: Vec<Label> = std::iter::once(("__name__", name))
            .chain(labels.iter().copied())
            .map(|(n, v)| Label {
                name: Bytes::copy_from_slice(n.as_bytes()),
                value: Bytes::copy_from_slice(v.as_bytes()),
            })
            .collect();
        TimeSeries::from_labels(labels)
    }

    /// A series from labels including `__name__` (any order; empty values are left out).
    pub fn from_labels(mut labels: Vec<Label>) -> TimeSeries {
        labels.retain(|l| !l.value.is_empty());
        if !labels.is_sorted_by(|a, b| a.name <= b.name) {
            labels.sort_by(|a, b| a.name.cmp(&b.name));
        }
        TimeSeries {
            labels,
            samples: Vec::new(),
        }
    }

    /// The value of a label, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|l| l.name == name.as_bytes())
            .and_then(|l| std::str::from_utf8(&l.value).ok())
    }
}
