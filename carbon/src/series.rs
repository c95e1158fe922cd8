//! Carbon-intensity time series as the sources deliver them, and the dense hourly grid the
//! forecasters work on.
//!
//! Missing points are never filled: a point whose value is `None`, or a stretch of time with no
//! point at all, is a gap. [`Series::gaps`] reports them so every command can say what it did not
//! see, and [`Series::hourly`] keeps them as `None` so forecasters and queries can decide per use.

use std::fmt;

/// One reading: the start of the interval it covers (unix seconds, UTC) and its value in gCO2/kWh.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Start of the interval, unix seconds UTC.
    pub timestamp: i64,
    /// Grams of CO2(eq) per kWh; `None` when the provider published the interval without a value.
    pub value: Option<f64>,
}

/// Whether a series was measured (or estimated after the fact) or predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Measured or estimated after the fact by the provider.
    Actual,
    /// Predicted (by the provider or by us).
    Forecast,
}

impl Kind {
    /// The value of the `kind` label.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Actual => "actual",
            Kind::Forecast => "forecast",
        }
    }
}

/// A series of one zone from one source.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Grid zone (EIA balancing authority, Electricity Maps zone key, WattTime region, `GB`, ...).
    pub zone: String,
    /// Where the series came from (`csv`, `uk`, `electricitymaps`, `watttime`).
    pub source: String,
    /// Actual or forecast.
    pub kind: Kind,
    /// Interval length of one point, seconds.
    pub step_seconds: i64,
    /// Points sorted by timestamp, no duplicates.
    pub points: Vec<Point>,
}

/// A stretch of missing data: `[start, end)` in unix seconds and how many intervals it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// First missing interval start.
    pub start: i64,
    /// End of the last missing interval (exclusive).
    pub end: i64,
    /// Number of missing intervals.
    pub intervals: i64,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} .. {} ({} interval{})",
            crate::time::format(self.start),
            crate::time::format(self.end),
            self.intervals,
            if self.intervals == 1 { "" } else { "s" }
        )
    }
}

impl Series {
    /// Builds a series, sorting points and rejecting duplicate timestamps (a provider that sends
    /// two values for one interval is ambiguous; we refuse to pick one silently).
    pub fn new(
        zone: impl Into<String>,
        source: impl Into<String>,
        kind: Kind,
        step_seconds: i64,
        mut points: Vec<Point>,
    ) -> Result<Self, crate::Error> {
        if step_seconds <= 0 {
            return Err(crate::Error::Invalid(format!(
                "step {step_seconds} s is not positive"
            )));
        }
        // A provider's body is outside input: an absurd intensity is refused, not stored.
        if let Some(p) = points
            .iter()
            .find(|p| p.value.is_some_and(|v| !(v.is_finite() && v >= 0.0)))
        {
            return Err(crate::Error::Invalid(format!(
                "intensity {:?} g/kWh for the interval starting {} is not a finite, non-negative number",
                p.value.unwrap_or_default(),
                crate::time::format(p.timestamp)
            )));
        }
        points.sort_by_key(|p| p.timestamp);
        if let Some(w) = points.windows(2).find(|w| w[0].timestamp == w[1].timestamp) {
            return Err(crate::Error::Invalid(format!(
                "two values for the interval starting {}",
                crate::time::format(w[0].timestamp)
            )));
        }
        Ok(Series {
            zone: zone.into(),
            source: source.into(),
            kind,
            step_seconds,
            points,
        })
    }

    /// Missing stretches: points with no value and holes between consecutive points.
    pub fn gaps(&self) -> Vec<Gap> {
        let step = self.step_seconds;
        let mut gaps: Vec<Gap> = Vec::new();
        let mut push = |start: i64, end: i64| {
            if let Some(last) = gaps.last_mut() {
                if last.end == start {
                    last.end = end;
                    last.intervals = (end - last.start) / step;
                    return;
                }
            }
            gaps.push(Gap {
                start,
                end,
                intervals: (end - start) / step,
            });
        };
        for (i, p) in self.points.iter().enumerate() {
            if i > 0 {
                let prev_end = self.points[i - 1].timestamp + step;
                if p.timestamp > prev_end {
                    push(prev_end, p.timestamp);
                }
            }
            if p.value.is_none() {
                push(p.timestamp, p.timestamp + step);
            }
        }
        gaps
    }

    /// Number of intervals with a value.
    pub fn present(&self) -> usize {
        self.points.iter().filter(|p| p.value.is_some()).count()
    }

    /// The value of the interval that contains `t`, if there is one and it has a value.
    pub fn value_at(&self, t: i64) -> Option<f64> {
        let i = self.points.partition_point(|p| p.timestamp <= t);
        let p = self.points.get(i.checked_sub(1)?)?;
        (t < p.timestamp + self.step_seconds)
            .then_some(p.value)
            .flatten()
    }

    /// Averages onto a dense UTC-hour grid. An hour with no valued point stays `None`.
    pub fn hourly(&self) -> Hourly {
        let (Some(first), Some(last)) = (self.points.first(), self.points.last()) else {
            return Hourly {
                start: 0,
                values: Vec::new(),
            };
        };
        let start = first.timestamp.div_euclid(3600) * 3600;
        let end = last.timestamp.div_euclid(3600) * 3600;
        let n = ((end - start) / 3600 + 1) as usize;
        let mut sum = vec![0.0; n];
        let mut count = vec![0u32; n];
        for p in &self.points {
            if let Some(v) = p.value {
                let i = ((p.timestamp.div_euclid(3600) * 3600 - start) / 3600) as usize;
                sum[i] += v;
                count[i] += 1;
            }
        }
        let values = sum
            .iter()
            .zip(&count)
            .map(|(s, &c)| (c > 0).then(|| s / c as f64))
            .collect();
        Hourly { start, values }
    }
}

/// A dense hourly grid: `values[i]` is the mean of hour `start + 3600 * i`, `None` if missing.
#[derive(Debug, Clone, PartialEq)]
pub struct Hourly {
    /// Start of the first hour, unix seconds (a multiple of 3600).
    pub start: i64,
    /// One entry per hour.
    pub values: Vec<Option<f64>>,
}

impl Hourly {
    /// Unix time of hour `i`.
    pub fn time(&self, i: usize) -> i64 {
        self.start + 3600 * i as i64
    }

    /// Index of the hour containing `t`, if inside the grid.
    pub fn index(&self, t: i64) -> Option<usize> {
        let i = (t - self.start).div_euclid(3600);
        (0..self.values.len() as i64)
            .contains(&i)
            .then_some(i as usize)
    }

    /// Value at signed index `i` (out of range or missing → `None`).
    pub fn get(&self, i: i64) -> Option<f64> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.values.get(i).copied().flatten())
    }

    /// Index of the last hour with a value at or before `t`.
    pub fn last_valued_at_or_before(&self, t: i64) -> Option<usize> {
        let upto = match self.index(t) {
            Some(i) => i,
            None if t >= self.start => self.values.len().checked_sub(1)?,
            None => return None,
        };
        (0..=upto).rev().find(|&i| self.values[i].is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(i64, Option<f64>)]) -> Series {
        let pts = points
            .iter()
            .map(|&(timestamp, value)| Point { timestamp, value })
            .collect();
        Series::new("Z", "test", Kind::Actual, 3600, pts).unwrap()
    }

    #[test]
    fn gaps_merge_holes_and_nulls() {
        let s = series(&[
            (0, Some(1.0)),
            (3600, None),
            (10800, Some(2.0)),
            (14400, Some(3.0)),
        ]);
        assert_eq!(
            s.gaps(),
            vec![Gap {
                start: 3600,
                end: 10800,
                intervals: 2
            }]
        );
        assert_eq!(s.present(), 3);
    }

    #[test]
    fn hourly_keeps_gaps_and_averages_subhourly() {
        let pts = vec![
            Point {
                timestamp: 0,
                value: Some(100.0),
            },
            Point {
                timestamp: 1800,
                value: Some(200.0),
            },
            Point {
                timestamp: 7200,
                value: Some(50.0),
            },
        ];
        let s = Series::new("GB", "uk", Kind::Actual, 1800, pts).unwrap();
        let h = s.hourly();
        assert_eq!(h.values, vec![Some(150.0), None, Some(50.0)]);
        assert_eq!(s.value_at(1800 + 1799), Some(200.0));
        assert_eq!(s.value_at(3600), None);
    }

    #[test]
    fn duplicate_timestamps_are_rejected() {
        let pts = vec![
            Point {
                timestamp: 0,
                value: Some(1.0),
            },
            Point {
                timestamp: 0,
                value: None,
            },
        ];
        assert!(Series::new("Z", "t", Kind::Actual, 3600, pts).is_err());
    }
}
