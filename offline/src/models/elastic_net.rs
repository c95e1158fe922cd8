//! Elastic net: L1 + L2-penalised least squares (linfa-elasticnet).

use greenpipe_common::model::ModelKind;

use super::{linear, Family, FitError, Fits};
use crate::samples::Matrix;

/// L1 + L2-penalised least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElasticNet {
    /// Penalty.
    pub alpha: f64,
    /// L1 share.
    pub l1_ratio: f64,
}

impl Family for ElasticNet {
    const NAME: &'static str = "elastic_net";
    const ABOUT: &'static str = "L1 + L2-penalised least squares (linfa-elasticnet)";

    fn grid() -> Vec<ElasticNet> {
        vec![ElasticNet {
            alpha: 0.1,
            l1_ratio: 0.5,
        }]
    }

    fn hyperparameters(&self) -> String {
        format!("alpha={};l1={}", self.alpha, self.l1_ratio)
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let (intercept, coefficients) = linear::elastic_net(x, y, self.alpha, self.l1_ratio)?;
        Ok(ModelKind::Linear {
            intercept,
            coefficients,
        })
    }
}
