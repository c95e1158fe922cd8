//! Recursive least squares with exponential forgetting and a ridge penalty: the fit behind the
//! regression forecaster. Sufficient statistics (XᵀX, Xᵀy) are updated one sample at a time, so
//! a rolling-origin backtest over a year costs one rank-one update per hour instead of a refit
//! on the whole window. The system is tiny (≈ 14 features); the Cholesky solve shared with the
//! estimator (`greenpipe_common::linalg`) is why this does not pull in ndarray + linfa.

/// Accumulated normal equations.
#[derive(Debug, Clone)]
pub struct Ridge {
    d: usize,
    xtx: Vec<f64>,
    xty: Vec<f64>,
    weight: f64,
    forget: f64,
}

impl Ridge {
    /// `d` features; every new sample multiplies the old statistics by `forget` (1 = never forget).
    pub fn new(d: usize, forget: f64) -> Self {
        Ridge {
            d,
            xtx: vec![0.0; d * d],
            xty: vec![0.0; d],
            weight: 0.0,
            forget,
        }
    }

    /// Adds one sample.
    pub fn add(&mut self, x: &[f64], y: f64) {
        debug_assert_eq!(x.len(), self.d);
        for v in self.xtx.iter_mut().chain(self.xty.iter_mut()) {
            *v *= self.forget;
        }
        for i in 0..self.d {
            for j in 0..self.d {
                self.xtx[i * self.d + j] += x[i] * x[j];
            }
            self.xty[i] += x[i] * y;
        }
        self.weight = self.weight * self.forget + 1.0;
    }

    /// Effective number of samples (after forgetting).
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// Solves (XᵀX + λI) w = Xᵀy; `None` if not positive definite.
    pub fn solve(&self, lambda: f64) -> Option<Vec<f64>> {
        let d = self.d;
        let mut a = self.xtx.clone();
        for i in 0..d {
            a[i * d + i] += lambda;
        }
        greenpipe_common::linalg::cholesky_solve(&mut a, d, &self.xty).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_linear_function() {
        let mut r = Ridge::new(3, 1.0);
        for i in 0..50 {
            let (a, b) = (i as f64, ((i * 7) % 11) as f64);
            r.add(&[1.0, a, b], 2.0 + 0.5 * a - 3.0 * b);
        }
        let w = r.solve(1e-9).unwrap();
        for (got, want) in w.iter().zip([2.0, 0.5, -3.0]) {
            assert!((got - want).abs() < 1e-6, "{w:?}");
        }
    }

    #[test]
    fn empty_system_is_not_solvable_without_penalty() {
        assert!(Ridge::new(2, 1.0).solve(0.0).is_none());
    }
}
