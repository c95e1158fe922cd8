//! One tick, from read usage to the series to write: pick each node's model, predict, skip nodes
//! whose inputs are missing or not finite (with a reason), attribute, and lay out the samples.

use greenpipe_common::model::{ModelFile, NodeModel};

use crate::attribution::{attribute, IdleSplit, Share};
use crate::readout::{NodeUsage, Tick};

/// Why a node got no estimate at a tick (the `reason` label of the skip counter), declared with
/// its label values in the contract.
pub use greenpipe_common::contract::reason::NodeSkipped as SkipReason;

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
    // A profile made from per-CPU figures predicts with its instance for this node's CPUs.
    let instance = model
        .for_node_cpus(usage.cpus)
        .map_err(|_| SkipReason::MissingFeature)?;
    let watts = instance
        .predict(&usage.features)
        .ok()
        .filter(|w| w.is_finite())
        .ok_or(SkipReason::ModelError)?;
    Ok(NodeEstimate {
        node: usage.node.clone(),
        model,
        watts,
        idle_watts: instance.idle_power_watts.min(watts),
        meter_watts: usage.meter_watts.filter(|w| w.is_finite()),
        shares: attribute(&instance, watts, usage, split),
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
            cpus,
            containers: vec![],
        };
        let two = estimate_node(&models, &node(Some(2.0)), IdleSplit::Processes).unwrap();
        // 2 x 1 W idle + 1 busy CPU x 3 W.
        assert!((two.watts - 5.0).abs() < 1e-12, "{}", two.watts);
        assert!((two.idle_watts - 2.0).abs() < 1e-12);
        let eight = estimate_node(&models, &node(Some(8.0)), IdleSplit::Processes).unwrap();
        assert!((eight.watts - 11.0).abs() < 1e-12, "{}", eight.watts);
        assert_eq!(
            estimate_node(&models, &node(None), IdleSplit::Processes).unwrap_err(),
            SkipReason::MissingFeature
        );
    }
}
