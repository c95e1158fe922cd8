//! What the estimator reads each tick: a fixed set of PromQL queries (one for every node's
//! features, one for every container's, one for node labels when model selectors use labels),
//! whatever the fleet size and whatever the number of features, and their assembly into
//! per-tick, per-node [`FeatureValues`].
//!
//! Each feature expression is tagged with a `feature` label by `label_replace` and the
//! expressions are joined with `or`, so one request carries every feature.
//!
//! Staleness: counters go through `rate(x[window])`, which needs two samples inside the window and
//! returns nothing for a series that stopped; gauges go through `last_over_time(x[window])` rather
//! than a bare selector, whose 5-minute lookback would keep a vanished node's last value alive.
//! Container series may come from several sources (`cgroup`, `bpf`, `perf`) measuring the same
//! quantity: `max by` over the source keeps one of them instead of adding them up.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::names::{container as c, label, meter, node as n};

pub use greenpipe_common::feature_queries::{
    container_expr, container_expr_matching, node_expr, node_expr_matching,
};
use greenpipe_common::feature_queries::{selector, CONTAINER_KEYS};

use crate::promql::RangeSeries;
use crate::shard::Shard;

/// Value of the `feature` label carrying a container's process count (not a model feature).
pub const PROCESSES: &str = "processes";
/// Value of the `feature` label carrying a node's power-meter reading (not a model feature).
pub const METER_WATTS: &str = "meter_watts";
/// Value of the `feature` label carrying a node's online CPUs, which profiles made from
/// per-CPU figures scale with (not a model feature).
pub const NODE_CPUS: &str = "node_cpus";

/// Usage of one container (or of the `system` entry) at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    /// Container id, or [`greenpipe_common::names::SYSTEM_CONTAINER`]. Shared, not copied, by
    /// every tick of a read and every share attributed from it: at fleet scale (100,000
    /// containers) copying the id and UID per tick and per share was a large part of a tick.
    pub container_id: Arc<str>,
    /// Pod UID, empty when unknown.
    pub pod_uid: Arc<str>,
    /// Raw feature values.
    pub features: FeatureValues,
    /// Processes in the container.
    pub processes: Option<f64>,
}

/// Usage of one node and its containers at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    /// Node name.
    pub node: String,
    /// Node labels used by model selectors.
    pub labels: BTreeMap<String, String>,
    /// Raw node-level feature values.
    pub features: FeatureValues,
    /// The node's power-meter reading, where it has one.
    pub meter_watts: Option<f64>,
    /// The node's online CPUs (`greenpipe_node_cpus`), where the exporter reported them.
    pub cpus: Option<f64>,
    /// Containers seen on the node, in id order.
    pub containers: Vec<ContainerUsage>,
}

/// Everything read for one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Evaluation time, ms.
    pub timestamp_ms: i64,
    /// Nodes of this shard that had any data, in name order.
    pub nodes: Vec<NodeUsage>,
}

/// The PromQL text of one tick's requests.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySet {
    /// Node features.
    pub node: String,
    /// Container features and process counts.
    pub container: String,
    /// Node labels (only when a model selector matches on labels).
    pub node_labels: Option<String>,
}

fn tagged(expr: &str, feature: &str) -> String {
    format!(
        "label_replace({expr}, \"{}\", \"{feature}\", \"\", \"\")",
        label::FEATURE
    )
}

/// The cheap query that lists the nodes with data over the `span` that ends at its evaluation
/// time: one series per node (its idle CPU time), whatever the number of containers.
pub fn node_list_query(span: Duration) -> String {
    format!(
        "group by (node) (last_over_time({}{{mode=\"idle\"}}[{}ms]))",
        n::CPU_SECONDS_TOTAL,
        span.as_millis().max(1)
    )
}

/// A matcher selecting exactly `nodes`: `node=~"a|b\\.c"` (regex metacharacters escaped, so
/// names are matched literally; Prometheus turns such alternations into set lookups).
pub fn node_matcher(nodes: &[&str]) -> String {
    let mut out = String::from("node=~\"");
    for (i, node) in nodes.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for ch in node.chars() {
            if ch == '\\' {
                out.push_str("\\\\\\");
            } else if ".+*?()|[]{}^$".contains(ch) {
                // A regex escape, itself escaped for the PromQL string.
                out.push_str("\\\\");
            } else if ch == '"' {
                out.push('\\');
            }
            out.push(ch);
        }
    }
    out.push('"');
    out
}

impl QuerySet {
    /// Queries for `node_features` (node level) and `container_features` (container level, plus
    /// process counts), with counters' rates over `window`; `label_keys` are the node labels
    /// model selectors match on. `matcher` (empty: none) is added to every selector: it is how a
    /// shard reads only its own nodes.
    pub fn new(
        node_features: &[Feature],
        container_features: &[Feature],
        window: Duration,
        label_keys: &[String],
        matcher: &str,
    ) -> QuerySet {
        let w = format!("{}ms", window.as_millis());
        let m = matcher;
        // A node with several meters (e.g. a USB meter and a smart plug) is measured by each:
        // `max` keeps one reading instead of adding them up.
        let meter = tagged(
            &format!(
                "max by (node) (last_over_time({}[{w}]))",
                selector(meter::POWER_WATTS, &[m])
            ),
            METER_WATTS,
        );
        let cpus = tagged(
            &format!(
                "max by (node) (last_over_time({}[{w}]))",
                selector(n::CPUS, &[m])
            ),
            NODE_CPUS,
        );
        let node = node_features
            .iter()
            .map(|f| tagged(&node_expr_matching(*f, &w, m), f.column()))
            .chain([meter, cpus])
            .collect::<Vec<_>>()
            .join(" or ");
        let container = container_features
            .iter()
            .filter_map(|f| Some(tagged(&container_expr_matching(*f, &w, m)?, f.column())))
            .chain(std::iter::once(tagged(
                &format!(
                    "max by ({CONTAINER_KEYS}) (last_over_time({}[{w}]))",
                    selector(c::PROCESSES, &[m])
                ),
                PROCESSES,
            )))
            .collect::<Vec<_>>()
            .join(" or ");
        let node_labels = (!label_keys.is_empty()).then(|| {
            format!(
                "max by (node, {}) (last_over_time({}[{w}]))",
                label_keys.join(", "),
                selector(n::CPUS, &[m])
            )
        });
        QuerySet {
            node,
            container,
            node_labels,
        }
    }
}

/// Maps hashed once or more per answer series (hundreds of thousands per tick): SipHash of a
/// 64-character container id was a large part of assembling a tick. Keys come from our own
/// Prometheus, and foldhash's random seed still spreads them per process.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A container's features and process count per tick slot (`None`: no data at that tick).
type ContainerSlots = Vec<Option<(FeatureValues, Option<f64>)>>;

#[derive(Default)]
struct NodeAcc<'a> {
    labels: BTreeMap<String, String>,
    features: Vec<Option<FeatureValues>>,
    meter: Vec<Option<f64>>,
    cpus: Vec<Option<f64>>,
    // Keys borrow from the answer body: no allocation per series.
    containers: FastMap<(&'a str, &'a str), ContainerSlots>,
}

/// A container of a read: id and pod UID (shared by its ticks) and its slots.
type SharedContainer<'s> = (Arc<str>, Arc<str>, &'s ContainerSlots);

/// A node's containers in (id, pod UID) order, the order [`NodeUsage::containers`] promises.
fn sorted_containers<'s>(acc: &'s NodeAcc<'_>) -> Vec<SharedContainer<'s>> {
    let mut found: Vec<_> = acc.containers.iter().collect();
    found.sort_unstable_by_key(|(key, _)| **key);
    found
        .into_iter()
        .map(|((id, pod), slots)| (Arc::from(*id), Arc::from(*pod), slots))
        .collect()
}

/// Turns the answers of one range query set into per-tick data, keeping only this shard's nodes.
/// `ticks` are the evaluation times (ms, ascending, evenly spaced by `step_ms`).
pub fn assemble<'a>(
    start_ms: i64,
    step_ms: i64,
    tick_count: usize,
    node: &'a [RangeSeries<'a>],
    container: &'a [RangeSeries<'a>],
    node_labels: &[RangeSeries<'_>],
    shard: Shard,
) -> Vec<Tick> {
    let slot = |t: i64| -> Option<usize> {
        let d = t - start_ms;
        (d >= 0 && d % step_ms == 0 && ((d / step_ms) as usize) < tick_count)
            .then_some((d / step_ms) as usize)
    };
    let mut nodes: FastMap<&str, NodeAcc> = FastMap::default();
    let acc = |name: &'a str| -> Option<&'a str> { shard.owns(name).then_some(name) };
    for s in node {
        let Some(name) = acc(s.label(label::NODE)) else {
            continue;
        };
        let tag = s.label(label::FEATURE);
        let entry = nodes.entry(name).or_default();
        let per_tick = match tag {
            METER_WATTS => Some(&mut entry.meter),
            NODE_CPUS => Some(&mut entry.cpus),
            _ => None,
        };
        if let Some(values) = per_tick {
            values.resize(tick_count, None);
            for &(t, v) in &s.points {
                if let Some(i) = slot(t) {
                    values[i] = Some(v);
                }
            }
            continue;
        }
        let Some(feature) = Feature::from_column(tag) else {
            continue;
        };
        entry.features.resize(tick_count, None);
        for &(t, v) in &s.points {
            if let Some(i) = slot(t) {
                entry.features[i]
                    .get_or_insert_with(FeatureValues::default)
                    .set(feature, Some(v));
            }
        }
    }
    for s in container {
        let Some(name) = acc(s.label(label::NODE)) else {
            continue;
        };
        let tag = s.label(label::FEATURE);
        let feature = Feature::from_column(tag);
        if feature.is_none() && tag != PROCESSES {
            continue;
        }
        let key = (s.label(label::CONTAINER_ID), s.label(label::POD_UID));
        let entry = nodes.entry(name).or_default();
        let slots = entry.containers.entry(key).or_default();
        slots.resize(tick_count, None);
        for &(t, v) in &s.points {
            if let Some(i) = slot(t) {
                let (values, processes) = slots[i].get_or_insert_with(Default::default);
                match feature {
                    Some(f) => values.set(f, Some(v)),
                    None => *processes = Some(v),
                }
            }
        }
    }
    for s in node_labels {
        if let Some(entry) = nodes.get_mut(s.label(label::NODE)) {
            entry.labels = s
                .labels
                .iter()
                .filter(|(k, _)| k != label::NODE)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        }
    }
    let mut names: Vec<&str> = nodes.keys().copied().collect();
    names.sort_unstable();
    // Sorted and made shareable once per read, not once per tick.
    let sorted: Vec<Vec<SharedContainer>> = names
        .iter()
        .map(|name| sorted_containers(&nodes[name]))
        .collect();
    (0..tick_count)
        .map(|i| Tick {
            timestamp_ms: start_ms + i as i64 * step_ms,
            nodes: names
                .iter()
                .zip(&sorted)
                .filter_map(|(name, sorted)| {
                    let acc = &nodes[name];
                    let node_features = acc.features.get(i).copied().flatten();
                    let containers: Vec<ContainerUsage> = sorted
                        .iter()
                        .filter_map(|(id, pod, slots)| {
                            let (features, processes) = slots.get(i).copied().flatten()?;
                            Some(ContainerUsage {
                                container_id: Arc::clone(id),
                                pod_uid: Arc::clone(pod),
                                features,
                                processes,
                            })
                        })
                        .collect();
                    if node_features.is_none() && containers.is_empty() {
                        return None;
                    }
                    Some(NodeUsage {
                        node: name.to_string(),
                        labels: acc.labels.clone(),
                        features: node_features.unwrap_or_default(),
                        meter_watts: acc.meter.get(i).copied().flatten(),
                        cpus: acc.cpus.get(i).copied().flatten(),
                        containers,
                    })
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn series<'a>(labels: &[(&'a str, &'a str)], points: &[(i64, f64)]) -> RangeSeries<'a> {
        RangeSeries {
            labels: labels
                .iter()
                .map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v)))
                .collect(),
            points: points.into(),
        }
    }

    #[test]
    fn one_query_per_level_whatever_the_feature_count() {
        let q = QuerySet::new(
            &Feature::ALL,
            &Feature::ALL,
            Duration::from_secs(5),
            &[],
            "",
        );
        // Every feature plus the meter reading and the CPU count.
        assert_eq!(q.node.matches(" or ").count(), Feature::ALL.len() + 1);
        assert!(q.node.contains("greenpipe_node_cpus"));
        // Frequency is node-level only; processes are added.
        assert_eq!(q.container.matches(" or ").count(), Feature::ALL.len() - 1);
        assert!(q
            .node
            .contains("rate(greenpipe_node_cpu_seconds_total{mode!~"));
        assert!(q.container.contains("\"processes\""));
        assert!(q.node_labels.is_none());
        let q = QuerySet::new(&[], &[], Duration::from_secs(5), &["board".into()], "");
        assert!(q.node.contains("greenpipe_meter_power_watts"));
        assert!(q.node_labels.unwrap().contains("max by (node, board)"));
    }

    #[test]
    fn a_shard_matcher_reaches_every_selector() {
        let m = node_matcher(&["pi-1", "edge.a\"b"]);
        assert_eq!(m, r#"node=~"pi-1|edge\\.a\"b""#);
        let q = QuerySet::new(
            &Feature::ALL,
            &Feature::ALL,
            Duration::from_secs(5),
            &["board".into()],
            &m,
        );
        for text in [&q.node, &q.container, q.node_labels.as_ref().unwrap()] {
            // Every metric name in the text is followed by a selector holding the matcher.
            let names = text.matches("greenpipe_").count();
            assert_eq!(text.matches(m.as_str()).count(), names, "{text}");
        }
        assert!(node_list_query(Duration::from_secs(65)).contains("[65000ms]"));
    }

    #[test]
    fn assembles_ticks_nodes_and_containers() {
        let node = vec![
            series(
                &[("node", "a"), ("feature", "cpu_seconds_per_second")],
                &[(1000, 1.0), (2000, 2.0)],
            ),
            series(
                &[("node", "b"), ("feature", "cpu_seconds_per_second")],
                &[(2000, 3.0), (2500, 9.0)],
            ),
            series(&[("node", "b"), ("feature", "unknown")], &[(2000, 3.0)]),
            series(&[("node", "a"), ("feature", "meter_watts")], &[(2000, 4.5)]),
            series(&[("node", "b"), ("feature", "node_cpus")], &[(2000, 2.0)]),
        ];
        let container = vec![
            series(
                &[
                    ("node", "a"),
                    ("container_id", "c1"),
                    ("pod_uid", "p"),
                    ("feature", "cpu_seconds_per_second"),
                ],
                &[(1000, 0.5)],
            ),
            series(
                &[
                    ("node", "a"),
                    ("container_id", "c1"),
                    ("pod_uid", "p"),
                    ("feature", "processes"),
                ],
                &[(1000, 3.0), (2000, 4.0)],
            ),
        ];
        let labels = vec![series(&[("node", "a"), ("board", "rpi4")], &[(1000, 4.0)])];
        let ticks = assemble(1000, 1000, 2, &node, &container, &labels, Shard::ALL);
        assert_eq!(ticks.len(), 2);
        assert_eq!(ticks[0].nodes.len(), 1, "b has no data at the first tick");
        let a0 = &ticks[0].nodes[0];
        assert_eq!(a0.node, "a");
        assert_eq!(a0.labels["board"], "rpi4");
        assert_eq!(a0.features.get(Feature::CpuSecondsPerSecond), Some(1.0));
        assert_eq!(
            a0.containers[0].features.get(Feature::CpuSecondsPerSecond),
            Some(0.5)
        );
        assert_eq!(a0.containers[0].processes, Some(3.0));
        let t1: Vec<&str> = ticks[1].nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(t1, ["a", "b"]);
        assert_eq!(ticks[0].nodes[0].meter_watts, None);
        assert_eq!(ticks[1].nodes[0].meter_watts, Some(4.5));
        assert_eq!(ticks[1].nodes[0].cpus, None);
        assert_eq!(ticks[1].nodes[1].cpus, Some(2.0));
        assert_eq!(
            ticks[1].nodes[0].containers[0]
                .features
                .get(Feature::CpuSecondsPerSecond),
            None
        );
        assert_eq!(
            ticks[1].nodes[1].features.get(Feature::CpuSecondsPerSecond),
            Some(3.0)
        );
    }
}
