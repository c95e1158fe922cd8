//! Runs many (model, training groups, scored groups) fits in parallel and scores each scored
//! group separately. `train` and `crossval` both describe their work as a list of [`Job`]s.

use indicatif::ProgressBar;

use std::collections::HashMap;

use greenpipe_common::features::Feature;

use crate::fit::{fit_reusing, par_map, predict};
use crate::metrics::{score, Score};
use crate::models::{Candidate, Fits};
use crate::samples::NodeSamples;

/// A model to evaluate: a candidate on some columns, optionally trained only on some groups.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The `model` column of the report.
    pub label: String,
    /// The regressor.
    pub candidate: Candidate,
    /// Columns of the samples it reads.
    pub columns: Vec<usize>,
    /// If set, training rows come only from these groups (the stress-only baseline).
    pub only_groups: Option<Vec<usize>>,
    /// A baseline: reported, never selected.
    pub baseline: bool,
}

/// Hardware-counter features: a tree model is also offered without each of them.
const COUNTERS: [Feature; 3] = [
    Feature::CpuCyclesPerSecond,
    Feature::CpuInstructionsPerSecond,
    Feature::CacheMissesPerSecond,
];

/// The specs `train` and `crossval` select among: every candidate on every column and, with
/// `counter_variants`, every tree model again without each hardware counter the node has
/// (labelled `name[-column]`).
///
/// Why: trees cannot extrapolate, and hardware counters are the features most likely to leave
/// their training range on an unseen workload (their meaning differs between CPUs, and
/// multiplexing adds noise). On the BSC Opteron, data_serving runs at near-idle CPU with the
/// cache-miss rate of a busy workload, and every tree model on all features overestimates it by
/// 16-18 %. Whether a node's models are better off without a counter is then decided like any
/// other choice: by the same nested CV on the training workloads, never by the held-out one.
pub fn candidate_specs(
    s: &NodeSamples,
    candidates: &[Candidate],
    counter_variants: bool,
) -> Vec<Spec> {
    let all: Vec<usize> = (0..s.features.len()).collect();
    let spec = |label: String, candidate: &Candidate, columns: Vec<usize>| Spec {
        label,
        candidate: candidate.clone(),
        columns,
        only_groups: None,
        baseline: false,
    };
    let mut specs: Vec<Spec> = candidates
        .iter()
        .map(|c| spec(c.name(), c, all.clone()))
        .collect();
    if counter_variants && all.len() > 1 {
        for c in candidates.iter().filter(|c| c.has_trees()) {
            for counter in COUNTERS {
                if let Some(drop) = s.feature_index(counter) {
                    let columns = all.iter().copied().filter(|&i| i != drop).collect();
                    specs.push(spec(
                        format!("{}[-{}]", c.name(), counter.column()),
                        c,
                        columns,
                    ));
                }
            }
        }
    }
    specs
}

/// One fit and its scoring.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index into the specs.
    pub spec: usize,
    /// Groups to train on.
    pub train_groups: Vec<usize>,
    /// Groups to score (each separately).
    pub test_groups: Vec<usize>,
}

/// Jobs shared between requests: one fit per (spec, training groups), scoring every group that
/// any request asked for. In crossval's leave-one-workload-out, the inner fold that holds out
/// `h` while `g` is the outer held-out workload trains on the same rows as the inner fold that
/// holds out `g` while `h` is outer, so the two requests share one fit.
#[derive(Debug, Default)]
pub struct Plan {
    /// The distinct jobs.
    pub jobs: Vec<Job>,
    index: std::collections::HashMap<(usize, Vec<usize>), usize>,
}

impl Plan {
    /// The job that fits `spec` on `train_groups` and scores (at least) `test_groups`.
    pub fn request(&mut self, spec: usize, train_groups: &[usize], test_groups: &[usize]) -> usize {
        let mut train = train_groups.to_vec();
        train.sort_unstable();
        let jobs = &mut self.jobs;
        let j = *self
            .index
            .entry((spec, train))
            .or_insert_with_key(|(_, train)| {
                jobs.push(Job {
                    spec,
                    train_groups: train.clone(),
                    test_groups: Vec::new(),
                });
                jobs.len() - 1
            });
        for &g in test_groups {
            if !self.jobs[j].test_groups.contains(&g) {
                self.jobs[j].test_groups.push(g);
            }
        }
        j
    }
}

/// The result of `group` in a job's results; `Err` when the job failed.
pub fn group_result(
    results: &[Result<Vec<GroupResult>, String>],
    job: usize,
    group: usize,
) -> Result<&GroupResult, &str> {
    match &results[job] {
        Ok(r) => r
            .iter()
            .find(|x| x.group == group)
            .ok_or("group not scored by this job"),
        Err(e) => Err(e),
    }
}

/// The score of one scored group.
#[derive(Debug, Clone)]
pub struct GroupResult {
    /// The group.
    pub group: usize,
    /// Its rows, in order.
    pub rows: Vec<usize>,
    /// Predictions for those rows.
    pub predicted: Vec<f64>,
    /// Scores.
    pub score: Score,
    /// Rows whose prediction the power bounds clamped.
    pub clamped: usize,
}

/// Runs every job; a job that cannot fit yields its error message.
///
/// Jobs that train on the same rows run as one task, so an ensemble takes the members that were
/// fitted standalone on those rows instead of fitting them again (the ensembles were half of
/// crossval's time). Tasks run on every core.
pub fn run(
    s: &NodeSamples,
    specs: &[Spec],
    jobs: &[Job],
    bar: &ProgressBar,
) -> Vec<Result<Vec<GroupResult>, String>> {
    let mut tasks: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let spec = &specs[job.spec];
        let mut train: Vec<usize> = job
            .train_groups
            .iter()
            .copied()
            .filter(|g| spec.only_groups.as_ref().is_none_or(|o| o.contains(g)))
            .collect();
        train.sort_unstable();
        match tasks.iter_mut().find(|(t, _)| *t == train) {
            Some((_, ids)) => ids.push(j),
            None => tasks.push((train, vec![j])),
        }
    }
    let done = par_map(
        &tasks,
        |(train, ids)| {
            let rows = s.rows_of(train);
            // Fitted models of this training set, per column list.
            let mut fits: HashMap<Vec<usize>, Fits> = HashMap::new();
            ids.iter()
                .map(|&j| {
                    let r = run_one(s, &specs[jobs[j].spec], &jobs[j], &rows, &mut fits);
                    bar.inc(1);
                    (j, r)
                })
                .collect::<Vec<_>>()
        },
        || {},
    );
    let mut out: Vec<Option<Result<Vec<GroupResult>, String>>> = vec![None; jobs.len()];
    for (j, r) in done.into_iter().flatten() {
        out[j] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every job belongs to one task"))
        .collect()
}

fn run_one(
    s: &NodeSamples,
    spec: &Spec,
    job: &Job,
    train: &[usize],
    fits: &mut HashMap<Vec<usize>, Fits>,
) -> Result<Vec<GroupResult>, String> {
    if train.is_empty() {
        return Err(format!("{}: no training rows", spec.label));
    }
    let fitted = fit_reusing(
        s,
        train,
        &spec.columns,
        &spec.candidate,
        fits.entry(spec.columns.clone()).or_default(),
    )
    .map_err(|e| format!("{}: {}", spec.label, greenpipe_common::error_chain(&e)))?;
    Ok(job
        .test_groups
        .iter()
        .map(|&g| {
            let rows = s.rows_of(&[g]);
            let (predicted, clamped) = predict(&fitted, s, &rows);
            let measured: Vec<f64> = rows.iter().map(|&i| s.y[i]).collect();
            GroupResult {
                group: g,
                score: score(&measured, &predicted),
                rows,
                predicted,
                clamped,
            }
        })
        .collect())
}

/// A progress bar for `n` fits (drawn only on a terminal).
pub fn progress(n: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} fits (eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::default_candidates;

    #[test]
    fn tree_models_are_offered_without_each_counter_the_node_has() {
        let s = NodeSamples::empty(
            "n",
            vec![
                Feature::CpuSecondsPerSecond,
                Feature::CacheMissesPerSecond,
                Feature::DiskBytesPerSecond,
            ],
        );
        let candidates = default_candidates();
        let trees = candidates.iter().filter(|c| c.has_trees()).count();
        assert!(trees > 0 && trees < candidates.len());
        let specs = candidate_specs(&s, &candidates, true);
        // One variant per tree model: the node has one counter (cache misses) of the three.
        assert_eq!(specs.len(), candidates.len() + trees);
        for v in &specs[candidates.len()..] {
            assert!(v.candidate.has_trees(), "{}", v.label);
            assert!(
                v.label.ends_with("[-cache_misses_per_second]"),
                "{}",
                v.label
            );
            assert_eq!(v.columns, [0, 2], "{}", v.label);
            assert!(!v.baseline && v.only_groups.is_none());
        }
        assert!(specs[..candidates.len()]
            .iter()
            .all(|sp| sp.columns == [0, 1, 2] && sp.label == sp.candidate.name()));
        let off = candidate_specs(&s, &candidates, false);
        assert_eq!(off.len(), candidates.len());
        // A node with CPU alone has nothing to drop.
        let cpu_only = NodeSamples::empty("n", vec![Feature::CpuSecondsPerSecond]);
        assert_eq!(
            candidate_specs(&cpu_only, &candidates, true).len(),
            candidates.len()
        );
    }
}
