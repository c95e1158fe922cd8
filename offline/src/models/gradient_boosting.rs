//! Gradient-boosted regression trees: histogram trees (`trees.rs`), optionally on top of a ridge
//! line, or scikit-learn's exact-split trees (`exact.rs`).

use greenpipe_common::model::ModelKind;

use super::trees::{self, BoostParams, TreeParams};
use super::{exact, Family, FitError, Fits};
use crate::samples::Matrix;

/// Gradient-boosted trees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientBoosting(pub BoostParams);

impl Family for GradientBoosting {
    const NAME: &'static str = "gradient_boosting";
    const ABOUT: &'static str =
        "gradient-boosted trees, with or without a ridge base line (histogram trees; \
         scikit-learn's exact-split defaults on --grid wide)";

    fn grid() -> Vec<GradientBoosting> {
        vec![classic(false), classic(true)]
    }

    fn hyperparameters(&self) -> String {
        let p = &self.0;
        format!(
            "{}trees={};lr={};depth={}{}",
            if p.linear_base { "linear_base;" } else { "" },
            p.trees,
            p.learning_rate,
            p.tree.depth_name(),
            if p.exact { ";exact" } else { "" }
        )
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let p = self.0;
        if p.exact && !p.linear_base {
            Ok(exact::boost(
                x,
                y,
                p.trees,
                p.learning_rate,
                p.tree,
                p.subsample,
                7,
            ))
        } else {
            trees::boost(x, y, p, 7)
        }
    }

    fn has_trees(&self) -> bool {
        true
    }
}

/// The default grid's boosting: 150 shallow histogram trees on 70 % of the rows each, chosen to
/// span under- and over-fitting on traces of a few thousand 1-2 s samples.
pub fn classic(linear_base: bool) -> GradientBoosting {
    GradientBoosting(BoostParams {
        trees: 150,
        learning_rate: 0.05,
        tree: TreeParams {
            max_depth: 3,
            min_leaf: 20,
            features_per_split: 0,
        },
        linear_base,
        subsample: 0.7,
        exact: false,
    })
}

/// scikit-learn's `GradientBoostingRegressor()` defaults: 100 exact-split trees of depth 3,
/// learning rate 0.1, every row.
pub fn sklearn() -> GradientBoosting {
    GradientBoosting(BoostParams {
        trees: 100,
        learning_rate: 0.1,
        tree: TreeParams {
            max_depth: 3,
            min_leaf: 1,
            features_per_split: 0,
        },
        linear_base: false,
        subsample: 1.0,
        exact: true,
    })
}
