//! The linear families, fitted with linfa: OLS (`linfa-linear`), and ridge, lasso and elastic
//! net (`linfa-elasticnet`, coordinate descent); the degree-2 polynomial is ridge on the
//! expanded inputs.

use anyhow::Context;
use greenpipe_common::model::ModelKind;
use linfa::prelude::*;
use ndarray::{Array1, Array2};

use crate::offline::samples::Matrix;

fn dataset(x: &Matrix, y: &[f64]) -> anyhow::Result<Dataset<f64, f64, ndarray::Ix1>> {
    let records = Array2::from_shape_vec((x.rows, x.cols), x.data.clone())?;
    Ok(Dataset::new(records, Array1::from(y.to_vec())))
}

/// Ordinary least squares: `(intercept, coefficients)`.
pub fn ols(x: &Matrix, y: &[f64]) -> anyhow::Result<(f64, Vec<f64>)> {
    let fitted = linfa_linear::LinearRegression::new()
        .fit(&dataset(x, y)?)
        .context("least squares")?;
    Ok((fitted.intercept(), fitted.params().to_vec()))
}

/// Elastic net with penalty `alpha` and L1 share `l1_ratio` (0 = ridge, 1 = lasso), on
/// standardised inputs, as scikit-learn scales it: `1/(2n)·|y - Xw|² + alpha·(l1·|w|₁ +
/// (1 - l1)/2·|w|²)`.
pub fn elastic_net(
    x: &Matrix,
    y: &[f64],
    alpha: f64,
    l1_ratio: f64,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let fitted = linfa_elasticnet::ElasticNet::params()
        .penalty(alpha)
        .l1_ratio(l1_ratio)
        .max_iterations(5000)
        .tolerance(1e-6)
        .fit(&dataset(x, y)?)
        .context("elastic net")?;
    Ok((fitted.intercept(), fitted.hyperplane().to_vec()))
}

/// Appends every product `x[i]·x[j]`, `i <= j` (the order [`ModelKind::Polynomial`] reads).
pub fn quadratic_expansion(x: &Matrix) -> Matrix {
    let n = x.cols;
    let cols = n + n * (n + 1) / 2;
    let mut data = Vec::with_capacity(x.rows * cols);
    for r in 0..x.rows {
        let row = x.row(r);
        data.extend_from_slice(row);
        for i in 0..n {
            for j in i..n {
                data.push(row[i] * row[j]);
            }
        }
    }
    Matrix {
        rows: x.rows,
        cols,
        data,
    }
}

/// Degree-2 polynomial ridge.
pub fn polynomial(x: &Matrix, y: &[f64], alpha: f64) -> anyhow::Result<ModelKind> {
    let (intercept, w) = elastic_net(&quadratic_expansion(x), y, alpha, 0.0)?;
    Ok(ModelKind::Polynomial {
        intercept,
        linear: w[..x.cols].to_vec(),
        quadratic: w[x.cols..].to_vec(),
    })
}
