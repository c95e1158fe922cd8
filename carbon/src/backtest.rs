//! Rolling-origin backtest: at every hour o after a warm-up, each method forecasts y[o+h] from
//! data up to o only; the regression learns online from targets ≤ o. A sample counts only when
//! the actual value and every method's forecast exist, so all methods are scored on the same
//! hours (a method cannot look better by skipping hard ones). Gaps are skipped, never filled.

use crate::forecast::{regression::Online, seasonal_naive, Method};
use crate::series::Hourly;

/// Methods scored by the backtest, in report order.
pub const METHODS: [Method; 3] = [
    Method::SeasonalNaiveDaily,
    Method::SeasonalNaiveWeekly,
    Method::Regression,
];

/// Header of `summary.csv`.
pub const SUMMARY_HEADER: &str = "zone,method,horizon_hours,samples,mape_percent,mae";

/// Backtest settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Horizons to score, hours.
    pub horizons: Vec<usize>,
    /// Hours at the start used only for learning (weekly lags need ≥ 2 weeks).
    pub warmup_hours: usize,
    /// Horizon whose forecasts are kept for plotting.
    pub trace_horizon: usize,
}

/// One line of `summary.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Zone.
    pub zone: String,
    /// Method.
    pub method: Method,
    /// Horizon, hours.
    pub horizon_hours: usize,
    /// Scored samples (same for every method of a zone and horizon).
    pub samples: usize,
    /// Mean absolute percentage error, %.
    pub mape_percent: f64,
    /// Mean absolute error, gCO2/kWh.
    pub mae: f64,
}

impl Row {
    /// The CSV line (no newline); a zone name that needs it is quoted (RFC 4180).
    pub fn csv(&self) -> String {
        let mut out = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        let record = [
            self.zone.clone(),
            self.method.name().to_string(),
            self.horizon_hours.to_string(),
            self.samples.to_string(),
            format!("{:.3}", self.mape_percent),
            format!("{:.3}", self.mae),
        ];
        // Writing into a `Vec` cannot fail, and every cell is UTF-8.
        out.write_record(&record).expect("writing CSV into memory");
        let bytes = out.into_inner().expect("writing CSV into memory");
        String::from_utf8(bytes)
            .expect("CSV of UTF-8 cells is UTF-8")
            .trim_end_matches('\n')
            .to_string()
    }
}

/// Forecasts at the trace horizon, for plots: (target time, actual, one value per [`METHODS`]).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Horizon of these forecasts.
    pub horizon: usize,
    /// (target unix time, actual, forecasts in [`METHODS`] order).
    pub points: Vec<(i64, f64, [f64; 3])>,
}

/// Result for one zone.
#[derive(Debug, Clone)]
pub struct ZoneResult {
    /// Summary rows, horizon-major, [`METHODS`] order.
    pub rows: Vec<Row>,
    /// Forecasts at the trace horizon.
    pub trace: Trace,
    /// Hours with no value in the series (reported, not filled).
    pub missing_hours: usize,
}

/// Runs the backtest on one zone.
pub fn run(zone: &str, y: &Hourly, cfg: &Config) -> ZoneResult {
    let n = y.values.len();
    let mut rows = Vec::new();
    let mut trace = Trace {
        horizon: cfg.trace_horizon,
        points: Vec::new(),
    };
    for &h in &cfg.horizons {
        let mut model = Online::new(h);
        let mut abs = [0.0; 3];
        let mut pct = [0.0; 3];
        let mut samples = 0usize;
        for o in 0..n {
            model.advance(y, o);
            if o < cfg.warmup_hours || o + h >= n {
                continue;
            }
            let Some(actual) = y.get((o + h) as i64) else {
                continue;
            };
            if actual <= 0.0 {
                continue; // MAPE is undefined at zero
            }
            let preds = [
                seasonal_naive(y, o, h, 24),
                seasonal_naive(y, o, h, 168),
                model.predict(y, o),
            ];
            let [Some(a), Some(b), Some(c)] = preds else {
                continue;
            };
            let preds = [a, b, c];
            for (k, p) in preds.iter().enumerate() {
                abs[k] += (p - actual).abs();
                pct[k] += (p - actual).abs() / actual;
            }
            samples += 1;
            if h == cfg.trace_horizon {
                trace.points.push((y.time(o + h), actual, preds));
            }
        }
        for (k, method) in METHODS.iter().enumerate() {
            let s = samples.max(1) as f64;
            rows.push(Row {
                zone: zone.to_string(),
                method: *method,
                horizon_hours: h,
                samples,
                mape_percent: if samples == 0 {
                    f64::NAN
                } else {
                    100.0 * pct[k] / s
                },
                mae: if samples == 0 { f64::NAN } else { abs[k] / s },
            });
        }
    }
    let missing_hours = y.values.iter().filter(|v| v.is_none()).count();
    ZoneResult {
        rows,
        trace,
        missing_hours,
    }
}

/// Horizons scored for `--horizon H`: the usual checkpoints up to H, and H itself.
pub fn horizons_up_to(h: usize) -> Vec<usize> {
    let mut hs: Vec<usize> = [1, 2, 3, 6, 12, 24, 36, 48]
        .into_iter()
        .filter(|&x| x <= h)
        .collect();
    if !hs.contains(&h) {
        hs.push(h);
    }
    hs
}

/// Improvement of the regression over the better seasonal-naive baseline at horizon `h`, as a
/// fraction of the baseline's MAPE (0.2 = 20 % lower MAPE). `None` if the horizon was not run.
pub fn improvement(rows: &[Row], h: usize) -> Option<(f64, Method)> {
    let get = |m: Method| {
        rows.iter()
            .find(|r| r.horizon_hours == h && r.method == m)
            .map(|r| r.mape_percent)
    };
    let reg = get(Method::Regression)?;
    let (base, which) = [Method::SeasonalNaiveDaily, Method::SeasonalNaiveWeekly]
        .into_iter()
        .filter_map(|m| get(m).map(|v| (v, m)))
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((1.0 - reg / base, which))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series with a daily shape, a weekly shape and a slow trend: the regression must learn
    /// the trend the seasonal-naive baselines cannot.
    #[test]
    fn regression_beats_naive_on_a_trending_daily_pattern() {
        let n = 24 * 70;
        let values = (0..n)
            .map(|i| {
                let hod = (i % 24) as f64;
                let day = (i / 24) as f64;
                let weekend = if (i / 24) % 7 >= 5 { -30.0 } else { 0.0 };
                Some(
                    300.0 + 80.0 * (std::f64::consts::TAU * hod / 24.0).sin() + 2.0 * day + weekend,
                )
            })
            .collect();
        let y = Hourly { start: 0, values };
        let cfg = Config {
            horizons: vec![24],
            warmup_hours: 24 * 21,
            trace_horizon: 24,
        };
        let r = run("T", &y, &cfg);
        assert_eq!(r.rows.len(), 3);
        let (gain, _) = improvement(&r.rows, 24).unwrap();
        assert!(gain > 0.1, "{:?}", r.rows);
        assert!(
            r.rows[2].mae < r.rows[0].mae && r.rows[2].mae < r.rows[1].mae,
            "{:?}",
            r.rows
        );
        assert_eq!(r.trace.points.len(), r.rows[0].samples);
        assert_eq!(r.missing_hours, 0);
    }

    #[test]
    fn gaps_are_skipped_for_every_method_alike() {
        let mut values: Vec<Option<f64>> = (0..24 * 30)
            .map(|i| Some(100.0 + (i % 24) as f64))
            .collect();
        for v in values.iter_mut().skip(24 * 25).take(5) {
            *v = None;
        }
        let y = Hourly { start: 0, values };
        let cfg = Config {
            horizons: vec![1],
            warmup_hours: 24 * 21,
            trace_horizon: 1,
        };
        let r = run("G", &y, &cfg);
        assert_eq!(r.missing_hours, 5);
        let samples: Vec<usize> = r.rows.iter().map(|r| r.samples).collect();
        assert!(samples.iter().all(|&s| s == samples[0]));
        // 24*9 - 1 origins, minus the hours whose target, lags or features fall in the gap.
        assert!(samples[0] < 24 * 9 - 1 - 5, "{samples:?}");
    }

    #[test]
    fn horizon_checkpoints() {
        assert_eq!(horizons_up_to(24), vec![1, 2, 3, 6, 12, 24]);
        assert_eq!(horizons_up_to(5), vec![1, 2, 3, 5]);
    }
}
