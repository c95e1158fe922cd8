//! Clamping of predictions into the power range seen in training.

use serde::{Deserialize, Serialize};

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

    pub(super) fn check(&self) -> Result<(), String> {
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
pub(super) fn bounded(watts: f64, bounds: Option<&PowerBounds>) -> (f64, bool) {
    match bounds {
        Some(b) => b.clamp(watts),
        None => (watts, false),
    }
}
