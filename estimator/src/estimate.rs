//! One tick, from read usage to the series to write: pick each node's model, predict, skip nodes
//! whose inputs are missing or not finite (with a reason), attribute, and lay out the samples.

use greenpipe_common::model::{ModelFile, NodeModel};
use greenpipe_common::names::{component, estimate, label};

use crate::attribution::{attribute, IdleSplit, Share};
use crate::energy::TickEnergy;
use crate::readout::{NodeUsage, Tick};
use bytes::Bytes;

use crate::remote_write::{BatchWriter, Label, LabelTail, Sample, TimeSeries};

/// Why a node got no estimate at a tick (the `reason` label of the skip counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// No model matches the node and the file has no default.
    NoModel,
    /// A feature the model needs was not read.
    MissingFeature,
    /// A feature the model needs is NaN or infinite.
    NonFiniteFeature,
    /// The model refused the input or predicted a non-finite value.
    ModelError,
}

impl SkipReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NoModel => "no_model",
            SkipReason::MissingFeature => "missing_feature",
            SkipReason::NonFiniteFeature => "non_finite_feature",
            SkipReason::ModelError => "model_error",
        }
    }
}

/// A node's estimate at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEstimate<'m> {
    /// Node name.
    pub node: String,
    /// The model used.
    pub model: &'m NodeModel,
    /// Predicted node power, watts.
    pub watts: f64,
    /// Its idle part, watts.
    pub idle_watts: f64,
    /// The node's power-meter reading at the same tick, where it has one.
    pub meter_watts: Option<f64>,
    /// Shares of containers and `system` (last).
    pub shares: Vec<Share>,
}

/// Predicts and attributes one node, or says why not.
pub fn estimate_node<'m>(
    models: &'m ModelFile,
    usage: &NodeUsage,
    split: IdleSplit,
) -> Result<NodeEstimate<'m>, SkipReason> {
    let model = models
        .select(&usage.node, &usage.labels)
        .ok_or(SkipReason::NoModel)?;
    for f in model.required_features() {
        match usage.features.get(f) {
            None => return Err(SkipReason::MissingFeature),
            Some(v) if !v.is_finite() => return Err(SkipReason::NonFiniteFeature),
            Some(_) => {}
        }
    }
    let watts = model
        .predict(&usage.features)
        .ok()
        .filter(|w| w.is_finite())
        .ok_or(SkipReason::ModelError)?;
    Ok(NodeEstimate {
        node: usage.node.clone(),
        model,
        watts,
        idle_watts: model.idle_power_watts.min(watts),
        meter_watts: usage.meter_watts.filter(|w| w.is_finite()),
        shares: attribute(model, watts, usage, split),
    })
}

/// Estimates of one tick, and the nodes skipped.
#[derive(Debug, Default)]
pub struct TickEstimates<'m> {
    /// Tick time, ms.
    pub timestamp_ms: i64,
    /// Nodes estimated.
    pub nodes: Vec<NodeEstimate<'m>>,
    /// Nodes skipped, with the reason.
    pub skipped: Vec<(String, SkipReason)>,
}

/// Estimates every node of a tick.
pub fn estimate_tick<'m>(
    models: &'m ModelFile,
    tick: &Tick,
    split: IdleSplit,
) -> TickEstimates<'m> {
    let mut out = TickEstimates {
        timestamp_ms: tick.timestamp_ms,
        ..Default::default()
    };
    for usage in &tick.nodes {
        match estimate_node(models, usage, split) {
            Ok(e) => out.nodes.push(e),
            Err(reason) => out.skipped.push((usage.node.clone(), reason)),
        }
    }
    out
}

/// The series of one tick: per node its power and idle power (and error against its meter), per
/// container and `system` its idle and dynamic shares, and the energy counters of each of those
/// (`energy`, from [`crate::energy::Ledger::record`] for the same estimates); one sample each, at
/// the tick's time. The serve loop writes the same series with [`write_tick`]; this builds them
/// (tests, tools).
pub fn tick_series(estimates: &TickEstimates<'_>, energy: &TickEnergy) -> Vec<TimeSeries> {
    let mut list = SeriesList {
        timestamp_ms: estimates.timestamp_ms,
        tail: Vec::new(),
        out: Vec::with_capacity(estimates.nodes.iter().map(|n| 4 + 4 * n.shares.len()).sum()),
    };
    lay_out(estimates, energy, &mut list);
    list.out
}

/// [`tick_series`] written straight into request bodies: the same series, the same bytes, without
/// building a `TimeSeries` per sample, and the labels a container's series share encoded once.
pub fn write_tick(estimates: &TickEstimates<'_>, energy: &TickEnergy, writer: &mut BatchWriter) {
    lay_out(
        estimates,
        energy,
        &mut Writing {
            timestamp_ms: estimates.timestamp_ms,
            tail: LabelTail::default(),
            writer,
        },
    );
}

/// Where [`lay_out`] puts the series of a tick.
trait Layout {
    /// Labels ending every series that follows until the next call, in name order (after those of
    /// the series' heads).
    fn tail(&mut self, labels: &[(&[u8], &[u8])]);
    /// A series: `head` labels in name order, then the current tail; one sample of `value`.
    fn series(&mut self, head: &[(&[u8], &[u8])], value: f64);
}

/// The series built one by one (the reference for [`Writing`]).
struct SeriesList {
    timestamp_ms: i64,
    tail: Vec<Label>,
    out: Vec<TimeSeries>,
}

fn owned_labels<'l>(labels: &'l [(&'l [u8], &'l [u8])]) -> impl Iterator<Item = Label> + 'l {
    labels.iter().map(|(n, v)| Label {
        name: Bytes::copy_from_slice(n),
        value: Bytes::copy_from_slice(v),
    })
}

impl Layout for SeriesList {
    fn tail(&mut self, labels: &[(&[u8], &[u8])]) {
        self.tail = owned_labels(labels).collect();
    }

    fn series(&mut self, head: &[(&[u8], &[u8])], value: f64) {
        let labels = owned_labels(head).chain(self.tail.iter().cloned());
        let mut ts = TimeSeries::from_labels(labels.collect());
        ts.samples.push(Sample {
            value,
            timestamp: self.timestamp_ms,
        });
        self.out.push(ts);
    }
}

/// The series written straight into request bodies.
struct Writing<'w> {
    timestamp_ms: i64,
    tail: LabelTail,
    writer: &'w mut BatchWriter,
}

impl Layout for Writing<'_> {
    fn tail(&mut self, labels: &[(&[u8], &[u8])]) {
        self.tail.set(labels);
    }

    fn series(&mut self, head: &[(&[u8], &[u8])], value: f64) {
        let sample = Sample {
            value,
            timestamp: self.timestamp_ms,
        };
        self.writer.series_ending_with(head, &self.tail, &[sample]);
    }
}

/// Puts every series of the tick into `out`.
fn lay_out(estimates: &TickEstimates<'_>, energy: &TickEnergy, out: &mut impl Layout) {
    let b = |s: &'static str| s.as_bytes();
    let (name, l_component, l_container, l_model, l_node, l_pod) = (
        b("__name__"),
        b(label::COMPONENT),
        b(label::CONTAINER_ID),
        b(label::MODEL),
        b(label::NODE),
        b(label::POD_UID),
    );
    let (node_power, node_idle, node_error, node_error_ratio, container_power) = (
        b(estimate::NODE_POWER_WATTS),
        b(estimate::NODE_IDLE_POWER_WATTS),
        b(estimate::NODE_POWER_ERROR_WATTS),
        b(estimate::NODE_POWER_ABS_ERROR_RATIO),
        b(estimate::CONTAINER_POWER_WATTS),
    );
    let (node_energy, container_energy) = (
        b(estimate::NODE_ENERGY_JOULES_TOTAL),
        b(estimate::CONTAINER_ENERGY_JOULES_TOTAL),
    );
    let (idle, dynamic) = (b(component::IDLE), b(component::DYNAMIC));
    assert_eq!(
        estimates.nodes.len(),
        energy.nodes.len(),
        "energy recorded for these estimates"
    );
    for (e, joules) in estimates.nodes.iter().zip(&energy.nodes) {
        let node = e.node.as_bytes();
        // The label carries the version, so a recalibrated model starts new series.
        let model_label = e.model.label();
        let model = model_label.as_bytes();
        // Labels in name order: __name__, component, container_id, model, node, pod_uid.
        let node_labels =
            |metric: &'static [u8]| [(name, metric), (l_model, model), (l_node, node)];
        out.tail(&[]);
        out.series(&node_labels(node_power), e.watts);
        out.series(&node_labels(node_idle), e.idle_watts);
        if let Some(measured) = e.meter_watts {
            out.series(&node_labels(node_error), e.watts - measured);
            // A meter reading 0 W is unplugged or idle-blind: no relative error from it.
            if measured > 0.0 {
                out.series(
                    &node_labels(node_error_ratio),
                    (e.watts - measured).abs() / measured,
                );
            }
        }
        out.series(&node_labels(node_energy), joules.joules);
        for (s, share_joules) in e.shares.iter().zip(&joules.shares) {
            let (id, pod) = (s.container_id.as_bytes(), s.pod_uid.as_bytes());
            // The container's four series differ only in __name__ and component.
            out.tail(&[
                (l_container, id),
                (l_model, model),
                (l_node, node),
                (l_pod, pod),
            ]);
            let parts = [
                (idle, s.idle_watts, share_joules[0]),
                (dynamic, s.dynamic_watts, share_joules[1]),
            ];
            for (part, watts, total) in parts {
                for (metric, value) in [(container_power, watts), (container_energy, total)] {
                    out.series(&[(name, metric), (l_component, part)], value);
                }
            }
        }
    }
}
