//! What the controller believes at each hour of the replay, per forecast method.
//!
//! At the start of grid hour `t` the values of hours before `t` are known (origin `t − 1`), and
//! the planner ranks the zones by their forecast for hour `t + horizon − 1`: with the default
//! horizon of 1 h, the hour the labels are about to govern. The methods are the crate's own
//! ([`crate::forecast`]); the regression is its online form, as in the backtest (learning only
//! from targets known at the origin, refitting daily), and falls back to seasonal-naive daily,
//! then weekly, as [`crate::forecast::forecast_zone`] does. The oracle reads the actual value.

use super::grid::Grid;
use crate::forecast::{regression::Online, seasonal_naive};

/// A forecast method the replay can drive the planner with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Forecast {
    /// Same hour the day before ([`crate::forecast::Method::SeasonalNaiveDaily`]).
    SeasonalNaive,
    /// Same hour the week before.
    SeasonalNaiveWeekly,
    /// The crate's regression, with its fallbacks.
    Regression,
    /// The actual value: perfect knowledge of the future.
    Oracle,
}

impl Forecast {
    /// Every method, in report order (the oracle last).
    pub const ALL: [Forecast; 4] = [
        Forecast::SeasonalNaive,
        Forecast::SeasonalNaiveWeekly,
        Forecast::Regression,
        Forecast::Oracle,
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Forecast::SeasonalNaive => "seasonal-naive",
            Forecast::SeasonalNaiveWeekly => "seasonal-naive-weekly",
            Forecast::Regression => "regression",
            Forecast::Oracle => "oracle",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Forecast> {
        Forecast::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// Zone `z`'s forecast for every grid hour (see the module docs), `None` where the method has
/// none (not enough history, a gap).
pub fn series(grid: &Grid, z: usize, method: Forecast, horizon: usize) -> Vec<Option<f64>> {
    let y = &grid.zones[z].hourly;
    let off = grid.offset[z];
    let mut online = (method == Forecast::Regression).then(|| Online::new(horizon));
    let mut learnt = 0usize; // origins the online model has seen
    (0..grid.hours)
        .map(|h| {
            let o = (off + h).checked_sub(1)?;
            match method {
                Forecast::SeasonalNaive => seasonal_naive(y, o, horizon, 24),
                Forecast::SeasonalNaiveWeekly => seasonal_naive(y, o, horizon, 168),
                Forecast::Oracle => y.get((o + horizon) as i64),
                Forecast::Regression => {
                    let model = online.as_mut()?;
                    while learnt <= o {
                        model.advance(y, learnt);
                        learnt += 1;
                    }
                    model
                        .predict(y, o)
                        .or_else(|| seasonal_naive(y, o, horizon, 24))
                        .or_else(|| seasonal_naive(y, o, horizon, 168))
                }
            }
        })
        .collect()
}

/// Mean absolute error (gCO2/kWh) of each forecast against the actual target, over the hours
/// where the actual and every given forecast exist (so all are scored on the same hours), and
/// the number of those hours.
pub fn mae(
    grid: &Grid,
    z: usize,
    forecasts: &[&[Option<f64>]],
    horizon: usize,
) -> (Vec<f64>, usize) {
    let y = &grid.zones[z].hourly;
    let off = grid.offset[z];
    let mut sums = vec![0.0; forecasts.len()];
    let mut n = 0usize;
    for h in 0..grid.hours {
        let Some(actual) = y.get((off + h + horizon) as i64 - 1) else {
            continue;
        };
        let values: Option<Vec<f64>> = forecasts.iter().map(|f| f[h]).collect();
        let Some(values) = values else { continue };
        for (s, v) in sums.iter_mut().zip(values) {
            *s += (v - actual).abs();
        }
        n += 1;
    }
    let d = n.max(1) as f64;
    (
        sums.into_iter()
            .map(|s| if n == 0 { f64::NAN } else { s / d })
            .collect(),
        n,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::grid::Zone;
    use crate::series::Hourly;

    #[test]
    fn each_method_sees_only_the_past_except_the_oracle() {
        let values: Vec<Option<f64>> = (0..24 * 10).map(|i| Some(i as f64)).collect();
        let grid = Grid::new(vec![Zone {
            name: "A".into(),
            hourly: Hourly { start: 0, values },
        }])
        .unwrap();
        let sn = series(&grid, 0, Forecast::SeasonalNaive, 1);
        assert_eq!(sn[0], None);
        assert_eq!(sn[23], None);
        // Hour 30, origin 29: same hour yesterday is hour 6.
        assert_eq!(sn[30], Some(6.0));
        let w = series(&grid, 0, Forecast::SeasonalNaiveWeekly, 1);
        assert_eq!(w[200], Some(32.0));
        let o = series(&grid, 0, Forecast::Oracle, 1);
        assert_eq!(o[30], Some(30.0));
        assert_eq!(o[0], None, "no origin before the first hour");
        // Horizon 3 at hour 30: the target is hour 32.
        assert_eq!(series(&grid, 0, Forecast::Oracle, 3)[30], Some(32.0));
        let r = series(&grid, 0, Forecast::Regression, 1);
        assert_eq!(
            r[30],
            Some(6.0),
            "before the model has weight it falls back to naive"
        );
        let (m, n) = mae(&grid, 0, &[&sn, &o], 1);
        assert_eq!(n, 24 * 10 - 24);
        assert_eq!(m, vec![24.0, 0.0]);
    }
}
