//! The linear families. OLS with `linfa-linear`, lasso and elastic net with `linfa-elasticnet`
//! (coordinate descent). Ridge — also the degree-2 polynomial ridge and the base line of boosted
//! trees — is solved in closed form here: linfa-elasticnet would fit it by coordinate descent
//! too, which on correlated inputs (cycles, instructions and CPU time move together) needs
//! thousands of passes over the rows and dominated crossval's wall time, while the normal
//! equations need one pass and a p×p Cholesky solve.

use super::FitError;
use greenpipe_common::model::ModelKind;
use linfa::prelude::*;
use ndarray::{Array1, Array2};

use crate::samples::Matrix;

fn dataset(x: &Matrix, y: &[f64]) -> Result<Dataset<f64, f64, ndarray::Ix1>, FitError> {
    let records =
        Array2::from_shape_vec((x.rows, x.cols), x.data.clone()).map_err(FitError::Shape)?;
    Ok(Dataset::new(records, Array1::from(y.to_vec())))
}

/// Ordinary least squares: `(intercept, coefficients)`.
pub fn ols(x: &Matrix, y: &[f64]) -> Result<(f64, Vec<f64>), FitError> {
    let fitted = linfa_linear::LinearRegression::new()
        .fit(&dataset(x, y)?)
        .map_err(FitError::LeastSquares)?;
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
) -> Result<(f64, Vec<f64>), FitError> {
    let fitted = linfa_elasticnet::ElasticNet::params()
        .penalty(alpha)
        .l1_ratio(l1_ratio)
        .max_iterations(1000)
        .tolerance(1e-4)
        .fit(&dataset(x, y)?)
        .map_err(FitError::ElasticNet)?;
    Ok((fitted.intercept(), fitted.hyperplane().to_vec()))
}

/// Ridge in closed form with the same objective as [`elastic_net`] at `l1_ratio = 0`:
/// `1/(2n)·|y - b - Xw|² + alpha/2·|w|²`, i.e. `(Xcᵀ Xc / n + alpha·I) w = Xcᵀ yc / n` on
/// centred data.
pub fn ridge(x: &Matrix, y: &[f64], alpha: f64) -> Result<(f64, Vec<f64>), FitError> {
    let (n, p) = (x.rows, x.cols);
    if n == 0 {
        return Err(FitError::RidgeWithoutRows);
    }
    let nf = n as f64;
    let mut mean = vec![0.0; p];
    for i in 0..n {
        for (m, v) in mean.iter_mut().zip(x.row(i)) {
            *m += v / nf;
        }
    }
    let y_mean = y.iter().sum::<f64>() / nf;
    let mut gram = vec![0.0; p * p];
    let mut xty = vec![0.0; p];
    let mut centred = vec![0.0; p];
    for (i, yi) in y.iter().enumerate().take(n) {
        for ((c, v), m) in centred.iter_mut().zip(x.row(i)).zip(&mean) {
            *c = v - m;
        }
        let yc = yi - y_mean;
        for j in 0..p {
            xty[j] += centred[j] * yc / nf;
            for k in j..p {
                gram[j * p + k] += centred[j] * centred[k] / nf;
            }
        }
    }
    for j in 0..p {
        for k in 0..j {
            gram[j * p + k] = gram[k * p + j];
        }
        // A tiny floor keeps exactly collinear inputs solvable at alpha = 0.
        gram[j * p + j] += alpha.max(1e-10);
    }
    let w = greenpipe_common::linalg::cholesky_solve(&mut gram, p, &xty)
        .map_err(FitError::RidgeSolve)?;
    let intercept = y_mean - w.iter().zip(&mean).map(|(w, m)| w * m).sum::<f64>();
    Ok((intercept, w))
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
pub fn polynomial(x: &Matrix, y: &[f64], alpha: f64) -> Result<ModelKind, FitError> {
    let (intercept, w) = ridge(&quadratic_expansion(x), y, alpha)?;
    Ok(ModelKind::Polynomial {
        intercept,
        linear: w[..x.cols].to_vec(),
        quadratic: w[x.cols..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> (Matrix, Vec<f64>) {
        let mut d = Vec::new();
        let mut y = Vec::new();
        for i in 0..300 {
            let a = ((i * 13) % 17) as f64 / 3.0 - 2.0;
            let b = ((i * 7) % 11) as f64 / 2.0 - 2.5 + 0.3 * a;
            d.extend([a, b]);
            y.push(5.0 + 2.0 * a - 3.0 * b + 0.5 * a * b);
        }
        (
            Matrix {
                rows: 300,
                cols: 2,
                data: d,
            },
            y,
        )
    }

    #[test]
    fn closed_form_ridge_matches_linfa_coordinate_descent() {
        // linfa-elasticnet centres y but not x, so compare on centred inputs (the pipeline
        // always standardises them).
        let (mut x, y) = data();
        for c in 0..x.cols {
            let m = (0..x.rows).map(|i| x.row(i)[c]).sum::<f64>() / x.rows as f64;
            for i in 0..x.rows {
                x.data[i * x.cols + c] -= m;
            }
        }
        let (b0, w0) = ridge(&x, &y, 0.5).unwrap();
        let fitted = linfa_elasticnet::ElasticNet::params()
            .penalty(0.5)
            .l1_ratio(0.0)
            .tolerance(1e-9)
            .max_iterations(10_000)
            .fit(&dataset(&x, &y).unwrap())
            .unwrap();
        assert!((b0 - fitted.intercept()).abs() < 1e-6);
        for (a, b) in w0.iter().zip(fitted.hyperplane()) {
            assert!((a - b).abs() < 1e-6, "{w0:?} vs {}", fitted.hyperplane());
        }
    }

    #[test]
    fn polynomial_recovers_an_interaction() {
        let (x, y) = data();
        let ModelKind::Polynomial {
            intercept,
            linear,
            quadratic,
        } = polynomial(&x, &y, 0.0).unwrap()
        else {
            panic!()
        };
        assert!((intercept - 5.0).abs() < 1e-6);
        assert!((linear[0] - 2.0).abs() < 1e-6 && (linear[1] + 3.0).abs() < 1e-6);
        // Terms (0,0), (0,1), (1,1).
        assert!(quadratic[0].abs() < 1e-6 && (quadratic[1] - 0.5).abs() < 1e-6);
        assert!(quadratic[2].abs() < 1e-6);
    }
}
