//! Random forests: histogram trees (`trees.rs`) or scikit-learn's exact-split trees on bootstrap
//! draws (`exact.rs`).

use greenpipe_common::model::ModelKind;

use super::trees::{self, ForestParams, TreeParams, FULL_DEPTH};
use super::{exact, Family, FitError, Fits};
use crate::samples::Matrix;

/// Random forest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomForest(pub ForestParams);

impl Family for RandomForest {
    const NAME: &'static str = "random_forest";
    const ABOUT: &'static str =
        "random forest (histogram trees; scikit-learn's exact-split defaults on --grid wide)";

    fn grid() -> Vec<RandomForest> {
        vec![classic()]
    }

    fn hyperparameters(&self) -> String {
        let p = &self.0;
        format!(
            "trees={};depth={}{}",
            p.trees,
            p.tree.depth_name(),
            if p.exact { ";exact" } else { "" }
        )
    }

    fn fit(&self, x: &Matrix, y: &[f64], _: &mut Fits) -> Result<ModelKind, FitError> {
        let mut p = self.0;
        if p.tree.features_per_split == 0 {
            p.tree.features_per_split = x.cols.div_ceil(3).max(1);
        }
        Ok(if p.exact {
            exact::forest(x, y, p.trees, p.tree, 7)
        } else {
            trees::forest(x, y, p, 7)
        })
    }

    fn has_trees(&self) -> bool {
        true
    }
}

/// The default grid's forest: 40 histogram trees of depth 8, a third of the inputs per split.
pub fn classic() -> RandomForest {
    RandomForest(ForestParams {
        trees: 40,
        tree: TreeParams {
            max_depth: 8,
            min_leaf: 5,
            features_per_split: 0,
        },
        exact: false,
    })
}

/// scikit-learn's `RandomForestRegressor()` defaults: 100 fully grown exact-split trees on
/// bootstrap draws, every input tried at every split, one row per leaf at least.
pub fn sklearn() -> RandomForest {
    RandomForest(ForestParams {
        trees: 100,
        tree: TreeParams {
            max_depth: FULL_DEPTH,
            min_leaf: 1,
            features_per_split: usize::MAX,
        },
        exact: true,
    })
}
