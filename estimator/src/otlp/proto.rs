//! The OTLP messages the estimator sends, declared by hand with prost's derive: the subset of
//! `opentelemetry/proto/collector/metrics/v1/metrics_service.proto`, `metrics/v1/metrics.proto`,
//! `common/v1/common.proto` and `resource/v1/resource.proto` (opentelemetry-proto 1.x) that
//! carries gauges and sums of doubles. Field numbers are those of the .proto files; fields the
//! estimator never sets are left out, which protobuf allows (a receiver sees them unset).

/// `ExportMetricsServiceRequest`, the body of `POST /v1/metrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceRequest {
    /// One per resource (here: per node).
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `ExportMetricsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceResponse {
    /// Set when the receiver took part of the request.
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportMetricsPartialSuccess>,
}

/// `ExportMetricsPartialSuccess`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsPartialSuccess {
    /// Data points refused.
    #[prost(int64, tag = "1")]
    pub rejected_data_points: i64,
    /// Why.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceMetrics {
    /// What the metrics are about.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Metrics, by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
    /// Semantic-conventions schema of the resource attributes.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    /// Resource attributes.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeMetrics {
    /// Who produced the metrics.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The metrics.
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
    /// Semantic-conventions schema of the metrics.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Version.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `Metric` (gauge or sum).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    /// Name, e.g. `hw.host.energy`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Description.
    #[prost(string, tag = "2")]
    pub description: String,
    /// UCUM unit, e.g. `J`.
    #[prost(string, tag = "3")]
    pub unit: String,
    /// The points.
    #[prost(oneof = "Data", tags = "5, 7")]
    pub data: Option<Data>,
}

/// `Metric.data`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Data {
    /// Instantaneous values.
    #[prost(message, tag = "5")]
    Gauge(Gauge),
    /// Sums (counters).
    #[prost(message, tag = "7")]
    Sum(Sum),
}

/// `Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Gauge {
    /// Points.
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// `Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sum {
    /// Points.
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    /// [`AggregationTemporality`].
    #[prost(enumeration = "AggregationTemporality", tag = "2")]
    pub aggregation_temporality: i32,
    /// Only ever grows (a counter).
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

/// `AggregationTemporality`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum AggregationTemporality {
    /// Not set.
    Unspecified = 0,
    /// Each point covers the time since the previous one.
    Delta = 1,
    /// Each point covers the time since the start.
    Cumulative = 2,
}

/// `NumberDataPoint` (double values).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NumberDataPoint {
    /// Point attributes.
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    /// When a cumulative sum started, ns since the Unix epoch (0: unknown).
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    /// ns since the Unix epoch.
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// The value.
    #[prost(oneof = "Value", tags = "4")]
    pub value: Option<Value>,
}

/// `NumberDataPoint.value`.
#[derive(Clone, Copy, PartialEq, prost::Oneof)]
pub enum Value {
    /// `as_double`.
    #[prost(double, tag = "4")]
    AsDouble(f64),
}

/// `KeyValue` with a string value (the only kind sent).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct KeyValue {
    /// Attribute name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Attribute value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue` (strings only).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct AnyValue {
    /// `string_value`.
    #[prost(oneof = "AnyKind", tags = "1")]
    pub value: Option<AnyKind>,
}

/// `AnyValue.value`.
#[derive(Clone, PartialEq, Eq, prost::Oneof)]
pub enum AnyKind {
    /// `string_value`.
    #[prost(string, tag = "1")]
    StringValue(String),
}

impl KeyValue {
    /// A string attribute.
    pub fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Some(AnyValue {
                value: Some(AnyKind::StringValue(value.to_string())),
            }),
        }
    }
}
