//! Error measures of a prediction against measured power.

/// Scores of one prediction run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Score {
    /// Samples scored.
    pub samples: usize,
    /// Mean absolute percentage error, percent.
    pub mape_percent: f64,
    /// Mean absolute error, watts.
    pub mae_watts: f64,
    /// Root mean squared error, watts.
    pub rmse_watts: f64,
    /// Coefficient of determination (1 - SSE/SST; can be negative, NaN for a constant target).
    pub r2: f64,
}

/// Scores `predicted` against `measured` (same length, measured power > 0).
pub fn score(measured: &[f64], predicted: &[f64]) -> Score {
    let n = measured.len();
    if n == 0 {
        return Score::default();
    }
    let nf = n as f64;
    let mean = measured.iter().sum::<f64>() / nf;
    let (mut ape, mut ae, mut se, mut st) = (0.0, 0.0, 0.0, 0.0);
    for (&y, &p) in measured.iter().zip(predicted) {
        let e = p - y;
        ape += (e / y).abs();
        ae += e.abs();
        se += e * e;
        st += (y - mean) * (y - mean);
    }
    Score {
        samples: n,
        mape_percent: 100.0 * ape / nf,
        mae_watts: ae / nf,
        rmse_watts: (se / nf).sqrt(),
        r2: if st > 0.0 { 1.0 - se / st } else { f64::NAN },
    }
}

/// The unweighted mean of per-workload scores (the `ALL` rows): every workload counts once,
/// however long its trace, so a long idle trace cannot hide a bad busy one.
pub fn mean(scores: &[Score]) -> Score {
    let n = scores.len().max(1) as f64;
    let avg = |f: fn(&Score) -> f64| scores.iter().map(f).sum::<f64>() / n;
    Score {
        samples: scores.iter().map(|s| s.samples).sum(),
        mape_percent: avg(|s| s.mape_percent),
        mae_watts: avg(|s| s.mae_watts),
        rmse_watts: avg(|s| s.rmse_watts),
        r2: avg(|s| s.r2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let s = score(&[100.0, 200.0], &[110.0, 180.0]);
        assert_eq!(s.samples, 2);
        assert!((s.mape_percent - 10.0).abs() < 1e-12);
        assert!((s.mae_watts - 15.0).abs() < 1e-12);
        assert!((s.rmse_watts - (250.0f64).sqrt()).abs() < 1e-12);
        assert!((s.r2 - (1.0 - 500.0 / 5000.0)).abs() < 1e-12);
        let m = mean(&[s, score(&[10.0; 3], &[10.0; 3])]);
        assert_eq!(m.samples, 5);
        assert!((m.mape_percent - 5.0).abs() < 1e-12);
    }
}
