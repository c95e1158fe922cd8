//! The questions the reference design could not answer: which zone is cleanest at a horizon,
//! when in the next 48 h a job of a given length should start, and whether a zone has been low
//! for the past N hours. Pure functions over forecasts and series; gaps make an answer partial
//! and say so, they never count as "low".

use crate::forecast::Predicted;
use crate::series::Hourly;

/// Zones ranked by their forecast at one time; zones without a forecast come last.
pub fn rank_zones<'a>(
    forecasts: impl IntoIterator<Item = (&'a str, Option<Predicted>)>,
) -> Vec<(&'a str, Option<Predicted>)> {
    let mut v: Vec<_> = forecasts.into_iter().collect();
    v.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => x.value.total_cmp(&y.value).then(a.0.cmp(b.0)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.0.cmp(b.0),
    });
    v
}

/// The best start for a job of `hours` hours: the run of consecutive forecast hours with the
/// lowest mean. Starts at or after `now`'s hour; windows over a missing hour are not considered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Start, unix seconds (an hour boundary).
    pub start: i64,
    /// Mean forecast over the window, gCO2/kWh.
    pub mean: f64,
    /// Mean if the job started right now instead (same length), if known.
    pub start_now_mean: Option<f64>,
}

/// See [`Window`].
pub fn best_window(forecast: &[Predicted], hours: usize, now: i64) -> Option<Window> {
    if hours == 0 {
        return None;
    }
    let first = now.div_euclid(3600) * 3600;
    let mut pts: Vec<&Predicted> = forecast.iter().filter(|p| p.time >= first).collect();
    pts.sort_by_key(|p| p.time);
    let mean_from = |i: usize| -> Option<f64> {
        let run = pts.get(i..i + hours)?;
        let contiguous = run.windows(2).all(|w| w[1].time - w[0].time == 3600);
        contiguous.then(|| run.iter().map(|p| p.value).sum::<f64>() / hours as f64)
    };
    let start_now_mean = pts
        .first()
        .filter(|p| p.time == first)
        .and_then(|_| mean_from(0));
    (0..pts.len())
        .filter_map(|i| mean_from(i).map(|m| (pts[i].time, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(start, mean)| Window {
            start,
            mean,
            start_now_mean,
        })
}

/// Answer to "has zone Z been low for the past N hours?".
#[derive(Debug, Clone, PartialEq)]
pub struct LowSince {
    /// The bound used, gCO2/kWh.
    pub threshold: f64,
    /// Where the threshold came from.
    pub threshold_source: String,
    /// Start of the current uninterrupted run of low hours ending at the last observed hour
    /// (`None` if the last observed hour is not low).
    pub low_since: Option<i64>,
    /// Hours in the asked window that were low.
    pub low_hours: usize,
    /// Hours in the asked window with no data.
    pub missing_hours: usize,
    /// Hours asked about.
    pub window_hours: usize,
}

impl LowSince {
    /// True only if every hour of the window was observed and low.
    pub fn all_low(&self) -> bool {
        self.low_hours == self.window_hours
    }
}

/// Median of the `days` days of values before `now`: the default "low" bound.
pub fn median_before(y: &Hourly, now: i64, days: usize) -> Option<f64> {
    let end = y.last_valued_at_or_before(now)?;
    let start = end.saturating_sub(days * 24);
    let mut v: Vec<f64> = y.values[start..=end].iter().filter_map(|v| *v).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Looks back `hours` hours from the hour containing `now`.
pub fn low_since(
    y: &Hourly,
    now: i64,
    hours: usize,
    threshold: f64,
    threshold_source: String,
) -> LowSince {
    let now_hour = now.div_euclid(3600) * 3600;
    let mut low_hours = 0;
    let mut missing_hours = 0;
    for k in 0..hours as i64 {
        let t = now_hour - 3600 * k;
        match y.index(t).and_then(|i| y.values[i]) {
            Some(v) if v < threshold => low_hours += 1,
            Some(_) => {}
            None => missing_hours += 1,
        }
    }
    let mut low_since = None;
    if let Some(last) = y.last_valued_at_or_before(now_hour) {
        let mut i = last as i64;
        while let Some(v) = y.get(i) {
            if v >= threshold {
                break;
            }
            low_since = Some(y.time(i as usize));
            i -= 1;
        }
    }
    LowSince {
        threshold,
        threshold_source,
        low_since,
        low_hours,
        missing_hours,
        window_hours: hours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::Method;

    fn p(time: i64, value: f64) -> Predicted {
        Predicted {
            time,
            value,
            method: Method::Regression,
        }
    }

    #[test]
    fn best_window_finds_the_cleanest_run_and_skips_holes() {
        let f: Vec<Predicted> = [300.0, 200.0, 100.0, 120.0, 90.0, 400.0]
            .iter()
            .enumerate()
            .map(|(i, v)| p(3600 * i as i64, *v))
            .collect();
        let w = best_window(&f, 2, 0).unwrap();
        assert_eq!((w.start, w.mean), (3600 * 3, 105.0));
        assert_eq!(w.start_now_mean, Some(250.0));
        let w = best_window(&f, 1, 0).unwrap();
        assert_eq!(w.start, 3600 * 4);
        // Remove hour 3: windows over it are not contiguous.
        let holey: Vec<Predicted> = f.iter().copied().filter(|x| x.time != 3600 * 3).collect();
        let w = best_window(&holey, 2, 0).unwrap();
        assert_eq!(w.start, 3600);
        assert!(best_window(&f, 7, 0).is_none());
        // Starts in the past are not offered.
        assert_eq!(best_window(&f, 1, 3600 * 5).unwrap().start, 3600 * 5);
    }

    #[test]
    fn rank_puts_missing_last() {
        let r = rank_zones([
            ("B", Some(p(0, 50.0))),
            ("C", None),
            ("A", Some(p(0, 70.0))),
        ]);
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec!["B", "A", "C"]
        );
    }

    #[test]
    fn low_since_counts_gaps_as_not_low() {
        // 10 hours: high, then low for 6 hours with one gap in the middle.
        let values = vec![
            Some(500.0),
            Some(500.0),
            Some(500.0),
            Some(100.0),
            Some(100.0),
            None,
            Some(100.0),
            Some(100.0),
            Some(90.0),
            Some(80.0),
        ];
        let y = Hourly { start: 0, values };
        let r = low_since(&y, 9 * 3600 + 59, 6, 200.0, "test".into());
        assert_eq!((r.low_hours, r.missing_hours), (5, 1));
        assert!(!r.all_low());
        assert_eq!(r.low_since, Some(6 * 3600), "the gap interrupts the run");
        let r = low_since(&y, 9 * 3600, 4, 200.0, "test".into());
        assert!(r.all_low());
        assert_eq!(median_before(&y, 9 * 3600, 1), Some(100.0));
    }
}
