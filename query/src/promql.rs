//! A client for Prometheus' HTTP query API (`/api/v1/query_range`) and a decoder of its JSON
//! answers that borrows label strings from the body instead of allocating a map per series: at
//! fleet scale one answer holds hundreds of thousands of series, and decoding is most of the
//! estimator's CPU time.
//!
//! Every read uses a range query, live ticks included (start = end): a range query evaluates the
//! expression at `start + k*step`, so the estimator's aligned ticks and a later backfill of the
//! same ticks see exactly the same evaluation times and give the same values.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, Instant};

use serde::de::{self, DeserializeSeed as _, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use smallvec::{smallvec, SmallVec};

use crate::endpoint::Endpoint;

mod scan;

/// One series of a matrix answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSeries<'a> {
    /// Label pairs as Prometheus returned them.
    pub labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// `(milliseconds, value)` in time order.
    pub points: Points,
}

/// A series' points. A live tick reads one point per series: kept inline, no allocation for each
/// of the 200,000 series of a fleet's answer.
pub type Points = SmallVec<[(i64, f64); 1]>;

impl RangeSeries<'_> {
    /// The value of a label, or `""` when absent (PromQL's convention).
    pub fn label(&self, name: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_ref())
            .unwrap_or("")
    }
}

/// A decoded answer: its series and the warnings the engine attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<'a> {
    /// The series.
    pub series: Vec<RangeSeries<'a>>,
    /// `warnings` of the answer (Prometheus, Thanos, Mimir).
    pub warnings: Vec<String>,
}

/// Decodes a `query_range` (matrix) or `query` (vector: one point per series) answer body.
pub fn decode_matrix(body: &[u8]) -> Result<Vec<RangeSeries<'_>>, DecodeError> {
    decode_answer(body).map(|d| d.series)
}

/// [`decode_matrix`], keeping the answer's warnings. An answer flagged partial (VictoriaMetrics
/// cluster's `isPartial`) is an error: some storage nodes did not answer, and a tick estimated
/// from part of the fleet's data would be written once and never corrected.
pub fn decode_answer(body: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let mut series = Vec::new();
    let warnings = decode_each(body, &mut |labels, points| {
        series.push(RangeSeries {
            labels: labels.into_vec(),
            points,
        })
    })?;
    Ok(Decoded { series, warnings })
}

/// A series' labels as [`decode_each`] hands them over: inline up to the four labels of a
/// container series, so streaming a fleet's answer allocates nothing per series.
pub type SeriesLabels<'a> = SmallVec<[(Cow<'a, str>, Cow<'a, str>); 4]>;

/// [`decode_answer`] without collecting: each series goes to `each` as soon as it is read, and the
/// answer's warnings are returned. At fleet scale (200,000 series) a vector of labels per series,
/// and the series list itself, were a large part of decoding. On an error, series already handed
/// over belong to an answer that is not to be used.
pub fn decode_each<'a>(
    body: &'a [u8],
    each: &mut dyn FnMut(SeriesLabels<'a>, Points),
) -> Result<Vec<String>, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    AnswerSeed { each }
        .deserialize(&mut de)
        .and_then(|a| de.end().map(|()| a))
        .map_err(DecodeError::Json)?
        .checked()
}

/// [`decode_each`], reading the shape Prometheus writes (no escapes in strings, no unknown
/// field) several times faster, and any other body with serde. `each` must take a series seen
/// twice as once: when the fast reader meets something it does not read, part-way, serde reads
/// the body again from the start.
pub fn decode_each_fast<'a>(
    body: &'a [u8],
    each: &mut dyn FnMut(SeriesLabels<'a>, Points),
) -> Result<Vec<String>, DecodeError> {
    match scan::answer(body, each) {
        Some(e) => AnswerFields {
            status: Cow::Borrowed(e.status),
            result_type: e.result_type.map(Cow::Borrowed),
            error_type: None,
            error: None,
            warnings: e.warnings,
            is_partial: e.is_partial,
        }
        .checked(),
        None => decode_each(body, each),
    }
}

impl AnswerFields<'_> {
    /// The warnings of a successful, complete matrix or vector answer.
    fn checked(self) -> Result<Vec<String>, DecodeError> {
        if self.status != "success" {
            return Err(DecodeError::Engine {
                error_type: self.error_type.unwrap_or_default(),
                error: self.error.unwrap_or_default(),
            });
        }
        if self.is_partial {
            return Err(DecodeError::Failure(QueryFailure::Partial(
                self.warnings.join("; "),
            )));
        }
        let result_type = self.result_type.ok_or(DecodeError::NoData)?;
        if result_type != "matrix" && result_type != "vector" {
            return Err(DecodeError::ResultType {
                result_type: result_type.into_owned(),
            });
        }
        Ok(self.warnings)
    }
}

/// Why an answer body could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not the API's JSON.
    #[error("decoding the PromQL answer")]
    Json(#[source] serde_json::Error),
    /// `"status":"error"`: the engine refused the query.
    #[error("PromQL error ({error_type}): {error}")]
    Engine {
        /// `errorType` (`bad_data`, `timeout`, …).
        error_type: String,
        /// `error`.
        error: String,
    },
    /// A failure the caller acts on (a partial answer).
    #[error(transparent)]
    Failure(QueryFailure),
    /// `"status":"success"` without `data`.
    #[error("PromQL answer without data")]
    NoData,
    /// A scalar or string answer.
    #[error("expected a matrix or vector answer, got {result_type}")]
    ResultType {
        /// The answer's `resultType`.
        result_type: String,
    },
}

/// Why a query request failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Status, timeout, network: see [`QueryFailure`].
    #[error(transparent)]
    Failure(#[from] QueryFailure),
    /// The bearer token file could not be read for this request.
    #[error("authenticating to {url}")]
    Auth {
        /// The engine's URL.
        url: String,
        /// Why.
        source: greenpipe_common::secret::SecretError,
    },
}

/// Why a query failed, as far as the caller can act on it.
#[derive(Debug, thiserror::Error)]
pub enum QueryFailure {
    /// The engine answered with an HTTP error status.
    #[error("PromQL request answered HTTP {status}: {detail}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// The engine's error text.
        detail: String,
    },
    /// The request timed out (ours or the engine's `timeout`).
    #[error("PromQL request timed out: {0}")]
    Timeout(String),
    /// The engine could not be reached.
    #[error("querying {0}")]
    Network(String),
    /// The engine answered from part of its stores only.
    #[error("partial PromQL answer refused: {0}")]
    Partial(String),
}

impl QueryFailure {
    /// The `outcome` label of the query counter.
    pub fn outcome(&self) -> String {
        match self {
            QueryFailure::Status { status, .. } => format!("http_{status}"),
            QueryFailure::Timeout(_) => "timeout".into(),
            QueryFailure::Network(_) => "network_error".into(),
            QueryFailure::Partial(_) => "partial".into(),
        }
    }

    /// Whether asking for fewer ticks at once may succeed: the engine refused the amount of work
    /// (Prometheus/Mimir 422 "too many samples", limits, timeouts), not the query itself.
    pub fn is_too_big(&self) -> bool {
        match self {
            QueryFailure::Status { status, .. } => *status == 422 || *status == 413,
            QueryFailure::Timeout(_) => true,
            QueryFailure::Network(_) | QueryFailure::Partial(_) => false,
        }
    }

    /// The failure inside an error chain, if the chain holds one (directly or inside a
    /// [`DecodeError`] or [`QueryError`], whose transparent variants hide it from `source()`).
    pub fn of<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e QueryFailure> {
        std::iter::successors(Some(e), |e| e.source()).find_map(|e| {
            e.downcast_ref::<QueryFailure>()
                .or_else(|| match e.downcast_ref::<DecodeError>() {
                    Some(DecodeError::Failure(f)) => Some(f),
                    _ => None,
                })
                .or_else(|| match e.downcast_ref::<QueryError>() {
                    Some(QueryError::Failure(f)) => Some(f),
                    _ => None,
                })
        })
    }
}

/// The sink series are streamed to.
type Each<'s, 'a> = &'s mut dyn FnMut(SeriesLabels<'a>, Points);

/// What [`decode_each`] keeps of an answer besides its series.
struct AnswerFields<'a> {
    status: Cow<'a, str>,
    /// `data.resultType`; `None` without `data`.
    result_type: Option<Cow<'a, str>>,
    error_type: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    is_partial: bool,
}

/// The answer object, `data.result` streamed to the sink (the fields and defaults of the API's
/// envelope; unknown fields are ignored, a field given twice is an error).
struct AnswerSeed<'s, 'a> {
    each: Each<'s, 'a>,
}

impl<'de: 'a, 'a> de::DeserializeSeed<'de> for AnswerSeed<'_, 'a> {
    type Value = AnswerFields<'a>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

/// `Err(duplicate_field)` when `slot` was set already.
fn once<T, E: de::Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(name)),
        None => Ok(()),
    }
}

impl<'de: 'a, 'a> Visitor<'de> for AnswerSeed<'_, 'a> {
    type Value = AnswerFields<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a query API answer")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut status = None;
        let mut data: Option<Option<Cow<'a, str>>> = None;
        let mut error_type: Option<Option<String>> = None;
        let mut error: Option<Option<String>> = None;
        let mut warnings = None;
        let mut is_partial = None;
        while let Some(key) = map.next_key::<BorrowedStr>()? {
            match key.0.as_ref() {
                "status" => {
                    once(&status, "status")?;
                    status = Some(map.next_value::<BorrowedStr>()?.0);
                }
                "data" => {
                    once(&data, "data")?;
                    data = Some(map.next_value_seed(DataSeed {
                        each: &mut *self.each,
                    })?);
                }
                "errorType" => {
                    once(&error_type, "errorType")?;
                    error_type = Some(map.next_value()?);
                }
                "error" => {
                    once(&error, "error")?;
                    error = Some(map.next_value()?);
                }
                "warnings" => {
                    once(&warnings, "warnings")?;
                    warnings = Some(map.next_value()?);
                }
                "isPartial" => {
                    once(&is_partial, "isPartial")?;
                    is_partial = Some(map.next_value()?);
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(AnswerFields {
            status: status.ok_or_else(|| de::Error::missing_field("status"))?,
            result_type: data.flatten(),
            error_type: error_type.flatten(),
            error: error.flatten(),
            warnings: warnings.unwrap_or_default(),
            is_partial: is_partial.unwrap_or_default(),
        })
    }
}

/// `data` (or `null`): `resultType`, and `result` streamed to the sink.
struct DataSeed<'s, 'a> {
    each: Each<'s, 'a>,
}

impl<'de: 'a, 'a> de::DeserializeSeed<'de> for DataSeed<'_, 'a> {
    type Value = Option<Cow<'a, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for DataSeed<'_, 'a> {
    type Value = Option<Cow<'a, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data {resultType, result}")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut result_type = None;
        let mut result = None;
        while let Some(key) = map.next_key::<BorrowedStr>()? {
            match key.0.as_ref() {
                "resultType" => {
                    once(&result_type, "resultType")?;
                    result_type = Some(map.next_value::<BorrowedStr>()?.0);
                }
                "result" => {
                    once(&result, "result")?;
                    result = Some(map.next_value_seed(ResultSeed {
                        each: &mut *self.each,
                    })?);
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        result.ok_or_else(|| de::Error::missing_field("result"))?;
        result_type
            .map(Some)
            .ok_or_else(|| de::Error::missing_field("resultType"))
    }
}

/// `data.result`: each series to the sink.
struct ResultSeed<'s, 'a> {
    each: Each<'s, 'a>,
}

impl<'de: 'a, 'a> de::DeserializeSeed<'de> for ResultSeed<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ResultSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        while let Some(()) = seq.next_element_seed(SeriesSeed {
            each: &mut *self.each,
        })? {}
        Ok(())
    }
}

/// One series `{metric, values}` (or `{metric, value}`), handed to the sink.
struct SeriesSeed<'s, 'a> {
    each: Each<'s, 'a>,
}

impl<'de: 'a, 'a> de::DeserializeSeed<'de> for SeriesSeed<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for SeriesSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a matrix series {metric, values}")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let mut labels = SeriesLabels::new();
        let mut points = Points::new();
        // Not `Cow<str>`: serde's `Cow` always deserialises to an owned `String`, two allocations
        // per series for "metric" and "values".
        while let Some(key) = map.next_key::<BorrowedStr>()? {
            match key.0.as_ref() {
                "metric" => labels = map.next_value::<Labels<'a>>()?.0,
                "values" => points = map.next_value::<PointList>()?.0,
                "value" => points = smallvec![map.next_value::<Point>()?.0],
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        (self.each)(labels, points);
        Ok(())
    }
}

struct Labels<'a>(SeriesLabels<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Labels<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a label map")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut labels = SeriesLabels::new();
                while let Some((k, v)) = map.next_entry::<BorrowedStr, BorrowedStr>()? {
                    labels.push((k.0, v.0));
                }
                Ok(Labels(labels))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A string borrowed from the body when it has no escapes.
struct BorrowedStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = BorrowedStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

struct Point((i64, f64));

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (t, v) = <(f64, BorrowedStr)>::deserialize(d)?;
        let value = parse_value(&v.0).map_err(de::Error::custom)?;
        Ok(Point(((t * 1000.0).round() as i64, value)))
    }
}

struct PointList(Points);

impl<'de> Deserialize<'de> for PointList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PointList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of [time, \"value\"] pairs")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let mut points = Points::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some((t, v)) = seq.next_element::<(f64, BorrowedStr)>()? {
                    let value = parse_value(&v.0).map_err(de::Error::custom)?;
                    points.push(((t * 1000.0).round() as i64, value));
                }
                Ok(PointList(points))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Parses a sample value as Prometheus formats it (`"1.5"`, `"NaN"`, `"+Inf"`, `"-Inf"`).
pub fn parse_value(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .map_err(|_| format!("sample value {text:?} is not a number"))
}

/// Which implementation of the query API is behind the URL: they differ in when fresh samples
/// become visible and in the request parameters that make them answer completely or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Engine {
    /// Prometheus (also a Prometheus-compatible agent-less server).
    #[default]
    Prometheus,
    /// Thanos Query (partial responses turned off per request).
    Thanos,
    /// Grafana Mimir (or Cortex) query frontend.
    Mimir,
    /// VictoriaMetrics single-node or vmselect (`-search.latencyOffset` hides the newest 30 s by
    /// default; its rollup cache is bypassed so backfilled data is seen).
    #[value(name = "victoriametrics")]
    VictoriaMetrics,
}

impl Engine {
    /// Default `--delay`: how long after a tick its data are queryable.
    pub fn default_delay(self) -> Duration {
        match self {
            Engine::Prometheus => Duration::from_secs(2),
            // Sidecar/receive paths and the frontend's result cache add a little.
            Engine::Thanos | Engine::Mimir => Duration::from_secs(5),
            // -search.latencyOffset defaults to 30s.
            Engine::VictoriaMetrics => Duration::from_secs(32),
        }
    }

    /// Extra request parameters that make the engine answer completely or fail.
    fn parameters(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Engine::Prometheus | Engine::Mimir => &[],
            Engine::Thanos => &[("partial_response", "false")],
            Engine::VictoriaMetrics => &[("nocache", "1"), ("deny_partial_response", "1")],
        }
    }
}

/// A Prometheus query API.
#[derive(Debug, Clone)]
pub struct Prometheus {
    endpoint: Endpoint,
    engine: Engine,
    server_timeout: Option<Duration>,
}

/// A raw answer body and how long the request took.
#[derive(Debug)]
pub struct Answer {
    /// The JSON body.
    pub body: Vec<u8>,
    /// Request wall time.
    pub elapsed: Duration,
}

impl Prometheus {
    /// The API under `endpoint.url` (the server root, e.g. `http://prometheus:9090`).
    pub fn new(endpoint: Endpoint) -> Prometheus {
        Prometheus::of_engine(endpoint, Engine::Prometheus)
    }

    /// The API under `endpoint.url`, served by `engine`.
    pub fn of_engine(endpoint: Endpoint, engine: Engine) -> Prometheus {
        Prometheus {
            endpoint,
            engine,
            server_timeout: None,
        }
    }

    /// Also asks the engine to give up on a query after `timeout` (the `timeout` parameter), so it
    /// does not go on working for a client that stopped waiting.
    pub fn with_server_timeout(mut self, timeout: Duration) -> Prometheus {
        self.server_timeout = Some(timeout);
        self
    }

    /// `query_range` from `start` to `end` (ms, inclusive) every `step`. Returns the raw body, to
    /// be decoded with [`decode_matrix`] (which borrows from it).
    pub async fn query_range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step: Duration,
    ) -> Result<Answer, QueryError> {
        let form = [
            ("query", query.to_string()),
            ("start", format_seconds(start_ms)),
            ("end", format_seconds(end_ms)),
            ("step", format!("{}", step.as_secs_f64())),
        ];
        self.post("query_range", &form).await
    }

    /// Instant `query` at `time_ms`. Returns the raw body, to be decoded with [`decode_matrix`].
    pub async fn query(&self, query: &str, time_ms: i64) -> Result<Answer, QueryError> {
        let form = [
            ("query", query.to_string()),
            ("time", format_seconds(time_ms)),
        ];
        self.post("query", &form).await
    }

    async fn post(&self, api: &str, form: &[(&str, String)]) -> Result<Answer, QueryError> {
        let started = Instant::now();
        let mut form: Vec<(&str, String)> = form.to_vec();
        form.extend(
            self.engine
                .parameters()
                .iter()
                .map(|(k, v)| (*k, v.to_string())),
        );
        if let Some(timeout) = self.server_timeout {
            // The engine stops working on a query we no longer wait for.
            form.push(("timeout", format!("{}ms", timeout.as_millis())));
        }
        // POST: the queries are long and GET URLs have length limits in proxies.
        let request = self
            .endpoint
            .client
            .post(format!("{}/api/v1/{api}", self.endpoint.url))
            .form(&form);
        let transport = |e: reqwest::Error| {
            let text = format!("{}: {e}", self.endpoint.url);
            if e.is_timeout() {
                QueryFailure::Timeout(text)
            } else {
                QueryFailure::Network(text)
            }
        };
        let response = self
            .endpoint
            .authorise(request)
            .map_err(|source| QueryError::Auth {
                url: self.endpoint.url.clone(),
                source,
            })?
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            // Prometheus answers 400/422/503 with a JSON error that names the problem.
            let detail = match decode_matrix(&body) {
                Err(e) if body.starts_with(b"{") => greenpipe_common::error_chain(&e),
                _ => String::from_utf8_lossy(&body).chars().take(300).collect(),
            };
            let timeout = body.windows(16).any(|w| w == b"\"errorType\":\"tim");
            return Err(if timeout {
                QueryFailure::Timeout(detail)
            } else {
                QueryFailure::Status {
                    status: status.as_u16(),
                    detail,
                }
            }
            .into());
        }
        Ok(Answer {
            body: body.to_vec(),
            elapsed: started.elapsed(),
        })
    }
}

/// Milliseconds as the seconds string the API expects (`1700000000.5`).
pub fn format_seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_matrix_with_special_values_and_escapes() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"node":"a","feature":"cpu\"x"},"values":[[1700000000,"1.5"],[1700000001.25,"NaN"]]},
            {"metric":{},"values":[[1700000002,"+Inf"],[1700000003,"-Inf"]]}]}}"#;
        let m = decode_matrix(body).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].label("node"), "a");
        assert_eq!(m[0].label("feature"), "cpu\"x");
        assert_eq!(m[0].label("absent"), "");
        assert_eq!(m[0].points[0], (1_700_000_000_000, 1.5));
        assert_eq!(m[0].points[1].0, 1_700_000_001_250);
        assert!(m[0].points[1].1.is_nan());
        assert_eq!(m[1].points[0].1, f64::INFINITY);
        assert_eq!(m[1].points[1].1, f64::NEG_INFINITY);
    }

    #[test]
    fn errors_name_the_problem() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let err = decode_matrix(body).unwrap_err().to_string();
        assert!(
            err.contains("bad_data") && err.contains("parse error"),
            "{err}"
        );
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1, "2"]}}"#;
        assert!(decode_matrix(scalar).is_err());
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[2.5,"7"]}]}}"#;
        assert_eq!(decode_matrix(vector).unwrap()[0].points[..], [(2500, 7.0)]);
    }

    #[test]
    fn warnings_are_kept_and_partial_answers_refused() {
        let warned = br#"{"status":"success","warnings":["store 10.0.0.3 unreachable"],
            "data":{"resultType":"matrix","result":[]}}"#;
        assert_eq!(
            decode_answer(warned).unwrap().warnings,
            ["store 10.0.0.3 unreachable"]
        );
        let partial =
            br#"{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[]}}"#;
        let e = decode_answer(partial).unwrap_err();
        assert_eq!(QueryFailure::of(&e).unwrap().outcome(), "partial");
        let too_big = QueryFailure::Status {
            status: 422,
            detail: "query processing would load too many samples".into(),
        };
        assert!(too_big.is_too_big() && too_big.outcome() == "http_422");
        let unavailable = QueryFailure::Status {
            status: 503,
            detail: String::new(),
        };
        assert!(!unavailable.is_too_big());
    }

    /// Every series `decode_each_fast` hands over, in order, and the warnings (or the error).
    fn fast(body: &[u8]) -> (Vec<RangeSeries<'_>>, Result<Vec<String>, String>) {
        let mut got = Vec::new();
        let result = decode_each_fast(body, &mut |labels, points| {
            got.push(RangeSeries {
                labels: labels.into_vec(),
                points,
            })
        });
        (got, result.map_err(|e| e.to_string()))
    }

    #[test]
    fn the_fast_reader_decodes_as_serde_does() {
        let bodies: [&[u8]; 10] = [
            // Prometheus' own shape.
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"node":"a","container_id":"c1","pod_uid":"p","feature":"processes"},"values":[[1790000000.000,"3"],[1790000001.5,"NaN"],[1790000002.25,"+Inf"],[1790000003,"-1e-7"]]},{"metric":{},"values":[]}]}}"#,
            // Whitespace, keys in another order, warnings, a vector.
            b"{ \"data\" : {\"result\" : [ {\"value\" : [ 1700000000.125 , \"0.5\" ] ,\n\"metric\":{\"node\" :\"b\"} } ] , \"resultType\":\"vector\" } ,\r\n\t\"warnings\":[\"slow store\"],\"status\":\"success\",\"isPartial\":false }  ",
            // Escapes and non-ASCII labels, unknown fields: serde reads them.
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"node":"a\"b","pod_uid":"\u00e9t\u00e9","x":"\u00e9"},"values":[[1.5,"1"]]}]},"infos":["i"]}"#,
            // Timestamps the fast reader leaves to serde.
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"n":"1"},"values":[[1790000000.0005,"1"],[1.79e9,"2"],[-0.001,"3"],[123456789012.5,"4"]]}]}}"#,
            br#"{"status":"success","isPartial":true,"warnings":["store down"],"data":{"resultType":"matrix","result":[]}}"#,
            br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
            br#"{"status":"success","data":{"resultType":"scalar","result":[]}}"#,
            br#"{"status":"success","data":null}"#,
            // Invalid JSON: a leading zero, a cut body.
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[01,"1"]]}]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}"#,
        ];
        for body in bodies {
            let text = String::from_utf8_lossy(body);
            let serde = decode_answer(body).map_err(|e| e.to_string());
            let (series, result) = fast(body);
            match serde {
                Ok(d) => {
                    assert_eq!(result.as_ref(), Ok(&d.warnings), "{text}");
                    // A body the fast reader gave up on part-way is read again from the start.
                    let again = &series[series.len() - d.series.len()..];
                    assert_eq!(format!("{again:?}"), format!("{:?}", d.series), "{text}");
                }
                Err(e) => assert_eq!(result, Err(e), "{text}"),
            }
        }
        // The fast reader read the common shape itself: each series once.
        assert_eq!(fast(bodies[0]).0.len(), 2);
        assert_eq!(fast(bodies[1]).0.len(), 1);
    }

    #[test]
    fn the_fast_reader_rounds_timestamps_as_serde_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let seconds = state >> 28 & ((1 << 36) - 1);
            let millis = state % 1000;
            let t = match i % 4 {
                0 => format!("{seconds}.{millis:03}"),
                1 => format!("{seconds}.{}", millis / 10),
                2 => format!("{seconds}.{}", millis / 100),
                _ => format!("{seconds}"),
            };
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[[{t},"1"]]}}]}}}}"#
            );
            let serde = decode_matrix(body.as_bytes()).unwrap();
            assert_eq!(fast(body.as_bytes()).0, serde, "{t}");
        }
    }

    #[test]
    fn seconds_format() {
        assert_eq!(format_seconds(1_700_000_000_500), "1700000000.500");
        assert_eq!(format_seconds(1_000), "1.000");
    }
}
