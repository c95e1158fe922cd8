//! The read side of the tick loop: the feature queries over a span of ticks, decoded and
//! assembled, each query's outcome counted.

use std::time::Duration;

use greenpipe_common::contract::outcome;
use greenpipe_common::model::ModelFile;
use greenpipe_common::names::label;
use tracing::warn;

use super::{queries_for, MarkerError, Pipeline};
use crate::promql::{
    decode_answer, decode_matrix, Answer, DecodeError, Prometheus, QueryError, QueryFailure,
};
use crate::readout::{assemble, node_list_query, node_matcher, Assembly, QuerySet, Tick};

/// Which series of the source one read selects.
enum Scope {
    /// The precomputed queries: the whole fleet, or this shard through its label.
    Fixed,
    /// These nodes only (may be none).
    Nodes(Vec<String>),
}

/// Why a read, the resume or the progress lookup failed: the query (its `queries` counter name)
/// and why.
#[derive(Debug, thiserror::Error)]
#[error("query {query}")]
pub struct ReadError {
    /// `node_features`, `progress`, …
    pub query: String,
    /// Why.
    #[source]
    pub cause: ReadFailure,
}

/// The cause of a [`ReadError`].
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    /// The request failed.
    #[error(transparent)]
    Request(#[from] QueryError),
    /// The answer did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The progress marker cannot be a tick.
    #[error(transparent)]
    Marker(#[from] MarkerError),
}

impl ReadFailure {
    /// The failure the tick loop acts on (fewer ticks per query) and counts by kind.
    pub fn failure(&self) -> Option<&QueryFailure> {
        match self {
            ReadFailure::Request(QueryError::Failure(f))
            | ReadFailure::Decode(DecodeError::Failure(f)) => Some(f),
            _ => None,
        }
    }
}

impl Pipeline {
    /// Which series this shard reads for ticks `first..=last`.
    async fn scope(&self, first: i64, last: i64) -> Result<Scope, ReadError> {
        if !self.config.shard.is_partial() || self.config.shard_label.is_some() {
            return Ok(Scope::Fixed);
        }
        // One series per node: cheap next to the feature queries, and each of those then
        // touches only this shard's series.
        let span = Duration::from_millis((last - first) as u64) + self.config.rate_window;
        let body = self.account(
            "node_list",
            self.source.query(&node_list_query(span), last).await,
        )?;
        let mut nodes: Vec<String> = self
            .outcome("node_list", decode_matrix(&body))?
            .iter()
            .map(|s| s.label(label::NODE))
            .filter(|n| !n.is_empty() && self.config.shard.owns(n))
            .map(str::to_string)
            .collect();
        nodes.sort_unstable();
        Ok(Scope::Nodes(nodes))
    }

    /// Runs the tick queries over `first..=last` and assembles them.
    /// `q` reads every input of the models of `sets` (with the shard label's matcher, if any);
    /// a shard selecting its nodes by name builds its own from `sets`.
    pub async fn read(
        &self,
        sets: &[&ModelFile],
        q: &QuerySet,
        first: i64,
        last: i64,
    ) -> Result<Vec<Tick>, ReadError> {
        let step = self.config.interval;
        let count = ((last - first) / step.as_millis() as i64 + 1) as usize;
        let scoped;
        let q = match self.scope(first, last).await? {
            Scope::Fixed => q,
            Scope::Nodes(nodes) if nodes.is_empty() => {
                return Ok(assemble(
                    first,
                    step.as_millis() as i64,
                    count,
                    &[],
                    &[],
                    &[],
                    self.config.shard,
                ))
            }
            Scope::Nodes(nodes) => {
                let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
                scoped = queries_for(sets, self.config.rate_window, &node_matcher(&names));
                &scoped
            }
        };
        let labels = async {
            match &q.node_labels {
                Some(query) => self
                    .query_source("node_labels", query, first, last)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (node, container, labels) = tokio::try_join!(
            self.query_source("node_features", &q.node, first, last),
            self.query_source("container_features", &q.container, first, last),
            labels,
        )?;
        let node = self.decode("node_features", &node)?;
        let mut assembly = Assembly::new(first, step.as_millis() as i64, count, self.config.shard);
        for s in &node {
            assembly.node_series(s);
        }
        // The fleet's largest answer is decoded straight into the assembly, series by series.
        let warnings = self.outcome("container_features", assembly.containers_from(&container))?;
        self.warned("container_features", &warnings);
        let labels = match &labels {
            Some(body) => self.decode("node_labels", body)?,
            None => Vec::new(),
        };
        assembly.node_labels(&labels);
        Ok(assembly.ticks())
    }

    /// Decodes an answer, counting (and logging) the warnings the engine attached.
    fn decode<'b>(
        &self,
        name: &str,
        body: &'b [u8],
    ) -> Result<Vec<crate::promql::RangeSeries<'b>>, ReadError> {
        let decoded = self.outcome(name, decode_answer(body))?;
        self.warned(name, &decoded.warnings);
        Ok(decoded.series)
    }

    /// Counts (and logs) the warnings the engine attached to the answer of `name`.
    fn warned(&self, name: &str, warnings: &[String]) {
        if !warnings.is_empty() {
            warn!(query = name, ?warnings, "the engine attached warnings");
            self.telemetry
                .query_warnings
                .with_label_values(&[name])
                .inc_by(warnings.len() as u64);
        }
    }

    async fn query_source(
        &self,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<u8>, ReadError> {
        self.query(&self.source, name, query, first, last).await
    }

    async fn query(
        &self,
        api: &Prometheus,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<u8>, ReadError> {
        let result = api
            .query_range(query, first, last, self.config.interval)
            .await;
        self.account(name, result)
    }

    /// Counts a failed request; a request that got an answer is counted by [`Self::outcome`] once
    /// its body has been decoded, so an answer that does not decode is never an `ok`.
    pub(super) fn account(
        &self,
        name: &str,
        result: Result<Answer, QueryError>,
    ) -> Result<Vec<u8>, ReadError> {
        let answer = result.map_err(|e| self.failed(name, e.into()))?;
        self.telemetry
            .query_duration
            .with_label_values(&[name])
            .observe(answer.elapsed.as_secs_f64());
        Ok(answer.body)
    }

    /// Counts the outcome of a query whose answer was decoded (and checked): `ok`, the engine's
    /// failure kind, or `error` for a body that does not decode or holds impossible values.
    pub(super) fn outcome<T, E: Into<ReadFailure>>(
        &self,
        name: &str,
        decoded: Result<T, E>,
    ) -> Result<T, ReadError> {
        match decoded {
            Ok(v) => {
                self.telemetry
                    .queries
                    .with_label_values(&[name, outcome::OK])
                    .inc();
                Ok(v)
            }
            Err(e) => Err(self.failed(name, e.into())),
        }
    }

    /// Counts a failure of query `name` by kind and names the query in the error.
    fn failed(&self, name: &str, cause: ReadFailure) -> ReadError {
        let outcome = cause
            .failure()
            .map_or_else(|| outcome::ERROR.to_string(), QueryFailure::outcome);
        self.telemetry
            .queries
            .with_label_values(&[name, &outcome])
            .inc();
        ReadError {
            query: name.to_string(),
            cause,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_error_names_the_query_and_keeps_the_failure_kind() {
        let partial =
            br#"{"status":"success","isPartial":true,"warnings":["store b down"],"data":{"resultType":"matrix","result":[]}}"#;
        let e = ReadError {
            query: "node_features".into(),
            cause: decode_answer(partial).unwrap_err().into(),
        };
        assert_eq!(
            e.cause.failure().map(QueryFailure::outcome).as_deref(),
            Some("partial")
        );
        assert_eq!(
            crate::error_chain(&e),
            "query node_features: partial PromQL answer refused: store b down"
        );
        let too_big = ReadError {
            query: "container_features".into(),
            cause: QueryError::from(QueryFailure::Status {
                status: 422,
                detail: "too many samples".into(),
            })
            .into(),
        };
        assert!(too_big
            .cause
            .failure()
            .is_some_and(QueryFailure::is_too_big));
        let json = ReadError {
            query: "progress".into(),
            cause: decode_matrix(b"{").unwrap_err().into(),
        };
        assert!(json.cause.failure().is_none());
        let text = crate::error_chain(&json);
        assert!(
            text.starts_with("query progress: decoding the PromQL answer: EOF"),
            "{text}"
        );
    }
}
