//! The versioned model file shared by `greenpipe-estimator train` (writer) and `serve` (reader).
//!
//! It is our own JSON schema, not a serialised library type, so that training and serving share
//! one reader and an old or foreign file fails with a clear message instead of a silent misread.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::features::{Feature, FeatureValues};

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

/// Standardisation applied to a feature before it enters the model: `(x - mean) / scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureScaling {
    /// The feature.
    pub feature: Feature,
    /// Subtracted first.
    pub mean: f64,
    /// Then divided by (never 0).
    pub scale: f64,
}

/// Model families and their parameters. Features are the standardised inputs, in the order of
/// [`NodeModel::features`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelKind {
    /// `intercept + Σ coefficients[i] * x[i]` (OLS, ridge, lasso, elastic net).
    Linear {
        /// Intercept, watts.
        intercept: f64,
        /// One per feature.
        coefficients: Vec<f64>,
    },
    /// Degree-2 polynomial: `intercept + Σ linear[i]·x[i] + Σ quadratic[k]·x[i]·x[j]`, where `k`
    /// runs over the pairs `i <= j` in row-major order (`(0,0), (0,1), .., (1,1), ..`).
    Polynomial {
        /// Intercept, watts.
        intercept: f64,
        /// One per feature.
        linear: Vec<f64>,
        /// One per feature pair `i <= j`: `n (n + 1) / 2` terms.
        quadratic: Vec<f64>,
    },
    /// k nearest neighbours: the mean power of the `k` stored points closest (Euclidean, on the
    /// standardised inputs) to the input.
    NearestNeighbours {
        /// Neighbours averaged.
        k: usize,
        /// Stored standardised inputs, one row per point.
        points: Vec<Vec<f64>>,
        /// Measured power of each point, watts.
        targets: Vec<f64>,
    },
    /// Gradient-boosted regression trees on top of a linear base:
    /// `intercept + Σ linear[i]·x[i] + learning_rate · Σ_t tree_t(x)`.
    /// The linear base (empty = none) lets the ensemble extrapolate beyond the training range,
    /// where plain trees stay flat.
    GradientBoosting {
        /// Intercept of the base, watts.
        intercept: f64,
        /// Linear base coefficients, one per feature, or empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        linear: Vec<f64>,
        /// Shrinkage applied to every tree.
        learning_rate: f64,
        /// The trees, fitted in sequence on residuals.
        trees: Vec<RegressionTree>,
    },
    /// Random forest: the mean of the trees' predictions.
    RandomForest {
        /// The trees, each fitted on a bootstrap sample.
        trees: Vec<RegressionTree>,
    },
    /// The mean of several models' predictions on the same inputs (averaging a forest and
    /// boosted trees cancels part of their errors on workloads neither saw).
    Ensemble {
        /// The members; none may be [`ModelKind::UtilisationInterpolation`].
        members: Vec<ModelKind>,
    },
    /// Utilisation interpolation for nodes never metered: `idle + (max - idle) * u`, where
    /// `u = cpu_seconds_per_second / cpus`, clamped to [0, 1]. Uses the raw (unscaled) CPU feature.
    UtilisationInterpolation {
        /// Logical CPUs of the board.
        cpus: f64,
        /// Power at full load, watts.
        max_watts: f64,
    },
}

/// A binary regression tree over the standardised inputs, stored flat; node 0 is the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionTree {
    /// The nodes; children always come after their parent.
    pub nodes: Vec<TreeNode>,
}

/// One node of a [`RegressionTree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum TreeNode {
    /// Go `left` when `x[feature] <= threshold`, else `right` (indices into the node list).
    Split {
        /// Input index.
        feature: usize,
        /// Split point on the standardised input.
        threshold: f64,
        /// Node index for `x <= threshold`.
        left: usize,
        /// Node index for `x > threshold`.
        right: usize,
    },
    /// A prediction.
    Leaf {
        /// Value, watts.
        value: f64,
    },
}

impl RegressionTree {
    /// The leaf value `x` falls into.
    pub fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match &self.nodes[i] {
                TreeNode::Leaf { value } => return *value,
                TreeNode::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    i = if x[*feature] <= *threshold {
                        *left
                    } else {
                        *right
                    }
                }
            }
        }
    }

    /// Children after parents (so prediction terminates), indices and features in range.
    fn check(&self, inputs: usize) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("a tree has no nodes".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            match n {
                TreeNode::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    let in_range = |c: &usize| *c > i && *c < self.nodes.len();
                    if *feature >= inputs || !threshold.is_finite() {
                        return Err(format!(
                            "tree node {i} splits on input {feature} of {inputs}"
                        ));
                    }
                    if !in_range(left) || !in_range(right) {
                        return Err(format!("tree node {i} has children {left}/{right}"));
                    }
                }
                TreeNode::Leaf { value } if !value.is_finite() => {
                    return Err(format!("tree leaf {i} is {value}"));
                }
                TreeNode::Leaf { .. } => {}
            }
        }
        Ok(())
    }
}

impl ModelKind {
    /// Prediction from standardised inputs, watts (not clamped). `None` for kinds that read raw
    /// inputs ([`ModelKind::UtilisationInterpolation`]).
    pub fn predict_scaled(&self, x: &[f64]) -> Option<f64> {
        let dot = |c: &[f64]| c.iter().zip(x).map(|(c, v)| c * v).sum::<f64>();
        Some(match self {
            ModelKind::Linear {
                intercept,
                coefficients,
            } => intercept + dot(coefficients),
            ModelKind::Polynomial {
                intercept,
                linear,
                quadratic,
            } => {
                let mut sum = intercept + dot(linear);
                let mut k = 0;
                for i in 0..x.len() {
                    for j in i..x.len() {
                        sum += quadratic[k] * x[i] * x[j];
                        k += 1;
                    }
                }
                sum
            }
            ModelKind::NearestNeighbours { k, points, targets } => {
                nearest_mean(*k, points, targets, x)
            }
            ModelKind::GradientBoosting {
                intercept,
                linear,
                learning_rate,
                trees,
            } => {
                intercept
                    + dot(linear)
                    + learning_rate * trees.iter().map(|t| t.predict(x)).sum::<f64>()
            }
            ModelKind::RandomForest { trees } => {
                trees.iter().map(|t| t.predict(x)).sum::<f64>() / trees.len() as f64
            }
            ModelKind::Ensemble { members } => {
                let mut sum = 0.0;
                for m in members {
                    sum += m.predict_scaled(x)?;
                }
                sum / members.len() as f64
            }
            ModelKind::UtilisationInterpolation { .. } => return None,
        })
    }

    /// Checks the parameters against the number of inputs.
    fn check(&self, inputs: usize) -> Result<(), String> {
        let count = |what: &str, got: usize, want: usize| {
            if got == want {
                Ok(())
            } else {
                Err(format!("{got} {what} for {want} inputs"))
            }
        };
        match self {
            ModelKind::Linear { coefficients, .. } => {
                count("coefficients", coefficients.len(), inputs)
            }
            ModelKind::Polynomial {
                linear, quadratic, ..
            } => {
                count("linear terms", linear.len(), inputs)?;
                count(
                    "quadratic terms",
                    quadratic.len(),
                    inputs * (inputs + 1) / 2,
                )
            }
            ModelKind::NearestNeighbours { k, points, targets } => {
                if *k == 0 || points.len() < *k || points.len() != targets.len() {
                    return Err(format!(
                        "k = {k} with {} points and {} targets",
                        points.len(),
                        targets.len()
                    ));
                }
                match points.iter().find(|p| p.len() != inputs) {
                    Some(p) => count("point coordinates", p.len(), inputs),
                    None => Ok(()),
                }
            }
            ModelKind::GradientBoosting { linear, trees, .. } => {
                if !linear.is_empty() {
                    count("linear terms", linear.len(), inputs)?;
                }
                trees.iter().try_for_each(|t| t.check(inputs))
            }
            ModelKind::RandomForest { trees } => {
                if trees.is_empty() {
                    return Err("a random forest without trees".into());
                }
                trees.iter().try_for_each(|t| t.check(inputs))
            }
            ModelKind::Ensemble { members } => {
                if members.is_empty() {
                    return Err("an ensemble without members".into());
                }
                if members
                    .iter()
                    .any(|m| matches!(m, ModelKind::UtilisationInterpolation { .. }))
                {
                    return Err("utilisation interpolation cannot be an ensemble member".into());
                }
                members.iter().try_for_each(|m| m.check(inputs))
            }
            ModelKind::UtilisationInterpolation { .. } => Ok(()),
        }
    }
}

/// Mean target of the `k` points nearest to `x` (squared Euclidean distance; ties keep the
/// earlier point).
fn nearest_mean(k: usize, points: &[Vec<f64>], targets: &[f64], x: &[f64]) -> f64 {
    // Bounded insertion into a sorted list: k is small, so this beats a heap.
    let mut best: Vec<(f64, f64)> = Vec::with_capacity(k + 1);
    'points: for (p, t) in points.iter().zip(targets) {
        // Stop summing once the point is already no closer than the k-th best so far.
        let bound = if best.len() == k {
            best[k - 1].0
        } else {
            f64::INFINITY
        };
        let mut d = 0.0;
        for (a, b) in p.iter().zip(x) {
            d += (a - b) * (a - b);
            if d >= bound {
                continue 'points;
            }
        }
        let at = best.partition_point(|(bd, _)| *bd <= d);
        best.insert(at, (d, *t));
        best.truncate(k);
    }
    best.iter().map(|(_, t)| t).sum::<f64>() / best.len().max(1) as f64
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

/// The interval a model's predictions are clamped into: the power range seen in training,
/// widened on each side by its width (at least a tenth of the highest training power), never
/// below 0 W.
///
/// Why clamp rather than only flag: a node without a meter has nothing to check a prediction
/// against, and one absurd value (330 W for a 5 W board, from a coefficient a feature that was
/// constant in training left unbounded) would go straight into the energy counters and the
/// carbon placement. Within the widened range a model still extrapolates to work heavier than
/// anything in training; beyond it the bound is the better estimate. Reports count the clamped
/// rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerBounds {
    /// Lowest prediction, watts.
    pub min_watts: f64,
    /// Highest prediction, watts.
    pub max_watts: f64,
}

impl PowerBounds {
    /// The bounds for training power between `lowest` and `highest` watts.
    pub fn from_training(lowest: f64, highest: f64) -> PowerBounds {
        let margin = (highest - lowest).max(0.1 * highest.abs());
        PowerBounds {
            min_watts: (lowest - margin).max(0.0),
            max_watts: highest + margin,
        }
    }

    /// `watts` clamped into the bounds, and whether it had to be.
    pub fn clamp(&self, watts: f64) -> (f64, bool) {
        let clamped = watts.clamp(self.min_watts, self.max_watts);
        (clamped, clamped != watts)
    }

    fn check(&self) -> Result<(), String> {
        if self.min_watts.is_finite()
            && self.max_watts.is_finite()
            && 0.0 <= self.min_watts
            && self.min_watts <= self.max_watts
        {
            Ok(())
        } else {
            Err(format!(
                "power_bounds [{}, {}] must be finite with 0 <= min <= max",
                self.min_watts, self.max_watts
            ))
        }
    }
}

/// `watts` (already floored at 0) inside `bounds` if any, and whether it was clamped.
fn bounded(watts: f64, bounds: Option<&PowerBounds>) -> (f64, bool) {
    match bounds {
        Some(b) => b.clamp(watts),
        None => (watts, false),
    }
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

/// One accepted recalibration of a [`NodeModel`]: which version it made from which, from whose
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

/// Standardised inputs in `features` order.
fn scale_inputs(features: &[FeatureScaling], raw: &FeatureValues) -> Result<Vec<f64>, ModelError> {
    features
        .iter()
        .map(|s| match raw.get(s.feature) {
            Some(v) if v.is_finite() => Ok((v - s.mean) / s.scale),
            _ => Err(ModelError::MissingFeature(s.feature.column())),
        })
        .collect()
}

/// Every scale finite and non-zero.
fn check_scaling(features: &[FeatureScaling]) -> Result<(), String> {
    match features
        .iter()
        .find(|s| !(s.scale.is_finite() && s.scale != 0.0))
    {
        Some(s) => Err(format!(
            "feature {} has scale {}",
            s.feature.column(),
            s.scale
        )),
        None => Ok(()),
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
            ModelKind::UtilisationInterpolation { cpus, max_watts } => {
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

    /// Standardised inputs in model order.
    pub fn scaled_inputs(&self, raw: &FeatureValues) -> Result<Vec<f64>, ModelError> {
        scale_inputs(&self.features, raw)
    }

    /// Predicted node power in watts, never below zero, inside the power bounds.
    pub fn predict(&self, raw: &FeatureValues) -> Result<f64, ModelError> {
        Ok(self.predict_bounded(raw)?.0)
    }

    /// As [`NodeModel::predict`], and whether the power bounds clamped the prediction.
    pub fn predict_bounded(&self, raw: &FeatureValues) -> Result<(f64, bool), ModelError> {
        let watts = match &self.regressor {
            ModelKind::UtilisationInterpolation { cpus, max_watts } => {
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
mod tests {
    use super::*;

    fn interp() -> NodeModel {
        NodeModel {
            name: "uncalibrated-test".into(),
            selector: NodeSelector {
                default: true,
                ..Default::default()
            },
            features: vec![],
            regressor: ModelKind::UtilisationInterpolation {
                cpus: 4.0,
                max_watts: 7.0,
            },
            idle_power_watts: 3.0,
            attribution_weights: vec![AttributionWeight {
                feature: Feature::CpuSecondsPerSecond,
                watts_per_unit: 1.0,
            }],
            training: None,
            scores: Scores::default(),
            source: None,
            baselines: vec![],
            power_bounds: None,
            recalibrations: vec![],
        }
    }

    #[test]
    fn interpolation_predicts_between_idle_and_max() {
        let m = interp();
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(2.0));
        assert_eq!(m.predict(&x), Ok(5.0));
        x.set(Feature::CpuSecondsPerSecond, Some(9.0));
        assert_eq!(m.predict(&x), Ok(7.0));
        x.set(Feature::CpuSecondsPerSecond, None);
        assert!(matches!(m.predict(&x), Err(ModelError::MissingFeature(_))));
    }

    #[test]
    fn round_trip_and_version_check() {
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![interp()],
        };
        let text = file.to_json();
        assert_eq!(ModelFile::from_json(&text).unwrap(), file);
        let old = text.replace("\"schema_version\": 1", "\"schema_version\": 99");
        assert_eq!(
            ModelFile::from_json(&old),
            Err(ModelError::SchemaVersion { found: 99 })
        );
        let unknown = text.replacen("\"models\"", "\"colour\": 1, \"models\"", 1);
        assert!(matches!(
            ModelFile::from_json(&unknown),
            Err(ModelError::Parse(_))
        ));
    }

    #[test]
    fn baselines_are_optional_checked_and_predict() {
        // A file written before baselines were stored still loads, with none.
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![interp()],
        };
        let text = file.to_json();
        assert!(!text.contains("baselines"));
        assert!(ModelFile::from_json(&text).unwrap().models[0]
            .baselines
            .is_empty());

        let mut m = interp();
        m.baselines.push(BaselineModel {
            name: "baseline_cpu_linear".into(),
            features: vec![FeatureScaling {
                feature: Feature::CpuSecondsPerSecond,
                mean: 1.0,
                scale: 2.0,
            }],
            regressor: ModelKind::Linear {
                intercept: 10.0,
                coefficients: vec![4.0],
            },
            power_bounds: None,
        });
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![m.clone()],
        };
        let back = ModelFile::from_json(&file.to_json()).unwrap();
        assert_eq!(back, file);
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(5.0));
        // 10 + 4 * (5 - 1) / 2
        assert_eq!(back.models[0].baselines[0].predict(&x), Ok(18.0));

        let mut bad = m.clone();
        bad.baselines[0].regressor = ModelKind::Linear {
            intercept: 0.0,
            coefficients: vec![1.0, 2.0],
        };
        assert!(matches!(bad.check(), Err(ModelError::Inconsistent { .. })));
        let mut bad = m;
        bad.baselines[0].features[0].scale = 0.0;
        assert!(matches!(bad.check(), Err(ModelError::Inconsistent { .. })));
    }

    #[test]
    fn negative_attribution_weight_is_refused() {
        let mut m = interp();
        m.attribution_weights[0].watts_per_unit = -0.5;
        assert!(matches!(m.check(), Err(ModelError::Inconsistent { .. })));
    }

    #[test]
    fn selection_prefers_name_then_labels_then_default() {
        let mut by_name = interp();
        by_name.name = "named".into();
        by_name.selector = NodeSelector {
            node: Some("pi-1".into()),
            ..Default::default()
        };
        let mut by_label = interp();
        by_label.name = "labelled".into();
        by_label.selector = NodeSelector {
            labels: [("board".to_string(), "rpi4".to_string())].into(),
            ..Default::default()
        };
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![interp(), by_label, by_name],
        };
        let rpi4: BTreeMap<String, String> = [("board".to_string(), "rpi4".to_string())].into();
        assert_eq!(file.select("pi-1", &rpi4).unwrap().name, "named");
        assert_eq!(file.select("pi-2", &rpi4).unwrap().name, "labelled");
        assert_eq!(
            file.select("pi-2", &BTreeMap::new()).unwrap().name,
            "uncalibrated-test"
        );
    }

    #[test]
    fn power_bounds_clamp_predictions_and_are_checked() {
        let b = PowerBounds::from_training(4.0, 7.0);
        assert_eq!((b.min_watts, b.max_watts), (1.0, 10.0));
        // A constant training power still leaves a tenth of it either side.
        let flat = PowerBounds::from_training(100.0, 100.0);
        assert_eq!((flat.min_watts, flat.max_watts), (90.0, 110.0));
        let mut m = scaled(ModelKind::Linear {
            intercept: 5.0,
            coefficients: vec![100.0, 0.0],
        });
        m.power_bounds = Some(b);
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(1.0));
        x.set(Feature::DiskBytesPerSecond, Some(1.0));
        assert_eq!(m.predict_bounded(&x), Ok((5.0, false)));
        x.set(Feature::CpuSecondsPerSecond, Some(7.0));
        assert_eq!(m.predict_bounded(&x), Ok((10.0, true)));
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![m.clone()],
        };
        assert_eq!(ModelFile::from_json(&file.to_json()).unwrap(), file);
        m.power_bounds = Some(PowerBounds {
            min_watts: 5.0,
            max_watts: 1.0,
        });
        assert!(m.check().is_err());
    }

    fn scaled(regressor: ModelKind) -> NodeModel {
        let mut m = interp();
        m.features = [Feature::CpuSecondsPerSecond, Feature::DiskBytesPerSecond]
            .into_iter()
            .map(|feature| FeatureScaling {
                feature,
                mean: 1.0,
                scale: 2.0,
            })
            .collect();
        m.regressor = regressor;
        m
    }

    fn input(cpu: f64, disk: f64) -> FeatureValues {
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(cpu));
        x.set(Feature::DiskBytesPerSecond, Some(disk));
        x
    }

    #[test]
    fn every_trained_kind_predicts_from_the_file_alone() {
        // Standardised inputs of (cpu 5, disk 3) are (2, 1).
        let x = input(5.0, 3.0);
        let tree = RegressionTree {
            nodes: vec![
                TreeNode::Split {
                    feature: 0,
                    threshold: 1.5,
                    left: 1,
                    right: 2,
                },
                TreeNode::Leaf { value: -1.0 },
                TreeNode::Leaf { value: 4.0 },
            ],
        };
        let cases = [
            (
                ModelKind::Polynomial {
                    intercept: 10.0,
                    linear: vec![1.0, 2.0],
                    quadratic: vec![0.5, 1.0, 3.0],
                },
                // 10 + 2 + 2 + 0.5*4 + 1*2 + 3*1
                21.0,
            ),
            (
                ModelKind::NearestNeighbours {
                    k: 2,
                    points: vec![vec![2.0, 1.1], vec![9.0, 9.0], vec![1.9, 1.0]],
                    targets: vec![10.0, 99.0, 20.0],
                },
                15.0,
            ),
            (
                ModelKind::GradientBoosting {
                    intercept: 100.0,
                    linear: vec![1.0, 0.0],
                    learning_rate: 0.5,
                    trees: vec![tree.clone(), tree.clone()],
                },
                106.0,
            ),
            (
                ModelKind::RandomForest {
                    trees: vec![tree.clone(), tree.clone()],
                },
                4.0,
            ),
            (
                ModelKind::Ensemble {
                    members: vec![
                        ModelKind::RandomForest { trees: vec![tree] },
                        ModelKind::Linear {
                            intercept: 1.0,
                            coefficients: vec![0.5, 1.0],
                        },
                    ],
                },
                // (4 + 3) / 2
                3.5,
            ),
        ];
        for (kind, want) in cases {
            let file = ModelFile {
                schema_version: SCHEMA_VERSION,
                models: vec![scaled(kind)],
            };
            let back = ModelFile::from_json(&file.to_json()).unwrap();
            assert_eq!(back, file);
            let got = back.models[0].predict(&x).unwrap();
            assert!((got - want).abs() < 1e-12, "{got} != {want}");
            assert_eq!(
                back.models[0].required_features(),
                vec![Feature::CpuSecondsPerSecond, Feature::DiskBytesPerSecond]
            );
        }
    }

    #[test]
    fn inconsistent_trained_kinds_are_refused() {
        let looping = RegressionTree {
            nodes: vec![TreeNode::Split {
                feature: 0,
                threshold: 0.0,
                left: 0,
                right: 0,
            }],
        };
        let bad = [
            ModelKind::Linear {
                intercept: 0.0,
                coefficients: vec![1.0],
            },
            ModelKind::Polynomial {
                intercept: 0.0,
                linear: vec![1.0, 1.0],
                quadratic: vec![1.0],
            },
            ModelKind::NearestNeighbours {
                k: 3,
                points: vec![vec![0.0, 0.0]],
                targets: vec![1.0],
            },
            ModelKind::RandomForest {
                trees: vec![looping],
            },
            ModelKind::RandomForest { trees: vec![] },
            ModelKind::Ensemble { members: vec![] },
            ModelKind::Ensemble {
                members: vec![ModelKind::UtilisationInterpolation {
                    cpus: 1.0,
                    max_watts: 9.0,
                }],
            },
        ];
        for kind in bad {
            let file = ModelFile {
                schema_version: SCHEMA_VERSION,
                models: vec![scaled(kind.clone())],
            };
            assert!(
                matches!(
                    ModelFile::from_json(&file.to_json()),
                    Err(ModelError::Inconsistent { .. })
                ),
                "{kind:?} accepted"
            );
        }
    }
}
