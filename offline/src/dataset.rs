//! `dataset`: range-queries one node's exporter metrics and meter power from Prometheus, aligns
//! them on the query step and writes one trace CSV.
//!
//! The feature expressions are the ones the online estimator evaluates each tick (same metrics,
//! same `rate` window semantics, container hardware counters summed over containers with
//! `max by` across sources), so a model trained on these traces sees at serving time the
//! quantities it was trained on.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::names::{label, meter};
use greenpipe_common::trace::{write_trace, TraceRow};
use greenpipe_query::promql::{decode_matrix, DecodeError};

/// Why [`extract`] failed: the URL or the query, and why.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The request failed.
    #[error("querying {url}")]
    Request {
        /// The query API's URL.
        url: String,
        /// reqwest's error.
        source: reqwest::Error,
    },
    /// The answer's body could not be read.
    #[error("reading the answer of {url}")]
    Body {
        /// The query API's URL.
        url: String,
        /// reqwest's error.
        source: reqwest::Error,
    },
    /// Prometheus answered with an error status.
    #[error("Prometheus refused {promql:?}: {error} ({status})")]
    Refused {
        /// The query.
        promql: String,
        /// Prometheus' `error`.
        error: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
    },
    /// The answer is not the one-series matrix expected.
    #[error("answer to {promql:?}")]
    Answer {
        /// The query.
        promql: String,
        /// What is wrong with it.
        source: MatrixError,
    },
}

/// Why a range-query answer is not one series of numbers.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// Not a successful matrix answer (the engine's error, or not the API's JSON).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// More than one series.
    #[error("{count} series where the node sum should give one")]
    ManySeries {
        /// How many.
        count: usize,
    },
}

/// `dataset` arguments.
#[derive(Debug, Clone, Args)]
pub struct DatasetArgs {
    /// Prometheus base URL, e.g. http://127.0.0.1:9090.
    #[arg(long)]
    pub prometheus_url: String,
    /// Node name (the `node` label).
    #[arg(long)]
    pub node: String,
    /// Start: RFC 3339 or unix seconds.
    #[arg(long)]
    pub from: String,
    /// End: RFC 3339 or unix seconds.
    #[arg(long)]
    pub to: String,
    /// Query step (Prometheus duration or seconds).
    #[arg(long, default_value = "1s")]
    pub step: String,
    /// Window of `rate()`; must hold at least two scrapes.
    #[arg(long, default_value = "5s")]
    pub rate_window: String,
    /// Workload name written in every row and used as the file name.
    #[arg(long)]
    pub workload: String,
    /// Output directory; the trace is written to DIR/<workload>.csv.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace an existing trace file.
    #[arg(long)]
    pub force: bool,
}

/// The node-level PromQL of a feature for `node`, with `rate` window `w`: the same expression
/// `serve` evaluates, so traces and live inputs cannot drift apart.
pub fn feature_query(f: Feature, node: &str, w: &str) -> String {
    let matcher = format!("{}=\"{}\"", label::NODE, escape(node));
    greenpipe_common::feature_queries::node_expr_matching(f, w, &matcher)
}

/// The PromQL of the node's measured power, read as `serve` reads it (its whole-node meters;
/// the largest where there are several).
pub fn power_query(node: &str, w: &str) -> String {
    let matcher = format!("{}=\"{}\"", label::NODE, escape(node));
    greenpipe_common::feature_queries::node_meter_expr(w, &matcher)
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Why `dataset` wrote no trace.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The trace exists and `--force` was not given.
    #[error("{} exists; pass --force to replace it", .0.display())]
    Exists(PathBuf),
    /// The Tokio runtime could not start.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    /// A query failed.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// The rows cannot be written as a trace.
    #[error(transparent)]
    Trace(#[from] greenpipe_common::trace::TraceError),
    /// Creating the directory or writing the file failed.
    #[error("{verb} {}", path.display())]
    Io {
        /// `creating` or `writing`.
        verb: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Runs `dataset`.
pub fn run(args: DatasetArgs) -> Result<(), DatasetError> {
    let path = args.out.join(format!("{}.csv", args.workload));
    if path.exists() && !args.force {
        return Err(DatasetError::Exists(path));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(DatasetError::Runtime)?;
    let rows = runtime.block_on(extract(&args))?;
    let text = write_trace(&rows)?;
    let io = |verb, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| DatasetError::Io { verb, path, source }
    };
    std::fs::create_dir_all(&args.out).map_err(io("creating", &args.out))?;
    std::fs::write(&path, text).map_err(io("writing", &path))?;
    let metered = rows.iter().filter(|r| r.power_watts.is_some()).count();
    eprintln!(
        "wrote {} ({} rows, {metered} with power)",
        path.display(),
        rows.len()
    );
    Ok(())
}

/// Queries every series and aligns them into trace rows (one per step with any value).
pub async fn extract(args: &DatasetArgs) -> Result<Vec<TraceRow>, ExtractError> {
    let client = reqwest::Client::new();
    let url = format!(
        "{}/api/v1/query_range",
        args.prometheus_url.trim_end_matches('/')
    );
    let query = |promql: String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let response = client
                .get(&url)
                .query(&[
                    ("query", promql.as_str()),
                    ("start", &args.from),
                    ("end", &args.to),
                    ("step", &args.step),
                ])
                .send()
                .await
                .map_err(|source| ExtractError::Request {
                    url: url.clone(),
                    source,
                })?;
            let status = response.status();
            let body = response
                .bytes()
                .await
                .map_err(|source| ExtractError::Body {
                    url: url.clone(),
                    source,
                })?;
            if !status.is_success() {
                // Prometheus answers 400/422/503 with a JSON error that names the problem.
                let error = match decode_matrix(&body) {
                    Err(e) => greenpipe_common::error_chain(&e),
                    Ok(_) => String::from_utf8_lossy(&body).chars().take(300).collect(),
                };
                return Err(ExtractError::Refused {
                    error,
                    promql,
                    status,
                });
            }
            parse_matrix(&body).map_err(|source| ExtractError::Answer { promql, source })
        }
    };
    let w = &args.rate_window;
    let power = query(power_query(&args.node, w)).await?;
    if power.is_empty() {
        eprintln!(
            "warning: no {} for node {} in the window: rows will have no power",
            meter::POWER_WATTS,
            args.node
        );
    }
    let mut by_time: BTreeMap<i64, (Option<f64>, FeatureValues)> = BTreeMap::new();
    for (t, v) in power {
        by_time.entry(t).or_default().0 = Some(v);
    }
    for f in Feature::ALL {
        let series = query(feature_query(f, &args.node, w)).await?;
        if series.is_empty() {
            eprintln!("note: {} has no data: its column stays empty", f.column());
        }
        for (t, v) in series {
            by_time.entry(t).or_default().1.set(f, Some(v));
        }
    }
    Ok(by_time
        .into_iter()
        .map(|(t, (power_watts, features))| TraceRow {
            timestamp: t as f64 / 1000.0,
            node: args.node.clone(),
            workload: args.workload.clone(),
            power_watts,
            features,
        })
        .collect())
}

/// `(timestamp ms, value)` of the single series of a range-query answer (none = no data), NaN
/// and infinite values left out.
pub fn parse_matrix(body: &[u8]) -> Result<Vec<(i64, f64)>, MatrixError> {
    let series = decode_matrix(body)?;
    if series.len() > 1 {
        return Err(MatrixError::ManySeries {
            count: series.len(),
        });
    }
    Ok(series
        .first()
        .map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|(_, v)| v.is_finite())
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_answer_is_parsed_and_nan_dropped() {
        let body = br#"{"status": "success", "data": {"resultType": "matrix",
            "result": [{"metric": {"node": "a"}, "values": [[1.5, "2"], [2.5, "NaN"], [3.5, "4.25"]]}]}}"#;
        assert_eq!(parse_matrix(body).unwrap(), vec![(1500, 2.0), (3500, 4.25)]);
        let empty = br#"{"status": "success", "data": {"resultType": "matrix", "result": []}}"#;
        assert!(parse_matrix(empty).unwrap().is_empty());
        let err = br#"{"status": "error", "errorType": "bad_data", "error": "bad"}"#;
        assert!(parse_matrix(err).is_err());
        let two = br#"{"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"node": "a"}, "values": [[1, "1"]]}, {"metric": {"node": "b"}, "values": [[1, "1"]]}]}}"#;
        assert!(matches!(
            parse_matrix(two),
            Err(MatrixError::ManySeries { count: 2 })
        ));
    }

    #[test]
    fn queries_name_the_node_and_the_contract_metrics() {
        let q = feature_query(Feature::CpuSecondsPerSecond, "pi-1", "5s");
        assert!(
            q.contains("greenpipe_node_cpu_seconds_total{node=\"pi-1\",mode!~"),
            "{q}"
        );
        let q = feature_query(Feature::CpuCyclesPerSecond, "a\"b", "5s");
        assert!(q.contains("node=\"a\\\"b\""), "{q}");
        assert_eq!(
            power_query("pi-1", "5s"),
            "max by (node) (last_over_time(greenpipe_meter_power_watts{node=\"pi-1\",kind!~\"nvml\"}[5s]))"
        );
    }
}
