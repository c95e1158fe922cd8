//! The offline pipeline: `dataset` (Prometheus → trace CSV), `train` (grouped-CV model selection
//! → model file), `validate` (score a model file on unseen traces) and `crossval`
//! (leave-one-workload-out for every candidate and baseline, with nested selection).
//!
//! Honest validation is the default: whole workloads are held out, never single rows; repeated
//! runs of a workload share a group; baselines are always reported beside the chosen model.

pub mod attribution;
pub mod baselines;
pub mod crossval;
pub mod cv;
pub mod dataset;
pub mod evaluate;
pub mod fit;
pub mod metrics;
pub mod models;
pub mod parity;
pub mod plots;
pub mod predictions;
pub mod report;
pub mod samples;
pub mod select;
pub mod train;
pub mod validate;

use std::borrow::Cow;

use greenpipe_common::features::Feature;
use regex::Regex;

use models::Candidate;
use samples::NodeSamples;

/// Why command-line strings were refused as [`OfflineOptions`].
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("--folds must be at least 2")]
    TooFewFolds,
    #[error("unknown feature {name:?}; known: {}", Feature::ALL.map(Feature::column).join(", "))]
    UnknownFeature { name: String },
    #[error(transparent)]
    Grid(#[from] models::GridError),
    #[error("--stress-pattern")]
    StressPattern(#[source] regex::Error),
    #[error("--always-train")]
    AlwaysTrain(#[source] regex::Error),
}

/// Why a node's samples cannot be cross-validated.
#[derive(Debug, thiserror::Error)]
#[error(
    "node {node}: every workload group ({groups:?}) matches --always-train: none can be held \
     out to score a model"
)]
pub struct NothingHoldable {
    pub node: String,
    pub groups: Vec<String>,
}

/// A node's samples ready for cross-validation, the holdable groups and the always-trained ones.
pub type CvSamples<'a> = (Cow<'a, NodeSamples>, Vec<usize>, Vec<usize>);

/// Options shared by `train` and `crossval`.
#[derive(Debug, Clone)]
pub struct OfflineOptions {
    /// Candidates to try.
    pub candidates: Vec<Candidate>,
    /// Workload groups matching this are CPU-stress runs (the stress-trained baseline).
    pub stress_pattern: Regex,
    /// Workload groups matching this stay in every training set and are never held out.
    pub always_train: Option<Regex>,
    /// Folds of the grouped k-fold used for selection; `None`: one per workload
    /// (leave-one-workload-out).
    pub folds: Option<usize>,
    /// Features offered (None = every canonical column that varies).
    pub features: Option<Vec<Feature>>,
    /// Also offer every tree model without each hardware-counter feature
    /// ([`evaluate::candidate_specs`]).
    pub counter_variants: bool,
}

impl OfflineOptions {
    /// Builds options from command-line strings.
    pub fn parse(
        models: Option<&str>,
        stress_pattern: &str,
        always_train: Option<&str>,
        folds: Option<usize>,
        features: Option<&str>,
    ) -> Result<OfflineOptions, OptionsError> {
        if folds.is_some_and(|k| k < 2) {
            return Err(OptionsError::TooFewFolds);
        }
        let features = features
            .map(|list| {
                list.split(',')
                    .map(|f| {
                        Feature::from_column(f.trim())
                            .ok_or_else(|| OptionsError::UnknownFeature { name: f.into() })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(OfflineOptions {
            candidates: match models {
                Some(list) => models::parse_models(list, models::default_candidates())?,
                None => models::default_candidates(),
            },
            stress_pattern: Regex::new(stress_pattern).map_err(OptionsError::StressPattern)?,
            always_train: always_train
                .map(Regex::new)
                .transpose()
                .map_err(OptionsError::AlwaysTrain)?,
            folds,
            features,
            counter_variants: true,
        })
    }

    /// Replaces the candidates by the named grid (`--grid`), restricted to `models` if given.
    pub fn set_grid(&mut self, grid: &str, models: Option<&str>) -> Result<(), models::GridError> {
        let grid = models::grid(grid)?;
        self.candidates = match models {
            Some(list) => models::parse_models(list, grid)?,
            None => grid,
        };
        Ok(())
    }

    /// How selection cross-validates on `s`, for reports.
    pub fn cv_name(&self, s: &NodeSamples) -> String {
        match (s.time_blocks, self.folds) {
            (Some(k), _) => format!(
                "blocked time-series CV ({k} contiguous time blocks of one workload, each held \
                 out whole)"
            ),
            (None, Some(k)) => format!("grouped {k}-fold CV"),
            (None, None) => "leave-one-workload-out CV".into(),
        }
    }

    /// Folds of the selection CV inside `pool` groups of `s`: `--folds`, or one per group
    /// (`--folds` counts the time blocks when `s` is blocked).
    pub fn inner_folds(&self, s: &NodeSamples, pool: usize) -> usize {
        match (s.time_blocks, self.folds) {
            (None, Some(k)) => k,
            _ => pool,
        }
    }

    /// The node's samples ready for cross-validation, with the groups that can be held out and
    /// those always trained on. With two or more holdable workload groups the samples are
    /// unchanged; with one (a single recorded run, say), its rows are cut into contiguous time
    /// blocks (`--folds`, default [`samples::TIME_BLOCKS`]) for a blocked time-series CV.
    pub fn cv_samples<'a>(&self, s: &'a NodeSamples) -> Result<CvSamples<'a>, NothingHoldable> {
        let (holdable, always) = self.split_groups(s);
        match holdable.as_slice() {
            [] => Err(NothingHoldable {
                node: s.node.clone(),
                groups: s.groups.clone(),
            }),
            [only] => {
                let blocked = s.with_time_blocks(*only, self.folds.unwrap_or(samples::TIME_BLOCKS));
                let (holdable, always) = self.split_groups(&blocked);
                Ok((Cow::Owned(blocked), holdable, always))
            }
            _ => Ok((Cow::Borrowed(s), holdable, always)),
        }
    }

    /// Splits the node's groups into (can be held out, always trained on).
    pub fn split_groups(&self, s: &NodeSamples) -> (Vec<usize>, Vec<usize>) {
        let always: Vec<usize> = (0..s.groups.len())
            .filter(|&g| {
                self.always_train.as_ref().is_some_and(|re| {
                    re.is_match(&s.groups[g])
                        || s.traces
                            .iter()
                            .any(|t| t.group == g && re.is_match(&t.workload))
                })
            })
            .collect();
        let holdable = (0..s.groups.len())
            .filter(|g| !always.contains(g))
            .collect();
        (holdable, always)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_errors_name_the_flag_and_the_value_once() {
        let e = OfflineOptions::parse(None, "(", None, None, None).unwrap_err();
        let text = greenpipe_common::error_chain(&e);
        assert!(
            text.starts_with("--stress-pattern: regex parse error"),
            "{text}"
        );
        assert_eq!(text.matches("--stress-pattern").count(), 1, "{text}");
        let e = OfflineOptions::parse(None, "stress", None, None, Some("cpu_nope")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown feature \"cpu_nope\"; known: "),
            "{e}"
        );
        let e = OfflineOptions::parse(Some("nope"), "stress", None, None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("unknown model family \"nope\""),
            "{e}"
        );
        let mut o = OfflineOptions::parse(None, "stress", None, None, None).unwrap();
        let e = o.set_grid("huge", None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown grid \"huge\"; known: default, classic, wide"
        );
    }
}
