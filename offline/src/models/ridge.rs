//! Ridge: L2-penalised least squares, solved in closed form (`linear::ridge`).

use greenpipe_common::model::ModelKind;

use super::{linear, Family, FitError, Fits};
use crate::samples::Matrix;

/// L2-penalised least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ridge {
    /// Penalty.
    pub alpha: f64,
}

impl Family for Ridge {
    const NAME: &'static str = "ridge";
    const ABOUT: &'static str = "L2-penalised least squares, closed form";

    fn grid() -> Vec<Ridge> {
        vec![Ridge { alpha: 0.1 }, Ridge { alpha: 1.0 }]
    }

    fn hyperparameters(&self) -> String {
        format!("alpha={}", self.alpha)
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let (intercept, coefficients) = linear::ridge(x, y, self.alpha)?;
        Ok(ModelKind::Linear {
            intercept,
            coefficients,
        })
    }
}
