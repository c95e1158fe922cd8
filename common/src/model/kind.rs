//! The model families: their parameters as stored, their checks against the inputs, and their
//! prediction from standardised inputs.

use serde::{Deserialize, Serialize};

use super::tree::RegressionTree;

/// Model families and their parameters. Features are the standardised inputs, in the order of
/// [`NodeModel::features`](super::NodeModel::features).
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
        /// Logical CPUs of the board (of the machine measured, when scaled to the node's CPUs).
        cpus: f64,
        /// Power at full load, watts.
        max_watts: f64,
        /// Idle and full-load power are per `cpus` CPUs and scale with the CPUs of the node
        /// predicted for ([`NodeModel::for_node_cpus`](super::NodeModel::for_node_cpus)): a
        /// profile made from per-vCPU figures, or from a server with another CPU count. Absent:
        /// the figures are the node's own.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        scale_to_node_cpus: bool,
    },
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

    /// This model with an affine correction folded into its parameters: it predicts
    /// `offset + gain · old` where this one predicts `old`. Every kind is linear in its outputs
    /// (coefficients, leaves, neighbour targets), so the corrected model is the same kind, loads
    /// wherever this one does and costs nothing extra per prediction. A utilisation
    /// interpolation's idle power is its [`NodeModel`](super::NodeModel)'s:
    /// [`NodeModel::folded`](super::NodeModel::folded) corrects both.
    pub fn folded(&self, offset: f64, gain: f64) -> ModelKind {
        let times = |v: &[f64]| v.iter().map(|x| gain * x).collect::<Vec<_>>();
        match self {
            ModelKind::Linear {
                intercept,
                coefficients,
            } => ModelKind::Linear {
                intercept: offset + gain * intercept,
                coefficients: times(coefficients),
            },
            ModelKind::Polynomial {
                intercept,
                linear,
                quadratic,
            } => ModelKind::Polynomial {
                intercept: offset + gain * intercept,
                linear: times(linear),
                quadratic: times(quadratic),
            },
            ModelKind::NearestNeighbours { k, points, targets } => ModelKind::NearestNeighbours {
                k: *k,
                points: points.clone(),
                targets: targets.iter().map(|t| offset + gain * t).collect(),
            },
            // The offset goes into the base; the trees, shrunk by the learning rate, only scale.
            ModelKind::GradientBoosting {
                intercept,
                linear,
                learning_rate,
                trees,
            } => ModelKind::GradientBoosting {
                intercept: offset + gain * intercept,
                linear: times(linear),
                learning_rate: *learning_rate,
                trees: trees.iter().map(|t| t.affine(0.0, gain)).collect(),
            },
            ModelKind::RandomForest { trees } => ModelKind::RandomForest {
                trees: trees.iter().map(|t| t.affine(offset, gain)).collect(),
            },
            // The mean of corrected members is the corrected mean.
            ModelKind::Ensemble { members } => ModelKind::Ensemble {
                members: members.iter().map(|m| m.folded(offset, gain)).collect(),
            },
            ModelKind::UtilisationInterpolation {
                cpus,
                max_watts,
                scale_to_node_cpus,
            } => ModelKind::UtilisationInterpolation {
                cpus: *cpus,
                max_watts: offset + gain * max_watts,
                scale_to_node_cpus: *scale_to_node_cpus,
            },
        }
    }

    /// Checks the parameters against the number of inputs.
    pub(super) fn check(&self, inputs: usize) -> Result<(), String> {
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
