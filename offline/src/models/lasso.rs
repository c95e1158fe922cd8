//! Lasso: L1-penalised least squares, linfa-elasticnet at an L1 share of 1.

use greenpipe_common::model::ModelKind;

use super::{linear, Family, FitError, Fits};
use crate::samples::Matrix;

/// L1-penalised least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lasso {
    /// Penalty.
    pub alpha: f64,
}

impl Family for Lasso {
    const NAME: &'static str = "lasso";
    const ABOUT: &'static str = "L1-penalised least squares (linfa-elasticnet)";

    fn grid() -> Vec<Lasso> {
        vec![Lasso { alpha: 0.1 }, Lasso { alpha: 1.0 }]
    }

    fn hyperparameters(&self) -> String {
        format!("alpha={}", self.alpha)
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let (intercept, coefficients) = linear::elastic_net(x, y, self.alpha, 1.0)?;
        Ok(ModelKind::Linear {
            intercept,
            coefficients,
        })
    }
}
