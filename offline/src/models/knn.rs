//! k nearest neighbours. The prediction lives in `greenpipe_common::model` (brute force over
//! the stored points) because the online estimator must predict from the model file alone; a
//! search index such as linfa-nn's cannot be stored in our schema. Fitting keeps at most
//! [`MAX_POINTS`] evenly spaced training rows, which bounds both the file size and the cost of a
//! prediction.

use greenpipe_common::model::ModelKind;

use super::{Family, FitError, Fits};
use crate::samples::Matrix;

/// Stored points at most.
pub const MAX_POINTS: usize = 2000;

/// k nearest neighbours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knn {
    /// Neighbours.
    pub k: usize,
}

impl Family for Knn {
    const NAME: &'static str = "knn";
    const ABOUT: &'static str = "mean of the k nearest stored rows";

    fn grid() -> Vec<Knn> {
        vec![Knn { k: 10 }, Knn { k: 50 }]
    }

    fn hyperparameters(&self) -> String {
        format!("k={}", self.k)
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        Ok(fit(x, y, self.k))
    }
}

/// Keeps every `ceil(n / MAX_POINTS)`-th row.
pub fn fit(x: &Matrix, y: &[f64], k: usize) -> ModelKind {
    let stride = x.rows.div_ceil(MAX_POINTS).max(1);
    let keep: Vec<usize> = (0..x.rows).step_by(stride).collect();
    ModelKind::NearestNeighbours {
        k: k.min(keep.len()).max(1),
        points: keep.iter().map(|&i| x.row(i).to_vec()).collect(),
        targets: keep.iter().map(|&i| y[i]).collect(),
    }
}
