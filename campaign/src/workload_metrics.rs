//! What the runner reads from a workload's `/metrics` (Prometheus text format): the inference and
//! operation counters and the inference latency histogram, summed over label sets, at the start
//! and at the end of a window. Their difference is the window's work and latency distribution,
//! exact to the scrape, without depending on the campaign Prometheus scraping short-lived
//! workloads.

use std::collections::BTreeMap;

/// The workload's families, declared in the contract.
pub use greenpipe_common::names::workload::{
    INFERENCES_TOTAL, INFERENCE_DURATION_SECONDS, OPERATIONS_TOTAL,
};

/// One reading of a workload's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Inferences, when the workload exports the counter.
    pub inferences: Option<f64>,
    /// Operations, when exported.
    pub operations: Option<f64>,
    /// Cumulative histogram buckets: upper bound → count (`+Inf` included).
    pub buckets: BTreeMap<OrdF64, f64>,
}

/// An f64 with a total order, for bucket bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrdF64(pub f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The value of `le="..."` in a label set.
fn le(labels: &str) -> Option<f64> {
    let at = labels.find("le=\"")? + 4;
    let rest = &labels[at..];
    let v = &rest[..rest.find('"')?];
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        _ => v.parse().ok(),
    }
}

/// Parses the families of interest; lines it does not understand are ignored (other metrics).
pub fn parse(text: &str) -> Reading {
    let mut r = Reading::default();
    let bucket = format!("{INFERENCE_DURATION_SECONDS}_bucket");
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = match line.rfind('}') {
            Some(close) => (&line[..=close], line[close + 1..].trim()),
            None => match line.split_once(' ') {
                Some((s, v)) => (s, v.trim()),
                None => continue,
            },
        };
        // A timestamp may follow the value.
        let Some(value) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
        else {
            continue;
        };
        let (name, labels) = match series.find('{') {
            Some(open) => (&series[..open], &series[open..]),
            None => (series, ""),
        };
        if name == INFERENCES_TOTAL {
            *r.inferences.get_or_insert(0.0) += value;
        } else if name == OPERATIONS_TOTAL {
            *r.operations.get_or_insert(0.0) += value;
        } else if name == bucket {
            if let Some(b) = le(labels) {
                *r.buckets.entry(OrdF64(b)).or_insert(0.0) += value;
            }
        }
    }
    r
}

/// `end - start` per counter and bucket (a counter that went backwards — a restarted process —
/// gives `None` rather than a negative count).
pub fn delta(start: &Reading, end: &Reading) -> Reading {
    let sub = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b >= a => Some(b - a),
        (None, Some(b)) => Some(b),
        _ => None,
    };
    Reading {
        inferences: sub(start.inferences, end.inferences),
        operations: sub(start.operations, end.operations),
        buckets: end
            .buckets
            .iter()
            .map(|(le, v)| {
                let before = start.buckets.get(le).copied().unwrap_or(0.0);
                (*le, (v - before).max(0.0))
            })
            .collect(),
    }
}

/// The `q` quantile of cumulative buckets, interpolated linearly inside the bucket as
/// Prometheus' `histogram_quantile` does (the lowest bucket starts at 0; a quantile in the `+Inf`
/// bucket is the highest finite bound). `None` without observations.
pub fn quantile(buckets: &BTreeMap<OrdF64, f64>, q: f64) -> Option<f64> {
    let total = buckets
        .get(&OrdF64(f64::INFINITY))
        .copied()
        .or_else(|| buckets.values().last().copied())?;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower_bound = 0.0;
    let mut lower_count = 0.0;
    for (&OrdF64(bound), &count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower_bound);
            }
            let in_bucket = count - lower_count;
            if in_bucket <= 0.0 {
                return Some(bound);
            }
            return Some(lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket);
        }
        lower_bound = bound;
        lower_count = count;
    }
    Some(lower_bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP greenpipe_workload_inferences_total Inferences.
# TYPE greenpipe_workload_inferences_total counter
greenpipe_workload_inferences_total{workload="infer",model="mobilenet_v2",precision="f32",threads="2",mode="local"} 120
greenpipe_workload_inference_duration_seconds_bucket{model="m",le="0.01"} 20
greenpipe_workload_inference_duration_seconds_bucket{model="m",le="0.02"} 100
greenpipe_workload_inference_duration_seconds_bucket{model="m",le="+Inf"} 120
greenpipe_workload_inference_duration_seconds_sum{model="m"} 2.0
greenpipe_workload_inference_duration_seconds_count{model="m"} 120
other_metric 5
"#;

    #[test]
    fn counters_and_quantiles_of_a_window() {
        let end = parse(TEXT);
        assert_eq!(end.inferences, Some(120.0));
        assert_eq!(end.operations, None);
        let start = parse(&TEXT.replace("} 120", "} 20").replace("} 100", "} 20"));
        let d = delta(&start, &end);
        assert_eq!(d.inferences, Some(100.0));
        // 100 new observations: 0 below 10 ms, 80 in (10, 20] ms, 20 above.
        let p50 = quantile(&d.buckets, 0.5).unwrap();
        assert!((p50 - (0.01 + 0.01 * 50.0 / 80.0)).abs() < 1e-12, "{p50}");
        assert_eq!(quantile(&d.buckets, 0.95), Some(0.02));
        assert_eq!(quantile(&BTreeMap::new(), 0.5), None);
    }
}
