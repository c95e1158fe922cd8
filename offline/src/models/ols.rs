//! Ordinary least squares (linfa-linear): the fit of both baselines.

use greenpipe_common::model::ModelKind;

use super::{linear, Family, FitError, Fits};
use crate::samples::Matrix;

/// Ordinary least squares; no hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ols;

impl Family for Ols {
    const NAME: &'static str = "ols";
    const ABOUT: &'static str = "ordinary least squares (linfa-linear)";

    fn grid() -> Vec<Ols> {
        vec![Ols]
    }

    fn hyperparameters(&self) -> String {
        String::new()
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let (intercept, coefficients) = linear::ols(x, y)?;
        Ok(ModelKind::Linear {
            intercept,
            coefficients,
        })
    }

    fn drops_collinear_inputs(&self) -> bool {
        true
    }
}
