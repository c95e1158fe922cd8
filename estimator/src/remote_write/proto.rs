//! The messages of Prometheus remote write 1.0 (`prometheus/prompb/{remote,types}.proto`), declared
//! with prost's derive so no `protoc` is needed at build time. Only the fields a sender of float
//! samples uses are declared; the field numbers are the upstream ones.

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

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Label {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
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
        let mut labels: Vec<Label> = std::iter::once(("__name__", name))
            .chain(labels.iter().copied().filter(|(_, v)| !v.is_empty()))
            .map(|(n, v)| Label {
                name: n.to_string(),
                value: v.to_string(),
            })
            .collect();
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        TimeSeries {
            labels,
            samples: Vec::new(),
        }
    }

    /// The value of a label, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.as_str())
    }
}
