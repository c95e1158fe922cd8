//! Where a model came from: its training window, its scores, and the recalibrations applied to it
//! since (its lineage).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Fit and validation scores carried inside the model file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scores {
    /// Grouped cross-validation mean absolute percentage error, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_mape_percent: Option<f64>,
    /// Held-out validation MAPE, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_mape_percent: Option<f64>,
    /// Any further named scores (MAE, RMSE, R², per baseline, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}

/// Where the training data came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingInfo {
    /// Unix seconds of the first training sample.
    pub from: f64,
    /// Unix seconds of the last training sample.
    pub to: f64,
    /// Training samples used.
    pub samples: u64,
    /// Workloads in the training set.
    #[serde(default)]
    pub workloads: Vec<String>,
}

/// One accepted recalibration of a [`NodeModel`](super::NodeModel): which version it made from which, from whose
/// meter data, and the scores that got it accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recalibration {
    /// Version this recalibration produced (the trained model is version 1).
    pub version: u32,
    /// Version it was made from.
    pub parent_version: u32,
    /// Unix seconds when it was accepted.
    pub accepted_at: f64,
    /// How the parameters were changed (e.g. `affine_correction`).
    pub method: String,
    /// Node whose meter supplied the window (for a board-group model, one node of the group).
    pub node: String,
    /// Unix seconds of the first sample of the metered window.
    pub window_from: f64,
    /// Unix seconds of the last sample of the metered window.
    pub window_to: f64,
    /// Samples of the window used to fit.
    pub fit_samples: u64,
    /// Samples of the window held out to judge the refit.
    pub held_out_samples: u64,
    /// Parameters of the correction, by name (e.g. `offset_watts`, `gain`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, f64>,
    /// Scores of the parent and of this version, by name (e.g. `held_out_mape_percent_before`).
    pub scores: BTreeMap<String, f64>,
}
