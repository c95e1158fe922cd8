//! Direct multi-horizon regression: one linear model per horizon h predicting y[o+h] from what
//! is known at origin o: the last values, the same hour on the previous days and week, and the
//! target's hour of day and weekday. Everything is divided by the mean of the last 24 h, so the
//! model learns shapes rather than levels and one set of weights serves a zone through the
//! seasons (and a 20 g/kWh zone and a 500 g/kWh zone alike).
//!
//! Fitting is ridge least squares with exponential forgetting ([`super::ridge::Ridge`]), so the
//! model follows seasonal change without a window parameter to tune per zone.

use super::ridge::Ridge;
use crate::series::Hourly;

/// Number of features.
pub const FEATURES: usize = 18;
/// History used when fitting for live forecasts (8 weeks).
pub const TRAINING_HOURS: usize = 24 * 56;
/// Per-sample forgetting factor: weight halves after ≈ 1390 h (≈ 8 weeks).
pub const FORGET: f64 = 0.9995;
/// Ridge penalty, in units of samples (all features are O(1) after scaling). Chosen from
/// {1, 5, 20} × forgetting {0.999, 0.9995, 1} on the 2022 EIA series (docs/carbon.md): 20
/// has the smallest worst-zone loss.
pub const LAMBDA: f64 = 20.0;
/// A model needs this much effective weight before it predicts.
pub const MIN_WEIGHT: f64 = 2.0 * FEATURES as f64;

/// Feature vector for origin `o` (last known hour) and horizon `h`, and the scale it was divided
/// by; `None` when an input is missing.
pub fn features(y: &Hourly, o: usize, h: usize) -> Option<([f64; FEATURES], f64)> {
    let o = o as i64;
    let t = o + h as i64;
    let day = 24 * h.div_ceil(24).max(1) as i64;
    let week = 168 * h.div_ceil(168).max(1) as i64;
    let (mut sum, mut n) = (0.0, 0);
    for i in o - 23..=o {
        if let Some(v) = y.get(i) {
            sum += v;
            n += 1;
        }
    }
    if n < 18 {
        return None;
    }
    let scale = sum / n as f64;
    if scale <= 0.0 {
        return None;
    }
    let (mut same_hour, mut m) = (0.0, 0);
    for j in 0..7 {
        if let Some(v) = y.get(t - day - 24 * j) {
            same_hour += v;
            m += 1;
        }
    }
    if m < 5 {
        return None;
    }
    let (mut wsum, mut wn) = (0.0, 0);
    for i in o - 167..=o {
        if let Some(v) = y.get(i) {
            wsum += v;
            wn += 1;
        }
    }
    if wn < 120 {
        return None;
    }
    let r = |v: f64| ((v + 1.0) / (scale + 1.0)).ln();
    let ts = y.start + 3600 * t;
    let hod = (ts / 3600).rem_euclid(24) as f64;
    let dow = (ts.div_euclid(86400) + 4).rem_euclid(7); // Sunday = 0: 1970-01-01 was a Thursday
    let angle = std::f64::consts::TAU * hod / 24.0;
    let (sin, cos) = angle.sin_cos();
    let yesterday = r(y.get(t - day)?);
    let profile = r(same_hour / m as f64);
    let x = [
        1.0,
        r(y.get(o)?),
        r(y.get(o - 1)?),
        r(y.get(o - 2)?),
        yesterday,
        r(y.get(t - day - 24)?),
        profile,
        r(y.get(t - week)?),
        r(wsum / wn as f64),
        sin,
        cos,
        (2.0 * angle).sin(),
        (2.0 * angle).cos(),
        if dow == 0 || dow == 6 { 1.0 } else { 0.0 },
        yesterday * sin,
        yesterday * cos,
        profile * sin,
        profile * cos,
    ];
    Some((x, scale))
}

/// A fitted set of per-horizon models.
#[derive(Debug, Clone)]
pub struct Regression {
    weights: Vec<Option<Vec<f64>>>,
}

impl Regression {
    /// Fits horizons 1..=72 on the `window` hours up to origin `o` (targets must be ≤ o).
    pub fn fit(y: &Hourly, o: usize, window: usize) -> Self {
        let max_h = super::MAX_HORIZON_HOURS + 24;
        let weights = (1..=max_h)
            .map(|h| {
                let mut r = Ridge::new(FEATURES, FORGET);
                let first = o.saturating_sub(window);
                for s in first..=o.saturating_sub(h) {
                    if s + h > o {
                        break;
                    }
                    Online::add_sample(&mut r, y, s, h);
                }
                (r.weight() >= MIN_WEIGHT)
                    .then(|| r.solve(LAMBDA))
                    .flatten()
            })
            .collect();
        Regression { weights }
    }

    /// Prediction for y[o+h].
    pub fn predict(&self, y: &Hourly, o: usize, h: usize) -> Option<f64> {
        let w = self.weights.get(h.checked_sub(1)?)?.as_ref()?;
        predict_with(w, y, o, h)
    }
}

/// The feature the model predicts relative to, so that the ridge penalty shrinks towards a
/// sensible baseline (not towards zero): the last value (persistence) for short horizons, the
/// same hour yesterday (seasonal-naive daily) from 12 h on.
fn anchor(h: usize) -> usize {
    if h < 12 {
        1
    } else {
        4
    }
}

/// Targets and lags are modelled as ln((v+1)/(scale+1)): squared error in log space is close to
/// squared relative error, which is what MAPE scores, and the +1 keeps zero readings finite.
fn to_log_ratio(v: f64, scale: f64) -> f64 {
    ((v.max(0.0) + 1.0) / (scale + 1.0)).ln()
}

fn from_log_ratio(r: f64, scale: f64) -> f64 {
    ((scale + 1.0) * r.exp() - 1.0).max(0.0)
}

fn predict_with(w: &[f64], y: &Hourly, o: usize, h: usize) -> Option<f64> {
    let (x, scale) = features(y, o, h)?;
    let log_ratio = x[anchor(h)] + x.iter().zip(w).map(|(a, b)| a * b).sum::<f64>();
    Some(from_log_ratio(log_ratio, scale))
}

/// One horizon's model updated hour by hour as the origin rolls forward (for backtests):
/// at origin o it learns from the sample whose target is y[o], and refits once a day.
#[derive(Debug, Clone)]
pub struct Online {
    h: usize,
    ridge: Ridge,
    weights: Option<Vec<f64>>,
}

impl Online {
    /// A model for horizon `h`.
    pub fn new(h: usize) -> Self {
        Online {
            h,
            ridge: Ridge::new(FEATURES, FORGET),
            weights: None,
        }
    }

    fn add_sample(r: &mut Ridge, y: &Hourly, s: usize, h: usize) {
        if let (Some((x, scale)), Some(target)) = (features(y, s, h), y.get((s + h) as i64)) {
            r.add(&x, to_log_ratio(target, scale) - x[anchor(h)]);
        }
    }

    /// Moves the origin to `o`: learns from everything whose target is now known.
    pub fn advance(&mut self, y: &Hourly, o: usize) {
        if let Some(s) = o.checked_sub(self.h) {
            Self::add_sample(&mut self.ridge, y, s, self.h);
        }
        if self.weights.is_none() || o.is_multiple_of(24) {
            self.weights = (self.ridge.weight() >= MIN_WEIGHT)
                .then(|| self.ridge.solve(LAMBDA))
                .flatten();
        }
    }

    /// Prediction for y[o+h] with what was learnt up to origin `o`.
    pub fn predict(&self, y: &Hourly, o: usize) -> Option<f64> {
        predict_with(self.weights.as_ref()?, y, o, self.h)
    }
}
