//! Standardisation of raw features into a model's inputs.

use serde::{Deserialize, Serialize};

use super::ModelError;
use crate::features::{Feature, FeatureValues};

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

/// Standardised inputs in `features` order.
pub(super) fn scale_inputs(
    features: &[FeatureScaling],
    raw: &FeatureValues,
) -> Result<Vec<f64>, ModelError> {
    features
        .iter()
        .map(|s| match raw.get(s.feature) {
            Some(v) if v.is_finite() => Ok((v - s.mean) / s.scale),
            _ => Err(ModelError::MissingFeature(s.feature.column())),
        })
        .collect()
}

/// Every scale finite and non-zero.
pub(super) fn check_scaling(features: &[FeatureScaling]) -> Result<(), String> {
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
