//! Forecasting grid carbon intensity per zone, up to [`MAX_HORIZON_HOURS`] ahead.
//!
//! Methods: the provider's own forecast when it publishes one; seasonal-naive daily (same hour
//! yesterday) and weekly (same hour last week); and [`regression`], a direct multi-horizon
//! linear model on lagged and calendar features, which the backtest shows beats both baselines
//! (docs/carbon.md). All work on the dense hourly grid [`Hourly`]; a missing input gives no
//! forecast rather than a guess.

pub mod regression;
pub mod ridge;

use crate::series::{Hourly, Series};

/// The furthest horizon we forecast.
pub const MAX_HORIZON_HOURS: usize = 48;

/// A forecasting method; `name()` is what reports and metrics call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// The value 24·k hours before the target (k = ⌈h/24⌉).
    SeasonalNaiveDaily,
    /// The value 168·k hours before the target.
    SeasonalNaiveWeekly,
    /// [`regression::Regression`].
    Regression,
    /// The provider's published forecast.
    Provider,
}

impl Method {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Method::SeasonalNaiveDaily => "seasonal_naive_daily",
            Method::SeasonalNaiveWeekly => "seasonal_naive_weekly",
            Method::Regression => "regression",
            Method::Provider => "provider",
        }
    }
}

/// Seasonal-naive: the last value one whole number of `period`s before the target.
pub fn seasonal_naive(h: &Hourly, origin: usize, horizon: usize, period: usize) -> Option<f64> {
    let k = horizon.div_ceil(period).max(1);
    h.get(origin as i64 + horizon as i64 - (k * period) as i64)
}

/// One forecast value and who made it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Predicted {
    /// Target hour start, unix seconds.
    pub time: i64,
    /// gCO2/kWh.
    pub value: f64,
    /// Which method produced it.
    pub method: Method,
}

/// Forecast of one zone for the hours after `now`, up to 48 h: the provider's forecast where it
/// covers an hour, else the regression fitted on `actual`'s recent history, else seasonal-naive
/// daily, else weekly. Hours none of them can cover are left out (and so visible as gaps).
pub fn forecast_zone(actual: &Series, provider: Option<&Series>, now: i64) -> Vec<Predicted> {
    let hourly = actual.hourly();
    let origin = hourly.last_valued_at_or_before(now);
    let model = origin.map(|o| regression::Regression::fit(&hourly, o, regression::TRAINING_HOURS));
    let provider = provider.map(Series::hourly);
    let first_hour = now.div_euclid(3600) * 3600;
    let mut out = Vec::with_capacity(MAX_HORIZON_HOURS + 1);
    for k in 0..=MAX_HORIZON_HOURS as i64 {
        let time = first_hour + 3600 * k;
        if let Some(v) = provider.as_ref().and_then(|p| p.get(p.index(time)? as i64)) {
            out.push(Predicted {
                time,
                value: v,
                method: Method::Provider,
            });
            continue;
        }
        let (Some(o), Some(model)) = (origin, &model) else {
            continue;
        };
        let h = (time - hourly.time(o)) / 3600;
        if h <= 0 || h > (MAX_HORIZON_HOURS + 24) as i64 {
            continue;
        }
        let h = h as usize;
        let candidates = [
            (model.predict(&hourly, o, h), Method::Regression),
            (
                seasonal_naive(&hourly, o, h, 24),
                Method::SeasonalNaiveDaily,
            ),
            (
                seasonal_naive(&hourly, o, h, 168),
                Method::SeasonalNaiveWeekly,
            ),
        ];
        if let Some((Some(value), method)) = candidates.into_iter().find(|(v, _)| v.is_some()) {
            out.push(Predicted {
                time,
                value,
                method,
            });
        }
    }
    out
}

/// The forecast value for the hour containing `t`.
pub fn at(forecast: &[Predicted], t: i64) -> Option<Predicted> {
    let hour = t.div_euclid(3600) * 3600;
    forecast.iter().find(|p| p.time == hour).copied()
}
