//! The refit: an affine correction `measured ≈ offset + gain · prediction` of the current model,
//! fitted on the recent metered window and folded into the model's own parameters.
//!
//! Why this and not the full candidate search of `train`: the drifts a fleet sees after
//! training (a new kernel or governor, a replaced power supply, ambient temperature) move the
//! idle floor and scale dynamic power; they do not change which features explain power. Two
//! parameters fitted on minutes of data are well determined where a new tree ensemble on the
//! same minutes would overfit the workload mix of that window, and the fit costs microseconds
//! instead of minutes of CPU on a Pi (figures in docs/benchmarks.md, "Recalibration").
//!
//! Every model kind is linear in its outputs (leaves, targets, coefficients), so the corrected
//! model is the same kind with changed parameters (`NodeModel::folded`, beside the prediction in
//! `greenpipe_common::model`): a recalibrated file loads in every build that reads schema 1, and
//! predicts with no extra cost per tick.

use greenpipe_common::model::NodeModel;
use greenpipe_common::trace::TraceRow;

/// A fitted correction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    /// Watts added.
    pub offset_watts: f64,
    /// Factor on the prediction.
    pub gain: f64,
}

/// The three shapes of correction, from the fewest parameters up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Dynamic power scaled, idle kept: `idle + gain · (prediction - idle)` (a governor, a new
    /// workload class, a hotter room).
    DynamicGain,
    /// Everything shifted: `offset + prediction` (a different power supply or USB cable).
    Offset,
    /// Both: `offset + gain · prediction`.
    Affine,
}

impl Shape {
    /// Its name in reports and lineage.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::DynamicGain => "dynamic_gain",
            Shape::Offset => "offset",
            Shape::Affine => "affine",
        }
    }

    fn parameters(self) -> f64 {
        match self {
            Shape::DynamicGain | Shape::Offset => 1.0,
            Shape::Affine => 2.0,
        }
    }
}

/// BIC differences below this are not evidence for either shape (Kass & Raftery's "not worth
/// more than a bare mention").
pub const BIC_TIE: f64 = 2.0;

/// Least spread of the window's predictions, `(max - min) / mean`, for its shapes to be told
/// apart. Below it (a node at nearly constant load) a gain and an offset explain the window
/// equally well whatever the BIC says: the BIC's residuals are then mostly the meter's and the
/// rate window's misalignment, not independent noise, and it picked the offset in the drift
/// test, 28 % off the validation traces against about 9 % for the dynamic gain.
pub const MIN_SPREAD: f64 = 0.2;

/// Whether the window's predictions spread enough for BIC to choose the shape.
pub fn identifiable(predicted: &[f64]) -> bool {
    let (min, max) = predicted
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(*p), hi.max(*p))
        });
    let mean = predicted.iter().sum::<f64>() / predicted.len().max(1) as f64;
    mean > 0.0 && (max - min) / mean >= MIN_SPREAD
}

/// Every shape fitted on the rows, with its BIC (`n ln(SSE/n) + k ln n`), lowest first.
///
/// A recent window usually covers a narrow range of load, where the two-parameter fit matches
/// the window no better than a one-parameter one but extrapolates wildly outside it, and where
/// on a node at constant load a gain and an offset explain the window equally well. The caller
/// ([`super::judge`]) therefore takes, among the shapes within [`BIC_TIE`] of the best, the one
/// that stays closest to the original validation traces.
pub fn candidates(predicted: &[f64], measured: &[f64], idle: f64) -> Vec<(Shape, Affine, f64)> {
    let n = predicted.len().min(measured.len());
    if n < 3 {
        return Vec::new();
    }
    let nf = n as f64;
    let mut out = Vec::new();
    // Dynamic gain: y - idle = g (p - idle), least squares through the pivot.
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (&p, &y) in predicted.iter().zip(measured) {
        sxy += (p - idle) * (y - idle);
        sxx += (p - idle) * (p - idle);
    }
    if sxx > 0.0 {
        let g = sxy / sxx;
        out.push((
            Shape::DynamicGain,
            Affine {
                offset_watts: idle * (1.0 - g),
                gain: g,
            },
        ));
    }
    let mean_diff = predicted
        .iter()
        .zip(measured)
        .map(|(p, y)| y - p)
        .sum::<f64>()
        / nf;
    out.push((
        Shape::Offset,
        Affine {
            offset_watts: mean_diff,
            gain: 1.0,
        },
    ));
    if let Some(a) = fit(predicted, measured) {
        out.push((Shape::Affine, a));
    }
    let bic = |shape: Shape, c: &Affine| {
        let sse: f64 = predicted
            .iter()
            .zip(measured)
            .map(|(p, y)| (y - c.offset_watts - c.gain * p).powi(2))
            .sum();
        nf * (sse.max(1e-12) / nf).ln() + shape.parameters() * nf.ln()
    };
    let mut out: Vec<(Shape, Affine, f64)> = out
        .into_iter()
        .filter(|(_, c)| c.offset_watts.is_finite() && c.gain.is_finite())
        .map(|(s, c)| (s, c, bic(s, &c)))
        .collect();
    out.sort_by(|a, b| a.2.total_cmp(&b.2));
    out
}

/// The shape with the lowest BIC (see [`candidates`]).
pub fn fit_best(predicted: &[f64], measured: &[f64], idle: f64) -> Option<(Shape, Affine)> {
    candidates(predicted, measured, idle)
        .first()
        .map(|(s, c, _)| (*s, *c))
}

/// Ridge strength pulling the fit toward "no correction" (offset 0, gain 1), relative to the
/// data's own scale. It only matters when the window's predictions hardly vary (a node at
/// constant load), where offset and gain cannot be told apart.
const PRIOR: f64 = 1e-3;

/// Least-squares fit of `measured ≈ offset + gain · predicted`, with a weak prior toward the
/// identity. `None` with fewer than 3 points or a non-finite answer.
pub fn fit(predicted: &[f64], measured: &[f64]) -> Option<Affine> {
    let n = predicted.len().min(measured.len());
    if n < 3 {
        return None;
    }
    let (mut sp, mut spp, mut sy, mut spy) = (0.0, 0.0, 0.0, 0.0);
    for (&p, &y) in predicted.iter().zip(measured) {
        sp += p;
        spp += p * p;
        sy += y;
        spy += p * y;
    }
    let nf = n as f64;
    let (la, lb) = (PRIOR * nf, PRIOR * spp);
    // (XᵀX + Λ) θ = Xᵀy + Λ θ₀ with θ₀ = (0, 1).
    let (a11, a12, a22) = (nf + la, sp, spp + lb);
    let (b1, b2) = (sy, spy + lb);
    let det = a11 * a22 - a12 * a12;
    let offset = (b1 * a22 - a12 * b2) / det;
    let gain = (a11 * b2 - a12 * b1) / det;
    (offset.is_finite() && gain.is_finite()).then_some(Affine {
        offset_watts: offset,
        gain,
    })
}

/// `model` with `c` folded into its parameters: it predicts `offset + gain · old` (before the
/// clamp at 0 W). `None` when the gain is not positive (a model that falls as load rises is
/// refused, not written).
pub fn apply(model: &NodeModel, c: Affine) -> Option<NodeModel> {
    if c.gain <= 0.0 {
        return None;
    }
    let out = model.folded(c.offset_watts, c.gain);
    out.check().ok()?;
    Some(out)
}

/// `(measured, predicted)` of the rows the model can predict and that have a meter reading > 0.
pub fn pairs(model: &NodeModel, rows: &[TraceRow]) -> (Vec<f64>, Vec<f64>) {
    let (mut measured, mut predicted) = (Vec::new(), Vec::new());
    for r in rows {
        let Some(y) = r.power_watts.filter(|y| *y > 0.0 && y.is_finite()) else {
            continue;
        };
        if let Ok(p) = model.predict(&r.features) {
            measured.push(y);
            predicted.push(p);
        }
    }
    (measured, predicted)
}

/// MAPE (percent) of `model` on `rows`, and the rows scored; `None` if none could be.
pub fn mape_percent(model: &NodeModel, rows: &[TraceRow]) -> Option<(f64, usize)> {
    let (measured, predicted) = pairs(model, rows);
    (!measured.is_empty()).then(|| {
        let s = greenpipe_offline::metrics::score(&measured, &predicted);
        (s.mape_percent, s.samples)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_an_exact_affine_drift_and_a_constant_load_stays_sane() {
        let p: Vec<f64> = (0..50).map(|i| 3.0 + 0.1 * i as f64).collect();
        let y: Vec<f64> = p.iter().map(|p| 0.4 + 1.15 * p).collect();
        let c = fit(&p, &y).unwrap();
        assert!((c.gain - 1.15).abs() < 0.01, "{c:?}");
        assert!((c.offset_watts - 0.4).abs() < 0.05, "{c:?}");
        // All predictions equal: offset and gain share the 10 % between them, and the corrected
        // prediction matches the meter.
        let c = fit(&[5.0; 20], &[5.5; 20]).unwrap();
        assert!((c.offset_watts + c.gain * 5.0 - 5.5).abs() < 0.01, "{c:?}");
        assert!(c.gain > 0.9 && c.gain < 1.2, "{c:?}");
        assert!(fit(&[1.0, 2.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn the_simplest_shape_that_explains_the_window_wins() {
        let idle = 1.5;
        let p: Vec<f64> = (0..30).map(|i| 3.0 + 0.05 * i as f64).collect();
        // Dynamic power +15 %, a little noise.
        let wobble = |i: usize| 0.01 * ((i % 3) as f64 - 1.0);
        let y: Vec<f64> = p
            .iter()
            .enumerate()
            .map(|(i, p)| idle + 1.15 * (p - idle) + wobble(i))
            .collect();
        let (shape, c) = fit_best(&p, &y, idle).unwrap();
        assert_eq!(shape, Shape::DynamicGain, "{c:?}");
        assert!((c.gain - 1.15).abs() < 0.01, "{c:?}");
        // A constant 0.4 W more.
        let y: Vec<f64> = p
            .iter()
            .enumerate()
            .map(|(i, p)| p + 0.4 + wobble(i))
            .collect();
        let (shape, c) = fit_best(&p, &y, idle).unwrap();
        assert_eq!(shape, Shape::Offset, "{c:?}");
        // Both, over a wide range of load: the affine fit earns its second parameter.
        let p: Vec<f64> = (0..60).map(|i| 1.5 + 0.1 * i as f64).collect();
        let y: Vec<f64> = p
            .iter()
            .enumerate()
            .map(|(i, p)| 0.5 + 1.3 * p + wobble(i))
            .collect();
        assert_eq!(fit_best(&p, &y, idle).unwrap().0, Shape::Affine);
    }

    /// The folding itself is tested per kind in `greenpipe_common::model`; here, what `apply`
    /// adds: a model that would fall as load rises is refused.
    #[test]
    fn apply_folds_a_positive_gain_and_refuses_the_rest() {
        let m = crate::models::load(None).unwrap().models.remove(0);
        let c = Affine {
            offset_watts: 0.3,
            gain: 1.15,
        };
        assert_eq!(apply(&m, c), Some(m.folded(0.3, 1.15)));
        for gain in [0.0, -1.0] {
            let c = Affine {
                offset_watts: 0.0,
                gain,
            };
            assert!(apply(&m, c).is_none(), "gain {gain}");
        }
    }
}
