//! The GreenPipe attribution rule: node power = idle + dynamic. Dynamic power is split over the
//! node's containers in proportion to `Σ_f w_f · usage_f` (the model's non-negative attribution
//! weights), idle power by process count (or evenly, or not at all). Host processes outside any
//! container form the `system` entry. The `system` entry takes what the others leave, so the
//! shares add up to the node's power exactly, whatever the rounding.

use std::sync::Arc;

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::model::NodeModel;
use greenpipe_common::names::SYSTEM_CONTAINER;

use crate::readout::{ContainerUsage, NodeUsage};

/// How idle power is split over containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum IdleSplit {
    /// In proportion to each container's process count.
    #[default]
    Processes,
    /// The same share for every container and `system`.
    Even,
    /// Not split: containers get dynamic power only; idle stays on the node's idle series.
    None,
}

/// The power of one container (or `system`).
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// Container id or `system`.
    pub container_id: Arc<str>,
    /// Pod UID, empty when unknown.
    pub pod_uid: Arc<str>,
    /// Share of idle power, watts.
    pub idle_watts: f64,
    /// Share of dynamic power, watts.
    pub dynamic_watts: f64,
}

/// Splits `node_watts` (the node prediction) of a node over its containers and `system`.
/// The `system` entry is the last one. With [`IdleSplit::None`] the shares add up to
/// `node_watts - idle`, otherwise to `node_watts`.
pub fn attribute(
    model: &NodeModel,
    node_watts: f64,
    node: &NodeUsage,
    split: IdleSplit,
) -> Vec<Share> {
    let idle = model.idle_power_watts.min(node_watts).max(0.0);
    let dynamic = node_watts - idle;
    let system_reported = node
        .containers
        .iter()
        .any(|c| &*c.container_id == SYSTEM_CONTAINER);
    let synthesized;
    let system: &ContainerUsage = if system_reported {
        node.containers
            .iter()
            .find(|c| &*c.container_id == SYSTEM_CONTAINER)
            .expect("checked above")
    } else {
        synthesized = synthesize_system(node);
        &synthesized
    };
    // Containers first, system last.
    let entries: Vec<&ContainerUsage> = node
        .containers
        .iter()
        .filter(|c| &*c.container_id != SYSTEM_CONTAINER)
        .chain(std::iter::once(system))
        .collect();

    let usage: Vec<f64> = entries
        .iter()
        .map(|c| weighted_usage(model, &c.features))
        .collect();
    let processes: Vec<f64> = entries
        .iter()
        .map(|c| match c.processes {
            Some(p) if p.is_finite() && p > 0.0 => p,
            _ => 0.0,
        })
        .collect();
    let even = vec![1.0; entries.len()];
    let idle_keys: &[f64] = match split {
        IdleSplit::Processes if processes.iter().sum::<f64>() > 0.0 => &processes,
        _ => &even,
    };
    let idle_to_split = if split == IdleSplit::None { 0.0 } else { idle };
    // Without any usage (all weights zero) dynamic power follows the idle key.
    let dynamic_keys: &[f64] = if usage.iter().sum::<f64>() > 0.0 {
        &usage
    } else {
        idle_keys
    };
    let idle_shares = proportional(idle_to_split, idle_keys);
    let dynamic_shares = proportional(dynamic, dynamic_keys);
    entries
        .iter()
        .zip(idle_shares.into_iter().zip(dynamic_shares))
        .map(|(c, (idle_watts, dynamic_watts))| Share {
            // The usage's ids, shared: no copy per share and tick.
            container_id: Arc::clone(&c.container_id),
            pod_uid: Arc::clone(&c.pod_uid),
            idle_watts,
            dynamic_watts,
        })
        .collect()
}

/// `total` split in proportion to `keys`; the last entry takes the remainder so the parts add up
/// to `total` exactly (the rounding error is far below a microwatt).
fn proportional(total: f64, keys: &[f64]) -> Vec<f64> {
    let sum: f64 = keys.iter().sum();
    let mut out: Vec<f64> = keys.iter().map(|k| total * k / sum).collect();
    if let Some((last, rest)) = out.split_last_mut() {
        *last = (total - rest.iter().sum::<f64>()).max(0.0);
    }
    out
}

/// `Σ_f w_f · x_f` over the model's attribution weights; missing or invalid usage counts as 0.
pub fn weighted_usage(model: &NodeModel, x: &FeatureValues) -> f64 {
    model
        .attribution_weights
        .iter()
        .map(|w| match x.get(w.feature) {
            Some(v) if v.is_finite() && v > 0.0 => w.watts_per_unit * v,
            _ => 0.0,
        })
        .sum()
}

/// When the exporter reports no `system` entry: node usage minus the containers' usage, per
/// feature, never below zero. Its process count is unknown, so it gets none of the idle split
/// by processes (unless nothing reports processes, then the split is even).
fn synthesize_system(node: &NodeUsage) -> ContainerUsage {
    let mut features = FeatureValues::default();
    for f in Feature::ALL {
        if let Some(total) = node.features.get(f).filter(|v| v.is_finite()) {
            let used: f64 = node
                .containers
                .iter()
                .filter_map(|c| c.features.get(f).filter(|v| v.is_finite()))
                .sum();
            features.set(f, Some((total - used).max(0.0)));
        }
    }
    ContainerUsage {
        container_id: SYSTEM_CONTAINER.into(),
        pod_uid: "".into(),
        features,
        processes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::model::{AttributionWeight, ModelKind, NodeSelector, Scores};

    fn model() -> NodeModel {
        NodeModel {
            name: "m".into(),
            selector: NodeSelector::default(),
            features: vec![],
            regressor: ModelKind::UtilisationInterpolation {
                cpus: 4.0,
                max_watts: 7.0,
                scale_to_node_cpus: false,
            },
            idle_power_watts: 3.0,
            attribution_weights: vec![
                AttributionWeight {
                    feature: Feature::CpuSecondsPerSecond,
                    watts_per_unit: 1.0,
                },
                AttributionWeight {
                    feature: Feature::NetworkBytesPerSecond,
                    watts_per_unit: 1e-6,
                },
            ],
            training: None,
            scores: Scores::default(),
            source: None,
            baselines: vec![],
            power_bounds: None,
            recalibrations: vec![],
        }
    }

    fn usage(id: &str, cpu: f64, net: Option<f64>, processes: Option<f64>) -> ContainerUsage {
        let mut f = FeatureValues::default();
        f.set(Feature::CpuSecondsPerSecond, Some(cpu));
        f.set(Feature::NetworkBytesPerSecond, net);
        ContainerUsage {
            container_id: id.into(),
            pod_uid: format!("pod-{id}").into(),
            features: f,
            processes,
        }
    }

    fn node(containers: Vec<ContainerUsage>, cpu: f64) -> NodeUsage {
        let mut f = FeatureValues::default();
        f.set(Feature::CpuSecondsPerSecond, Some(cpu));
        NodeUsage {
            node: "n".into(),
            labels: Default::default(),
            features: f,
            meter_watts: None,
            gpu_watts: None,
            cpus: None,
            containers,
        }
    }

    fn total(shares: &[Share]) -> f64 {
        shares.iter().map(|s| s.idle_watts + s.dynamic_watts).sum()
    }

    #[test]
    fn shares_follow_weighted_usage_and_process_count() {
        let n = node(
            vec![
                usage("a", 1.0, Some(1e6), Some(1.0)),
                usage("b", 2.0, None, Some(3.0)),
                usage(SYSTEM_CONTAINER, 0.0, None, Some(4.0)),
            ],
            3.0,
        );
        let s = attribute(&model(), 7.0, &n, IdleSplit::Processes);
        assert_eq!(s.len(), 3);
        assert_eq!(&*s[2].container_id, SYSTEM_CONTAINER);
        // Dynamic 4 W over usage 2 : 2 : 0, idle 3 W over processes 1 : 3 : 4.
        assert!((s[0].dynamic_watts - 2.0).abs() < 1e-12);
        assert!((s[1].dynamic_watts - 2.0).abs() < 1e-12);
        assert!(s[2].dynamic_watts.abs() < 1e-12);
        assert!((s[0].idle_watts - 0.375).abs() < 1e-12);
        assert!((s[1].idle_watts - 1.125).abs() < 1e-12);
        assert!((s[2].idle_watts - 1.5).abs() < 1e-12);
        assert_eq!(total(&s), 7.0);

        let even = attribute(&model(), 7.0, &n, IdleSplit::Even);
        assert!(even.iter().all(|x| (x.idle_watts - 1.0).abs() < 1e-12));
        let none = attribute(&model(), 7.0, &n, IdleSplit::None);
        assert!(none.iter().all(|x| x.idle_watts == 0.0));
        assert!((total(&none) - 4.0).abs() < 1e-12);
    }

    #[test]
    fn missing_system_is_node_minus_containers() {
        let n = node(vec![usage("a", 1.0, None, Some(2.0))], 3.0);
        let s = attribute(&model(), 6.0, &n, IdleSplit::Processes);
        assert_eq!(&*s[1].container_id, SYSTEM_CONTAINER);
        // System usage = 3 - 1 = 2 CPU; dynamic 3 W split 1 : 2.
        assert!((s[0].dynamic_watts - 1.0).abs() < 1e-12);
        assert!((s[1].dynamic_watts - 2.0).abs() < 1e-12);
        // Only `a` reports processes: it carries all idle power.
        assert_eq!(s[0].idle_watts, 3.0);
        assert_eq!(s[1].idle_watts, 0.0);
        // Containers above node usage (different sources): system clamped at 0, never negative.
        let n = node(vec![usage("a", 5.0, None, None)], 3.0);
        let s = attribute(&model(), 6.0, &n, IdleSplit::Processes);
        assert!(s
            .iter()
            .all(|x| x.idle_watts >= 0.0 && x.dynamic_watts >= 0.0));
        assert_eq!(total(&s), 6.0);
    }

    #[test]
    fn sum_is_exact_for_awkward_numbers_and_below_idle_predictions() {
        let mut containers: Vec<ContainerUsage> = (0..97)
            .map(|i| {
                usage(
                    &format!("c{i}"),
                    0.1 * (i as f64 + 0.37),
                    Some(i as f64 * 3.3e3),
                    Some((i % 7) as f64),
                )
            })
            .collect();
        containers.push(usage(SYSTEM_CONTAINER, 0.01, None, Some(200.0)));
        let n = node(containers, 40.0);
        for watts in [0.0, 1.234567, 3.0, 6.999999, 1e-9] {
            let s = attribute(&model(), watts, &n, IdleSplit::Processes);
            let sum = total(&s);
            assert!(
                (sum - watts).abs() <= 1e-12 * watts.max(1.0),
                "{sum} vs {watts}"
            );
            assert!(s
                .iter()
                .all(|x| x.idle_watts >= 0.0 && x.dynamic_watts >= 0.0));
        }
    }

    #[test]
    fn no_usage_anywhere_still_conserves_power() {
        let n = node(vec![usage("a", 0.0, None, None)], 0.0);
        let s = attribute(&model(), 3.5, &n, IdleSplit::Processes);
        assert_eq!(total(&s), 3.5);
    }
}
