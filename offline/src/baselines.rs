//! The two baselines every report shows beside the candidates: what a user gets without
//! GreenPipe's multi-resource models and workload-held-out selection.

use greenpipe_common::features::Feature;
use regex::Regex;

use crate::evaluate::Spec;
use crate::models::ols::Ols;
use crate::models::Candidate;
use crate::samples::NodeSamples;

/// Linear regression on CPU utilisation alone (the classic utilisation model).
pub const CPU_ONLY: &str = "baseline_cpu_linear";
/// Linear regression on every feature, trained only on CPU-stress traces (Kepler's approach:
/// a model fitted to stress-ng runs, then applied to real work).
pub const STRESS_ONLY: &str = "baseline_stress_trained";

/// The baseline specs that the node's data allows; what is missing is noted.
pub fn specs(s: &NodeSamples, stress: &Regex, notes: &mut Vec<String>) -> Vec<Spec> {
    let mut out = Vec::new();
    match s.feature_index(Feature::CpuSecondsPerSecond) {
        Some(cpu) => out.push(Spec {
            label: CPU_ONLY.into(),
            candidate: Candidate::new(Ols),
            columns: vec![cpu],
            only_groups: None,
            baseline: true,
        }),
        None => notes.push(format!(
            "{}: {CPU_ONLY} not available: no {} column",
            s.node,
            Feature::CpuSecondsPerSecond.column()
        )),
    }
    let stress_groups: Vec<usize> = (0..s.groups.len())
        .filter(|&g| stress.is_match(&s.groups[g]))
        .collect();
    if stress_groups.is_empty() {
        notes.push(format!(
            "{}: {STRESS_ONLY} not available: no workload matches --stress-pattern {:?}",
            s.node,
            stress.as_str()
        ));
    } else {
        out.push(Spec {
            label: STRESS_ONLY.into(),
            candidate: Candidate::new(Ols),
            columns: (0..s.features.len()).collect(),
            only_groups: Some(stress_groups),
            baseline: true,
        });
    }
    out
}
