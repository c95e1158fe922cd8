//! One tick, from read usage to the series to write: pick each node's model, predict, skip nodes
//! whose inputs are missing or not finite (with a reason), attribute, and lay out the samples.

use greenpipe_common::model::{ModelFile, NodeModel};

use crate::attribution::{attribute, IdleSplit, Share};
use crate::readout::{NodeUsage, Tick};

/// Why a node got no estimate at a tick (the `reason` label of the skip counter), declared with
/// its label values in the contract.
pub use greenpipe_common::contract::reason::NodeSkipped as SkipReason;

/// Which power a node reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NodePower {
    /// The model's prediction on every node; a meter reading, where there is one, scores it.
    #[default]
    Predicted,
    /// On a node that measures itself (a whole-node meter: a USB meter, a smart plug, a
    /// Jetson's module rail), the reading, split over containers by the model's attribution
    /// rule; the prediction on the others. The prediction is still scored against the reading.
    Measured,
}

/// How a tick's estimates are made: which power a node reports, and how idle power is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Which power a node reports.
    pub node_power: NodePower,
    /// How idle power is split over containers.
    pub idle_split: IdleSplit,
}

/// A node's estimate at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEstimate<'m> {
    /// Node name.
    pub node: String,
    /// The model used.
    pub model: &'m NodeModel,
    /// The node's power, watts: the prediction, or the meter reading under
    /// [`NodePower::Measured`].
    pub watts: f64,
    /// The model's prediction, watts (what the meter reading scores).
    pub predicted_watts: f64,
    /// Whether [`NodeEstimate::watts`] is the meter reading.
    pub measured: bool,
    /// Its idle part, watts.
    pub idle_watts: f64,
    /// The node's power-meter reading at the same tick, where it has one.
    pub meter_watts: Option<f64>,
    /// The node's GPUs' power as their meters read it, where it has any.
    pub gpu_watts: Option<f64>,
    /// Shares of containers and `system` (last).
    pub shares: Vec<Share>,
}

/// Predicts and attributes one node, or says why not.
pub fn estimate_node<'m>(
    models: &'m ModelFile,
    usage: &NodeUsage,
    policy: Policy,
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
    // A profile made from per-CPU figures predicts with its instance for this node's CPUs.
    let instance = model
        .for_node_cpus(usage.cpus)
        .map_err(|_| SkipReason::MissingFeature)?;
    let predicted_watts = instance
        .predict(&usage.features)
        .ok()
        .filter(|w| w.is_finite())
        .ok_or(SkipReason::ModelError)?;
    let meter_watts = usage.meter_watts.filter(|w| w.is_finite());
    let reading = meter_watts.filter(|w| *w >= 0.0);
    let (watts, measured) = match (policy.node_power, reading) {
        (NodePower::Measured, Some(m)) => (m, true),
        _ => (predicted_watts, false),
    };
    Ok(NodeEstimate {
        node: usage.node.clone(),
        model,
        watts,
        predicted_watts,
        measured,
        idle_watts: instance.idle_power_watts.min(watts).max(0.0),
        meter_watts,
        gpu_watts: usage.gpu_watts.filter(|w| w.is_finite() && *w >= 0.0),
        shares: attribute(&instance, watts, usage, policy.idle_split),
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
pub fn estimate_tick<'m>(models: &'m ModelFile, tick: &Tick, policy: Policy) -> TickEstimates<'m> {
    let mut out = TickEstimates {
        timestamp_ms: tick.timestamp_ms,
        ..Default::default()
    };
    for usage in &tick.nodes {
        match estimate_node(models, usage, policy) {
            Ok(e) => out.nodes.push(e),
            Err(reason) => out.skipped.push((usage.node.clone(), reason)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::features::{Feature, FeatureValues};

    /// A profile of per-vCPU figures predicts each node at its own CPU count, and skips a node
    /// whose CPU count was not read rather than predicting it at one CPU.
    #[test]
    fn a_per_cpu_profile_predicts_each_node_at_its_cpu_count() {
        let models = ModelFile::from_json(
            r#"{"schema_version": 1, "models": [{"name": "uncalibrated-vm",
              "selector": {"default": true}, "features": [],
              "regressor": {"kind": "utilisation_interpolation", "cpus": 1.0,
                            "max_watts": 4.0, "scale_to_node_cpus": true},
              "idle_power_watts": 1.0,
              "attribution_weights": [{"feature": "cpu_seconds_per_second", "watts_per_unit": 3.0}],
              "scores": {}}]}"#,
        )
        .unwrap();
        let mut features = FeatureValues::default();
        features.set(Feature::CpuSecondsPerSecond, Some(1.0));
        let node = |cpus| NodeUsage {
            node: "vm-1".into(),
            labels: Default::default(),
            features,
            meter_watts: None,
            gpu_watts: None,
            cpus,
            containers: vec![],
        };
        let two = estimate_node(&models, &node(Some(2.0)), Policy::default()).unwrap();
        // 2 x 1 W idle + 1 busy CPU x 3 W.
        assert!((two.watts - 5.0).abs() < 1e-12, "{}", two.watts);
        assert!((two.idle_watts - 2.0).abs() < 1e-12);
        let eight = estimate_node(&models, &node(Some(8.0)), Policy::default()).unwrap();
        assert!((eight.watts - 11.0).abs() < 1e-12, "{}", eight.watts);
        assert_eq!(
            estimate_node(&models, &node(None), Policy::default()).unwrap_err(),
            SkipReason::MissingFeature
        );
    }

    /// Under `--node-power measured` a node with a whole-node meter reports the reading, split
    /// over its containers by the model (the shares add up to the reading), while the
    /// prediction is kept for scoring; a node without a reading reports the prediction.
    #[test]
    fn a_measured_node_reports_its_reading_split_by_the_model() {
        use crate::readout::ContainerUsage;
        let models = ModelFile::from_json(
            r#"{"schema_version": 1, "models": [{"name": "m", "selector": {"default": true},
              "features": [{"feature": "gpu_seconds_per_second", "mean": 0.0, "scale": 1.0}],
              "regressor": {"kind": "linear", "intercept": 5.0, "coefficients": [10.0]},
              "idle_power_watts": 5.0,
              "attribution_weights": [{"feature": "gpu_seconds_per_second", "watts_per_unit": 10.0}],
              "scores": {}}]}"#,
        )
        .unwrap();
        let gpu = |v| {
            let mut f = FeatureValues::default();
            f.set(Feature::GpuSecondsPerSecond, Some(v));
            f
        };
        let container = |id: &str, v| ContainerUsage {
            container_id: id.into(),
            pod_uid: "".into(),
            features: gpu(v),
            processes: Some(1.0),
        };
        let node = |meter| NodeUsage {
            node: "orin".into(),
            labels: Default::default(),
            features: gpu(0.8),
            meter_watts: meter,
            gpu_watts: None,
            cpus: Some(6.0),
            containers: vec![container("a", 0.6), container("b", 0.2)],
        };
        let measured = Policy {
            node_power: NodePower::Measured,
            idle_split: IdleSplit::Even,
        };
        let e = estimate_node(&models, &node(Some(17.0)), measured).unwrap();
        assert!(e.measured);
        assert_eq!((e.watts, e.predicted_watts), (17.0, 13.0));
        let total: f64 = e
            .shares
            .iter()
            .map(|s| s.idle_watts + s.dynamic_watts)
            .sum();
        assert!((total - 17.0).abs() < 1e-9, "{total}");
        // 12 W above idle, by GPU time 0.6 : 0.2 : 0 (system).
        let dynamic: Vec<f64> = e.shares.iter().map(|s| s.dynamic_watts).collect();
        assert!(
            (dynamic[0] - 9.0).abs() < 1e-9 && (dynamic[1] - 3.0).abs() < 1e-9,
            "{dynamic:?}"
        );
        let e = estimate_node(&models, &node(None), measured).unwrap();
        assert!(!e.measured);
        assert_eq!(e.watts, 13.0);
        let e = estimate_node(&models, &node(Some(17.0)), Policy::default()).unwrap();
        assert_eq!((e.watts, e.meter_watts), (13.0, Some(17.0)));
    }
}
