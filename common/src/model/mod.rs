//! The versioned model file shared by `greenpipe-estimator train` (writer) and `serve` (reader).
//!
//! It is our own JSON schema, not a serialised library type, so that training and serving share
//! one reader and an old or foreign file fails with a clear message instead of a silent misread.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::features::{Feature, FeatureValues};

mod bounds;
mod kind;
mod provenance;
mod scaling;
mod tree;

pub use bounds::PowerBounds;
pub use kind::ModelKind;
pub use provenance::{Recalibration, Scores, TrainingInfo};
pub use scaling::FeatureScaling;
pub use tree::{RegressionTree, TreeNode};

use bounds::bounded;
use scaling::{check_scaling, scale_inputs};

/// What [`NodeModel::for_node_cpus`] calls the node's CPU count when it is missing (the
/// exporter's `greenpipe_node_cpus`).
pub const NODE_CPUS: &str = "node_cpus";

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// Why a model file or a prediction was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    /// The JSON is malformed or has unknown fields.
    #[error("model file is not valid: {0}")]
    Parse(String),
    /// The file was written by an incompatible version.
    #[error(
        "model file schema_version {found} is not supported (this build reads {SCHEMA_VERSION})"
    )]
    SchemaVersion {
        /// Version found in the file.
        found: u32,
    },
    /// A model is internally inconsistent (e.g. coefficient count != feature count).
    #[error("model {model:?} is inconsistent: {reason}")]
    Inconsistent {
        /// Model name.
        model: String,
        /// What is wrong.
        reason: String,
    },
    /// The input lacks a feature the model needs, or it is not finite.
    #[error("feature {0} is missing or not finite")]
    MissingFeature(&'static str),
}

/// A whole model file: one or more per-node models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// Must equal [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Models, matched against nodes in order; the first match wins.
    pub models: Vec<NodeModel>,
}

/// Which nodes a model applies to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSelector {
    /// Exact node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node labels that must all match (as exported on the node's series).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Matches any node no other model matched.
    #[serde(default)]
    pub default: bool,
}

/// Non-negative per-feature weights that split dynamic power over containers:
/// a container's share is `Σ w[f] * x_c[f] / Σ_c Σ w[f] * x_c[f]` over raw feature values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributionWeight {
    /// The feature.
    pub feature: Feature,
    /// Watts per unit of the raw feature; never negative.
    pub watts_per_unit: f64,
}

/// One node's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeModel {
    /// Value of the `model` label on predictions (e.g. `gbr-2026-11-29`, `uncalibrated-rpi4`).
    pub name: String,
    /// Which nodes it applies to.
    pub selector: NodeSelector,
    /// Ordered inputs and their standardisation.
    pub features: Vec<FeatureScaling>,
    /// Family and parameters (`{"kind": "linear", ...}`).
    pub regressor: ModelKind,
    /// Power of the node doing nothing, watts: the part split by process count, not by usage.
    pub idle_power_watts: f64,
    /// Weights for splitting dynamic power over containers.
    pub attribution_weights: Vec<AttributionWeight>,
    /// Training window (absent for bundled profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<TrainingInfo>,
    /// Scores.
    #[serde(default)]
    pub scores: Scores,
    /// Where the parameters come from, for bundled profiles (a citation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Reference models trained on the same data, which `validate` scores beside this one.
    /// Added after the first files of schema 1 were written: absent means none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baselines: Vec<BaselineModel>,
    /// Predictions are clamped into these bounds (absent: only floored at 0 W).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_bounds: Option<PowerBounds>,
    /// Meter-assisted recalibrations applied since training, oldest first (its lineage). Added
    /// after the first files of schema 1 were written: absent means version 1, as trained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recalibrations: Vec<Recalibration>,
}

/// A reference model trained beside a [`NodeModel`] (CPU-utilisation-only linear regression,
/// or a model trained only on CPU-stress runs). It is kept so that held-out validation can show
/// what the node model gains over it; the online estimator never predicts with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineModel {
    /// Its name in reports (e.g. `baseline_cpu_linear`).
    pub name: String,
    /// Ordered inputs and their standardisation.
    pub features: Vec<FeatureScaling>,
    /// Family and parameters; never [`ModelKind::UtilisationInterpolation`].
    pub regressor: ModelKind,
    /// Predictions are clamped into these bounds (absent: only floored at 0 W).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_bounds: Option<PowerBounds>,
}

impl BaselineModel {
    /// Predicted node power in watts, never below zero, inside the power bounds.
    pub fn predict(&self, raw: &FeatureValues) -> Result<f64, ModelError> {
        Ok(self.predict_bounded(raw)?.0)
    }

    /// As [`BaselineModel::predict`], and whether the power bounds clamped the prediction.
    pub fn predict_bounded(&self, raw: &FeatureValues) -> Result<(f64, bool), ModelError> {
        let x = scale_inputs(&self.features, raw)?;
        let watts = self
            .regressor
            .predict_scaled(&x)
            .unwrap_or_default()
            .max(0.0);
        Ok(bounded(watts, self.power_bounds.as_ref()))
    }

    fn check(&self) -> Result<(), String> {
        check_scaling(&self.features)?;
        if let Some(b) = &self.power_bounds {
            b.check()?;
        }
        if matches!(self.regressor, ModelKind::UtilisationInterpolation { .. }) {
            return Err("a baseline cannot be a utilisation interpolation".into());
        }
        self.regressor.check(self.features.len())
    }
}

impl ModelFile {
    /// Parses and checks a model file.
    pub fn from_json(text: &str) -> Result<ModelFile, ModelError> {
        // Read the version first so an old file says "wrong version", not "unknown field".
        #[derive(Deserialize)]
        struct VersionOnly {
            schema_version: u32,
        }
        let version: VersionOnly =
            serde_json::from_str(text).map_err(|e| ModelError::Parse(e.to_string()))?;
        if version.schema_version != SCHEMA_VERSION {
            return Err(ModelError::SchemaVersion {
                found: version.schema_version,
            });
        }
        let file: ModelFile =
            serde_json::from_str(text).map_err(|e| ModelError::Parse(e.to_string()))?;
        for m in &file.models {
            m.check()?;
        }
        Ok(file)
    }

    /// Serialises the file as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("model file serialises")
    }

    /// The model for a node: first by exact name, then by labels, then the default.
    pub fn select(&self, node: &str, labels: &BTreeMap<String, String>) -> Option<&NodeModel> {
        let by_name = self
            .models
            .iter()
            .find(|m| m.selector.node.as_deref() == Some(node));
        let by_labels = || {
            self.models.iter().find(|m| {
                m.selector.node.is_none()
                    && !m.selector.labels.is_empty()
                    && m.selector
                        .labels
                        .iter()
                        .all(|(k, v)| labels.get(k) == Some(v))
            })
        };
        let by_default = || self.models.iter().find(|m| m.selector.default);
        by_name.or_else(by_labels).or_else(by_default)
    }
}

impl NodeModel {
    /// The model's version: 1 as trained, then that of its last recalibration.
    pub fn version(&self) -> u32 {
        self.recalibrations.last().map_or(1, |r| r.version)
    }

    /// Value of the `model` label on its predictions: the name for a model as trained (so files
    /// written before recalibration existed keep their series), `name@vN` after recalibrations.
    pub fn label(&self) -> String {
        match self.recalibrations.last() {
            None => self.name.clone(),
            Some(r) => format!("{}@v{}", self.name, r.version),
        }
    }

    /// Checks internal consistency.
    pub fn check(&self) -> Result<(), ModelError> {
        let bad = |reason: String| ModelError::Inconsistent {
            model: self.name.clone(),
            reason,
        };
        check_scaling(&self.features).map_err(bad)?;
        if let Some(b) = &self.power_bounds {
            b.check().map_err(bad)?;
        }
        let mut version = 1;
        for r in &self.recalibrations {
            if r.parent_version != version || r.version <= r.parent_version {
                return Err(bad(format!(
                    "recalibration to version {} from {} does not follow version {version}",
                    r.version, r.parent_version
                )));
            }
            version = r.version;
        }
        for b in &self.baselines {
            b.check()
                .map_err(|reason| bad(format!("baseline {}: {reason}", b.name)))?;
        }
        if let Some(w) = self
            .attribution_weights
            .iter()
            .find(|w| !(w.watts_per_unit >= 0.0 && w.watts_per_unit.is_finite()))
        {
            return Err(bad(format!(
                "attribution weight of {} is {} (must be finite and >= 0)",
                w.feature.column(),
                w.watts_per_unit
            )));
        }
        if !self.idle_power_watts.is_finite() || self.idle_power_watts < 0.0 {
            return Err(bad(format!(
                "idle_power_watts is {}",
                self.idle_power_watts
            )));
        }
        match &self.regressor {
            ModelKind::UtilisationInterpolation {
                cpus, max_watts, ..
            } => {
                if cpus.is_nan() || *cpus <= 0.0 || *max_watts < self.idle_power_watts {
                    return Err(bad(format!(
                        "needs cpus > 0 and max_watts >= idle (cpus {cpus}, max {max_watts})"
                    )));
                }
                Ok(())
            }
            other => other.check(self.features.len()).map_err(bad),
        }
    }

    /// This model with an affine correction folded into its regressor and idle power: it
    /// predicts `offset + gain · old` (before the clamp at 0 W) where this one predicts `old`
    /// ([`ModelKind::folded`]). Baselines and power bounds stay as trained. The result is not
    /// checked: a gain that is not positive, for one, makes a model that falls as load rises.
    pub fn folded(&self, offset: f64, gain: f64) -> NodeModel {
        let mut out = self.clone();
        out.idle_power_watts = (offset + gain * self.idle_power_watts).max(0.0);
        out.regressor = self.regressor.folded(offset, gain);
        if let ModelKind::UtilisationInterpolation { max_watts, .. } = &mut out.regressor {
            *max_watts = max_watts.max(out.idle_power_watts);
        }
        out
    }

    /// Raw features the model reads (inputs and attribution), each once.
    pub fn required_features(&self) -> Vec<Feature> {
        let mut out: Vec<Feature> = self.features.iter().map(|s| s.feature).collect();
        if matches!(self.regressor, ModelKind::UtilisationInterpolation { .. }) {
            out.push(Feature::CpuSecondsPerSecond);
        }
        out.sort();
        out.dedup();
        out
    }

    /// This model as it predicts for a node with `node_cpus` online CPUs: itself, unless it is a
    /// utilisation interpolation scaled to the node's CPUs, whose idle and full-load power are
    /// then multiplied by `node_cpus / cpus`. Such a model needs the node's CPU count: without a
    /// finite, positive one it is refused rather than predicting for the machine it was made on.
    pub fn for_node_cpus(
        &self,
        node_cpus: Option<f64>,
    ) -> Result<std::borrow::Cow<'_, NodeModel>, ModelError> {
        let ModelKind::UtilisationInterpolation {
            cpus,
            max_watts,
            scale_to_node_cpus: true,
        } = self.regressor
        else {
            return Ok(std::borrow::Cow::Borrowed(self));
        };
        let node_cpus = node_cpus
            .filter(|n| n.is_finite() && *n > 0.0)
            .ok_or(ModelError::MissingFeature(NODE_CPUS))?;
        let scale = node_cpus / cpus;
        let mut scaled = self.clone();
        scaled.idle_power_watts *= scale;
        scaled.regressor = ModelKind::UtilisationInterpolation {
            cpus: node_cpus,
            max_watts: max_watts * scale,
            scale_to_node_cpus: false,
        };
        Ok(std::borrow::Cow::Owned(scaled))
    }

    /// Standardised inputs in model order.
    pub fn scaled_inputs(&self, raw: &FeatureValues) -> Result<Vec<f64>, ModelError> {
        scale_inputs(&self.features, raw)
    }

    /// Predicted node power in watts, never below zero, inside the power bounds. A model scaled
    /// to the node's CPUs predicts only through [`NodeModel::for_node_cpus`].
    pub fn predict(&self, raw: &FeatureValues) -> Result<f64, ModelError> {
        Ok(self.predict_bounded(raw)?.0)
    }

    /// As [`NodeModel::predict`], and whether the power bounds clamped the prediction.
    pub fn predict_bounded(&self, raw: &FeatureValues) -> Result<(f64, bool), ModelError> {
        let watts = match &self.regressor {
            // Figures for another machine's CPU count: only its instance for this node predicts.
            ModelKind::UtilisationInterpolation {
                scale_to_node_cpus: true,
                ..
            } => return Err(ModelError::MissingFeature(NODE_CPUS)),
            ModelKind::UtilisationInterpolation {
                cpus, max_watts, ..
            } => {
                let cpu = raw
                    .get(Feature::CpuSecondsPerSecond)
                    .filter(|v| v.is_finite())
                    .ok_or(ModelError::MissingFeature(
                        Feature::CpuSecondsPerSecond.column(),
                    ))?;
                let u = (cpu / cpus).clamp(0.0, 1.0);
                self.idle_power_watts + (max_watts - self.idle_power_watts) * u
            }
            scaled => {
                let x = self.scaled_inputs(raw)?;
                scaled.predict_scaled(&x).unwrap_or_default()
            }
        };
        Ok(bounded(watts.max(0.0), self.power_bounds.as_ref()))
    }
}

#[cfg(test)]
mod tests;
