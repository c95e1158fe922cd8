//! Dense linear algebra small enough not to need a library: the ridge normal equations of the
//! offline linear models (estimator) and of the carbon forecaster's recursive least squares
//! (carbon) are a dozen unknowns, and both solve them here.

/// `A` was not symmetric positive definite: the Cholesky pivot of `column` was not positive.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("matrix is not positive definite at column {column}")]
pub struct NotPositiveDefinite {
    /// The column whose pivot was zero, negative or not finite.
    pub column: usize,
}

/// Solves `A w = b` for symmetric positive definite `A` (`p`×`p`, row-major). `a` is
/// overwritten with its Cholesky factor `L` (lower triangle).
pub fn cholesky_solve(a: &mut [f64], p: usize, b: &[f64]) -> Result<Vec<f64>, NotPositiveDefinite> {
    debug_assert_eq!(a.len(), p * p);
    debug_assert_eq!(b.len(), p);
    for j in 0..p {
        let mut d = a[j * p + j];
        for k in 0..j {
            d -= a[j * p + k] * a[j * p + k];
        }
        if !d.is_finite() || d <= 0.0 {
            return Err(NotPositiveDefinite { column: j });
        }
        let d = d.sqrt();
        a[j * p + j] = d;
        for i in j + 1..p {
            let mut s = a[i * p + j];
            for k in 0..j {
                s -= a[i * p + k] * a[j * p + k];
            }
            a[i * p + j] = s / d;
        }
    }
    let mut z = b.to_vec();
    for i in 0..p {
        for k in 0..i {
            z[i] -= a[i * p + k] * z[k];
        }
        z[i] /= a[i * p + i];
    }
    for i in (0..p).rev() {
        for k in i + 1..p {
            z[i] -= a[k * p + i] * z[k];
        }
        z[i] /= a[i * p + i];
    }
    Ok(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_small_spd_system_and_refuses_a_singular_one() {
        // A = [[4, 2], [2, 3]], w = [1, -2] → b = [0, -4].
        let mut a = vec![4.0, 2.0, 2.0, 3.0];
        let w = cholesky_solve(&mut a, 2, &[0.0, -4.0]).unwrap();
        assert!(
            (w[0] - 1.0).abs() < 1e-12 && (w[1] + 2.0).abs() < 1e-12,
            "{w:?}"
        );
        let mut singular = vec![1.0, 1.0, 1.0, 1.0];
        assert_eq!(
            cholesky_solve(&mut singular, 2, &[1.0, 1.0]),
            Err(NotPositiveDefinite { column: 1 })
        );
    }
}
