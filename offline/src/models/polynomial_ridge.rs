//! Polynomial ridge: closed-form ridge on the inputs and all their degree-2 products.

use greenpipe_common::model::ModelKind;

use super::{linear, Family, FitError, Fits};
use crate::samples::Matrix;

/// Ridge on all degree-2 products of the inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolynomialRidge {
    /// Penalty.
    pub alpha: f64,
}

impl Family for PolynomialRidge {
    const NAME: &'static str = "polynomial_ridge";
    const ABOUT: &'static str = "ridge on the inputs and all their degree-2 products";

    fn grid() -> Vec<PolynomialRidge> {
        vec![
            PolynomialRidge { alpha: 0.1 },
            PolynomialRidge { alpha: 1.0 },
        ]
    }

    fn hyperparameters(&self) -> String {
        format!("alpha={}", self.alpha)
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        linear::polynomial(x, y, self.alpha)
    }
}
