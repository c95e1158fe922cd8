//! What a model family declares, and the [`Candidate`] that carries one of its settings.
//!
//! A family is one type implementing [`Family`] in its own file: a value of the type is one
//! candidate (the hyperparameters), the type's associated items are the family (its name, its
//! help line, its grid). [`FAMILIES`](super::FAMILIES) lists them; `--models`, its help and its
//! errors, and the default grid are generated from that list. Prediction and recalibration act
//! on the fitted [`ModelKind`], the model file's form, in `greenpipe_common::model`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use greenpipe_common::model::ModelKind;

use super::{FitError, Fits};
use crate::samples::Matrix;

/// One model family; a value is one setting of its hyperparameters.
pub trait Family: fmt::Debug + Clone + PartialEq + Send + Sync + 'static {
    /// Its name in `--models` and in model names, and the start of every candidate's name.
    const NAME: &'static str;
    /// One line for `--help`.
    const ABOUT: &'static str;

    /// Its candidates in the default grid, in order.
    fn grid() -> Vec<Self>;

    /// The hyperparameters as the candidate's name shows them, `alpha=0.1` in `ridge(alpha=0.1)`;
    /// empty for a family without any (the name is then the family's alone). Names are the
    /// `model` column of reports and are kept in model files: a change here renames history.
    fn hyperparameters(&self) -> String;

    /// Fits on standardised inputs `x` with at least two rows (deterministic: fixed seeds).
    /// `fits` holds models already fitted on the same rows, by candidate name, for a family
    /// made of other candidates (see [`Candidate::fit_reusing`]).
    fn fit(&self, x: &Matrix, y: &[f64], fits: &mut Fits) -> Result<ModelKind, FitError>;

    /// Whether the fitted model holds regression trees, which cannot extrapolate: such
    /// candidates are also offered without each hardware counter
    /// ([`candidate_specs`](crate::evaluate::candidate_specs)).
    fn has_trees(&self) -> bool {
        false
    }

    /// Whether the fit needs inputs that the inputs before them do not explain: an unpenalised
    /// linear fit gives a collinear pair coefficients that cancel on the training rows and
    /// explode elsewhere, so [`fit`](crate::fit::fit) leaves such inputs out first.
    fn drops_collinear_inputs(&self) -> bool {
        false
    }
}

/// A family's entry in [`FAMILIES`](super::FAMILIES): what the registry reads without a
/// candidate in hand.
#[derive(Debug)]
pub struct FamilyDef {
    /// [`Family::NAME`].
    pub name: &'static str,
    /// [`Family::ABOUT`].
    pub about: &'static str,
    /// [`Family::grid`], as candidates.
    pub grid: fn() -> Vec<Candidate>,
}

impl FamilyDef {
    /// The entry of family `F`.
    pub const fn of<F: Family>() -> FamilyDef {
        FamilyDef {
            name: F::NAME,
            about: F::ABOUT,
            grid: grid_of::<F>,
        }
    }
}

fn grid_of<F: Family>() -> Vec<Candidate> {
    F::grid().into_iter().map(Candidate::new).collect()
}

/// [`Family`] without its associated items, so that candidates of every family share one type.
trait Model: fmt::Debug + Send + Sync {
    fn family(&self) -> &'static str;
    fn hyperparameters(&self) -> String;
    fn fit(&self, x: &Matrix, y: &[f64], fits: &mut Fits) -> Result<ModelKind, FitError>;
    fn has_trees(&self) -> bool;
    fn drops_collinear_inputs(&self) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn Model) -> bool;
}

impl<F: Family> Model for F {
    fn family(&self) -> &'static str {
        F::NAME
    }

    fn hyperparameters(&self) -> String {
        Family::hyperparameters(self)
    }

    fn fit(&self, x: &Matrix, y: &[f64], fits: &mut Fits) -> Result<ModelKind, FitError> {
        Family::fit(self, x, y, fits)
    }

    fn has_trees(&self) -> bool {
        Family::has_trees(self)
    }

    fn drops_collinear_inputs(&self) -> bool {
        Family::drops_collinear_inputs(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn Model) -> bool {
        other.as_any().downcast_ref::<F>() == Some(self)
    }
}

/// One model family with fixed hyperparameters.
#[derive(Clone)]
pub struct Candidate(Arc<dyn Model>);

impl Candidate {
    /// The candidate `params` of its family.
    pub fn new<F: Family>(params: F) -> Candidate {
        Candidate(Arc::new(params))
    }

    /// Its hyperparameters, if it is of family `F`.
    pub fn params<F: Family>(&self) -> Option<&F> {
        self.0.as_any().downcast_ref()
    }

    /// The family's name ([`Family::NAME`]).
    pub fn family(&self) -> &'static str {
        self.0.family()
    }

    /// Family and hyperparameters, e.g. `ridge(alpha=0.1)`; the `model` column of reports.
    pub fn name(&self) -> String {
        let hyperparameters = self.0.hyperparameters();
        if hyperparameters.is_empty() {
            self.family().into()
        } else {
            format!("{}({hyperparameters})", self.family())
        }
    }

    /// See [`Family::has_trees`].
    pub fn has_trees(&self) -> bool {
        self.0.has_trees()
    }

    /// See [`Family::drops_collinear_inputs`].
    pub fn drops_collinear_inputs(&self) -> bool {
        self.0.drops_collinear_inputs()
    }

    /// Fits on standardised inputs `x` (deterministic: fixed seed).
    pub fn fit(&self, x: &Matrix, y: &[f64]) -> Result<ModelKind, FitError> {
        self.fit_reusing(x, y, &mut Fits::default())
    }

    /// As [`Candidate::fit`], but takes what `fits` already holds (an ensemble's members fitted
    /// standalone on the same rows) and adds what it fits. Fitting is deterministic, so the result
    /// is the same as without the cache.
    pub fn fit_reusing(
        &self,
        x: &Matrix,
        y: &[f64],
        fits: &mut Fits,
    ) -> Result<ModelKind, FitError> {
        let name = self.name();
        if let Some(kind) = fits.get(&name) {
            return Ok(kind.clone());
        }
        if x.rows < 2 {
            return Err(FitError::TooFewRows {
                rows: x.rows,
                candidate: name,
            });
        }
        let kind = self.0.fit(x, y, fits)?;
        fits.insert(name, kind.clone());
        Ok(kind)
    }
}

impl fmt::Debug for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.0.same(&*other.0)
    }
}
