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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::names::{container as c, label, node as n};

pub use greenpipe_common::feature_queries::{
    container_expr, container_expr_matching, node_expr, node_expr_matching,
};
use greenpipe_common::feature_queries::{selector, CONTAINER_KEYS};

use crate::promql::{decode_each_fast, DecodeError, RangeSeries, SeriesLabels};
use crate::shard::Shard;

/// Value of the `feature` label carrying a container's process count (not a model feature).
pub const PROCESSES: &str = "processes";
/// Value of the `feature` label carrying a node's power-meter reading (not a model feature).
pub const METER_WATTS: &str = "meter_watts";
/// Value of the `feature` label carrying the power of a node's GPUs as their meters read it
/// (not a model feature).
pub const GPU_WATTS: &str = "gpu_watts";
/// Value of the `feature` label carrying a node's online CPUs, which profiles made from
/// per-CPU figures scale with (not a model feature).
pub const NODE_CPUS: &str = "node_cpus";

/// The node-label query of model selectors over `label_keys`: the labels the node's series carry
/// (`greenpipe_node_cpus`, which relabelling gives the node's Kubernetes labels). `power_mode`
/// is not such a label but the gpu collector's `greenpipe_gpu_power_mode_info` (a Jetson's
/// nvpmodel mode, which sets its clocks, so a model per mode can be selected): it is joined in,
/// and a node without it keeps its other labels.
fn node_labels_expr(label_keys: &[String], w: &str, m: &str) -> String {
    let cpus = format!("last_over_time({}[{w}])", selector(n::CPUS, &[m]));
    let keys = label_keys.join(", ");
    if !label_keys.iter().any(|k| k == label::POWER_MODE) {
        return format!("max by (node, {keys}) ({cpus})");
    }
    let others: Vec<&str> = label_keys
        .iter()
        .map(String::as_str)
        .filter(|k| *k != label::POWER_MODE)
        .collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!(", {}", others.join(", "))
    };
    format!(
        "max by (node, {keys}) ({cpus} * on (node) group_left ({mode}) max by (node, {mode}) \
         (last_over_time({info}[{w}]))) or on (node) max by (node{others}) ({cpus})",
        mode = label::POWER_MODE,
        info = selector(greenpipe_common::names::gpu::POWER_MODE_INFO, &[m]),
    )
}

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
    /// The power of the node's GPUs, measured by `nvml` meters, where it has any.
    pub gpu_watts: Option<f64>,
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
        let meter = tagged(
            &greenpipe_common::feature_queries::node_meter_expr(&w, m),
            METER_WATTS,
        );
        let cpus = tagged(
            &format!(
                "max by (node) (last_over_time({}[{w}]))",
                selector(n::CPUS, &[m])
            ),
            NODE_CPUS,
        );
        let gpu = tagged(
            &greenpipe_common::feature_queries::node_gpu_meter_expr(&w, m),
            GPU_WATTS,
        );
        let node = node_features
            .iter()
            .map(|f| tagged(&node_expr_matching(*f, &w, m), f.column()))
            .chain([meter, gpu, cpus])
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
        let node_labels = (!label_keys.is_empty()).then(|| node_labels_expr(label_keys, &w, m));
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

/// A container's features and process count at one tick slot (`None`: no data at that tick).
type Slot = Option<(FeatureValues, Option<f64>)>;

/// A container as its series came: id, pod UID, and where its slots start in the read's arena.
struct Entry<'a> {
    id: Cow<'a, str>,
    pod: Cow<'a, str>,
    slots: usize,
}

/// A container of a read: id and pod UID (shared by its ticks) and where its slots start.
type SharedContainer = (Arc<str>, Arc<str>, usize);

struct NodeAcc<'a> {
    name: Cow<'a, str>,
    labels: BTreeMap<String, String>,
    features: Vec<Option<FeatureValues>>,
    meter: Vec<Option<f64>>,
    gpu: Vec<Option<f64>>,
    cpus: Vec<Option<f64>>,
    // In the order the series came, consecutive series of one container merged; sorted (and any
    // container whose series were apart merged) once per read. Prometheus answers in label order,
    // so a container's features come one after the other: no hashing of the 100-byte
    // (id, pod UID) key per series, which was most of assembling a fleet's tick.
    containers: Vec<Entry<'a>>,
}

/// The answers of one range query set, accumulated series by series (streamed from the bodies by
/// [`Assembly::containers_from`], or from decoded series by [`assemble`]) and turned into ticks by
/// [`Assembly::ticks`]; only this shard's nodes are kept.
pub struct Assembly<'a> {
    start_ms: i64,
    step_ms: i64,
    tick_count: usize,
    shard: Shard,
    /// Node name → its index in `nodes`, `None` for another shard's node.
    index: FastMap<Cow<'a, str>, Option<usize>>,
    /// The node of the previous series: consecutive series are mostly of one node.
    last: Option<(Cow<'a, str>, Option<usize>)>,
    nodes: Vec<NodeAcc<'a>>,
    /// `tick_count` slots per container entry.
    slots: Vec<Slot>,
}

/// The value of label `name` (first occurrence), `""` when absent.
fn value<'l, 'a>(labels: &'l [(Cow<'a, str>, Cow<'a, str>)], name: &str) -> &'l Cow<'a, str> {
    const NONE: &Cow<'_, str> = &Cow::Borrowed("");
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map_or(NONE, |(_, v)| v)
}

/// [`value`], moved out of the labels.
fn take<'a>(labels: &mut [(Cow<'a, str>, Cow<'a, str>)], name: &str) -> Cow<'a, str> {
    labels
        .iter_mut()
        .find(|(k, _)| k == name)
        .map_or(Cow::Borrowed(""), |(_, v)| std::mem::take(v))
}

/// Sets in `into` what `from` holds: a later series' values over an earlier one's.
fn merge(into: &mut Slot, from: &Slot) {
    if let Some((features, processes)) = from {
        let (values, count) = into.get_or_insert_with(Default::default);
        for (v, f) in values.0.iter_mut().zip(features.0) {
            if f.is_some() {
                *v = f;
            }
        }
        if processes.is_some() {
            *count = *processes;
        }
    }
}

impl<'a> Assembly<'a> {
    /// An empty read of `tick_count` ticks from `start_ms`, `step_ms` apart, for `shard`.
    pub fn new(start_ms: i64, step_ms: i64, tick_count: usize, shard: Shard) -> Assembly<'a> {
        Assembly {
            start_ms,
            step_ms,
            tick_count,
            shard,
            index: FastMap::default(),
            last: None,
            nodes: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Which tick a point at `t` belongs to (none: not one of this read's evaluation times).
    fn slot(&self) -> impl Fn(i64) -> Option<usize> {
        let (start_ms, step_ms, tick_count) = (self.start_ms, self.step_ms, self.tick_count);
        move |t| {
            let d = t - start_ms;
            (d >= 0 && d % step_ms == 0 && ((d / step_ms) as usize) < tick_count)
                .then_some((d / step_ms) as usize)
        }
    }

    /// The index of node `name`, added on first sight; `None` for another shard's node.
    fn node(&mut self, name: Cow<'a, str>) -> Option<usize> {
        if let Some((last, i)) = &self.last {
            if *last == name {
                return *i;
            }
        }
        let i = match self.index.get(name.as_ref()) {
            Some(i) => *i,
            None => {
                let i = self.shard.owns(&name).then(|| {
                    self.nodes.push(NodeAcc {
                        name: name.clone(),
                        labels: BTreeMap::new(),
                        features: Vec::new(),
                        meter: Vec::new(),
                        gpu: Vec::new(),
                        cpus: Vec::new(),
                        containers: Vec::new(),
                    });
                    self.nodes.len() - 1
                });
                self.index.insert(name.clone(), i);
                i
            }
        };
        self.last = Some((name, i));
        i
    }

    /// A series of the node answer.
    pub fn node_series(&mut self, s: &'a RangeSeries<'a>) {
        let Some(n) = self.node(Cow::Borrowed(s.label(label::NODE))) else {
            return;
        };
        let tag = s.label(label::FEATURE);
        let tick_count = self.tick_count;
        let slot = self.slot();
        let slots = s.points.iter().map(|&(t, v)| (slot(t), v));
        let entry = &mut self.nodes[n];
        let per_tick = match tag {
            METER_WATTS => Some(&mut entry.meter),
            GPU_WATTS => Some(&mut entry.gpu),
            NODE_CPUS => Some(&mut entry.cpus),
            _ => None,
        };
        if let Some(values) = per_tick {
            values.resize(tick_count, None);
            for (i, v) in slots {
                if let Some(i) = i {
                    values[i] = Some(v);
                }
            }
            return;
        }
        let Some(feature) = Feature::from_column(tag) else {
            return;
        };
        entry.features.resize(tick_count, None);
        for (i, v) in slots {
            if let Some(i) = i {
                entry.features[i]
                    .get_or_insert_with(FeatureValues::default)
                    .set(feature, Some(v));
            }
        }
    }

    /// A series of the container answer.
    pub fn container_series(&mut self, mut labels: SeriesLabels<'a>, points: &[(i64, f64)]) {
        let tag = value(&labels, label::FEATURE);
        let feature = Feature::from_column(tag);
        if feature.is_none() && tag != PROCESSES {
            return;
        }
        let Some(n) = self.node(take(&mut labels, label::NODE)) else {
            return;
        };
        let (id, pod) = (
            take(&mut labels, label::CONTAINER_ID),
            take(&mut labels, label::POD_UID),
        );
        let containers = &mut self.nodes[n].containers;
        let first = match containers.last() {
            Some(e) if e.id == id && e.pod == pod => e.slots,
            _ => {
                let first = self.slots.len();
                self.slots.resize(first + self.tick_count, None);
                containers.push(Entry {
                    id,
                    pod,
                    slots: first,
                });
                first
            }
        };
        let slot = self.slot();
        for &(t, v) in points {
            if let Some(i) = slot(t) {
                let (values, processes) =
                    self.slots[first + i].get_or_insert_with(Default::default);
                match feature {
                    Some(f) => values.set(f, Some(v)),
                    None => *processes = Some(v),
                }
            }
        }
    }

    /// Streams the container answer's body into the assembly; returns the answer's warnings.
    /// On an error the assembly holds part of an answer and is not to be used. (A series read
    /// twice, see [`decode_each_fast`], sets the same values again.)
    pub fn containers_from(&mut self, body: &'a [u8]) -> Result<Vec<String>, DecodeError> {
        decode_each_fast(body, &mut |labels, points| {
            self.container_series(labels, &points)
        })
    }

    /// The node labels answer (read after the others: it only labels nodes that have data).
    pub fn node_labels(&mut self, series: &[RangeSeries<'_>]) {
        for s in series {
            if let Some(Some(n)) = self.index.get(s.label(label::NODE)) {
                self.nodes[*n].labels = s
                    .labels
                    .iter()
                    .filter(|(k, _)| k != label::NODE)
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
            }
        }
    }

    /// The ticks: nodes that had data at each, in name order, their containers in (id, pod UID)
    /// order.
    pub fn ticks(mut self) -> Vec<Tick> {
        let tick_count = self.tick_count;
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_unstable_by(|&a, &b| self.nodes[a].name.cmp(&self.nodes[b].name));
        // Sorted and made shareable once per read, not once per tick.
        let shared: Vec<Vec<SharedContainer>> = order
            .iter()
            .map(|&n| {
                let containers = &mut self.nodes[n].containers;
                // Stable: a container whose series came apart keeps their order when merged.
                containers.sort_by(|a, b| (&a.id, &a.pod).cmp(&(&b.id, &b.pod)));
                let mut out: Vec<SharedContainer> = Vec::with_capacity(containers.len());
                let mut kept: Option<&Entry> = None;
                for e in containers.iter() {
                    if let Some(k) = kept.filter(|k| k.id == e.id && k.pod == e.pod) {
                        for i in 0..tick_count {
                            let from = self.slots[e.slots + i];
                            merge(&mut self.slots[k.slots + i], &from);
                        }
                        continue;
                    }
                    kept = Some(e);
                    out.push((Arc::from(e.id.as_ref()), Arc::from(e.pod.as_ref()), e.slots));
                }
                out
            })
            .collect();
        let slots = &self.slots;
        (0..tick_count)
            .map(|i| Tick {
                timestamp_ms: self.start_ms + i as i64 * self.step_ms,
                nodes: order
                    .iter()
                    .zip(&shared)
                    .filter_map(|(&n, sorted)| {
                        let acc = &self.nodes[n];
                        let node_features = acc.features.get(i).copied().flatten();
                        let containers: Vec<ContainerUsage> = sorted
                            .iter()
                            .filter_map(|(id, pod, first)| {
                                let (features, processes) = slots[first + i]?;
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
                            node: acc.name.to_string(),
                            labels: acc.labels.clone(),
                            features: node_features.unwrap_or_default(),
                            meter_watts: acc.meter.get(i).copied().flatten(),
                            gpu_watts: acc.gpu.get(i).copied().flatten(),
                            cpus: acc.cpus.get(i).copied().flatten(),
                            containers,
                        })
                    })
                    .collect(),
            })
            .collect()
    }
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
    let mut assembly = Assembly::new(start_ms, step_ms, tick_count, shard);
    for s in node {
        assembly.node_series(s);
    }
    for s in container {
        let labels = s
            .labels
            .iter()
            .map(|(k, v)| (Cow::Borrowed(k.as_ref()), Cow::Borrowed(v.as_ref())))
            .collect();
        assembly.container_series(labels, &s.points);
    }
    assembly.node_labels(node_labels);
    assembly.ticks()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Every feature plus the meter reading, the GPUs' meter reading and the CPU count.
        assert_eq!(q.node.matches(" or ").count(), Feature::ALL.len() + 2);
        assert!(q
            .node
            .contains("greenpipe_meter_power_watts{kind=\"nvml\"}"));
        assert!(q.node.contains("greenpipe_node_cpus"));
        // The frequencies (CPU, GPU) are node-level only; processes are added.
        assert_eq!(q.container.matches(" or ").count(), Feature::ALL.len() - 2);
        assert!(q
            .container
            .contains("greenpipe_container_gpu_seconds_total"));
        assert!(q.node.contains("greenpipe_gpu_busy_seconds_total"));
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
    fn a_container_whose_series_come_apart_or_twice_is_one_container() {
        let c = |node: &'static str, id: &'static str, tag: &'static str, v: f64| {
            series(
                &[
                    ("node", node),
                    ("container_id", id),
                    ("pod_uid", "p"),
                    ("feature", tag),
                ],
                &[(1000, v)],
            )
        };
        // As Prometheus orders them (container id first): system's series are apart.
        let apart = vec![
            c("a", "c1", "cpu_seconds_per_second", 0.5),
            c("a", "c1", "processes", 2.0),
            c("a", "system", "cpu_seconds_per_second", 0.1),
            c("b", "system", "cpu_seconds_per_second", 0.2),
            c("a", "system", "processes", 7.0),
            c("b", "system", "processes", 8.0),
        ];
        let once = assemble(1000, 1000, 1, &[], &apart, &[], Shard::ALL);
        // Read again from the start after part of it (a body the fast reader gave up on).
        let mut twice = apart.clone();
        twice.extend(apart[..3].iter().cloned());
        twice.extend(apart.iter().cloned());
        assert_eq!(assemble(1000, 1000, 1, &[], &twice, &[], Shard::ALL), once);
        let nodes = &once[0].nodes;
        assert_eq!(nodes.len(), 2);
        let ids: Vec<&str> = nodes[0]
            .containers
            .iter()
            .map(|c| &*c.container_id)
            .collect();
        assert_eq!(ids, ["c1", "system"]);
        let system = &nodes[1].containers[0];
        assert_eq!(
            (
                system.features.get(Feature::CpuSecondsPerSecond),
                system.processes
            ),
            (Some(0.2), Some(8.0))
        );
    }

    #[test]
    fn a_body_decodes_into_the_assembly_as_decoded_series_do() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"node":"b","container_id":"c2","pod_uid":"q","feature":"processes"},"values":[[1,"1"],[2,"2"]]},
            {"metric":{"node":"a","container_id":"c1","pod_uid":"p","feature":"cpu_seconds_per_second"},"values":[[2,"0.5"]]},
            {"metric":{"node":"a","container_id":"c1","pod_uid":"p","feature":"processes"},"values":[[1,"3"]]}]}}"#;
        let decoded = crate::promql::decode_matrix(body).unwrap();
        let reference = assemble(1000, 1000, 2, &[], &decoded, &[], Shard::ALL);
        let mut assembly = Assembly::new(1000, 1000, 2, Shard::ALL);
        assert!(assembly.containers_from(body).unwrap().is_empty());
        assembly.node_labels(&[]);
        assert_eq!(assembly.ticks(), reference);
        assert_eq!(reference[1].nodes.len(), 2);
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
