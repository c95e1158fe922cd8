//! Ensembles: the mean of other candidates' predictions. Averaging a forest and boosted trees
//! cancels part of their errors on workloads neither saw.

use greenpipe_common::model::ModelKind;

use super::polynomial_ridge::PolynomialRidge;
use super::{gradient_boosting, random_forest, Candidate, Family, FitError, Fits};
use crate::samples::Matrix;

/// The mean of the members' predictions.
#[derive(Debug, Clone, PartialEq)]
pub struct Ensemble {
    /// The members, each a candidate of another family.
    pub members: Vec<Candidate>,
}

impl Family for Ensemble {
    const NAME: &'static str = "ensemble";
    const ABOUT: &'static str = "mean of other candidates' predictions (forest + boosting, ...)";

    fn grid() -> Vec<Ensemble> {
        let forest = || Candidate::new(random_forest::classic());
        let boost = || Candidate::new(gradient_boosting::classic(false));
        vec![
            Ensemble {
                members: vec![forest(), boost()],
            },
            Ensemble {
                members: vec![
                    forest(),
                    boost(),
                    Candidate::new(PolynomialRidge { alpha: 0.1 }),
                ],
            },
        ]
    }

    fn hyperparameters(&self) -> String {
        self.members
            .iter()
            .map(Candidate::name)
            .collect::<Vec<_>>()
            .join("+")
    }

    /// Members already in `fits` (fitted standalone on the same rows) are not fitted again.
    fn fit(&self, x: &Matrix, y: &[f64], fits: &mut Fits) -> Result<ModelKind, FitError> {
        Ok(ModelKind::Ensemble {
            members: self
                .members
                .iter()
                .map(|m| m.fit_reusing(x, y, fits))
                .collect::<Result<_, _>>()?,
        })
    }

    fn has_trees(&self) -> bool {
        self.members.iter().any(Candidate::has_trees)
    }
}
