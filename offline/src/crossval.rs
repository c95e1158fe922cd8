//! `crossval`: leave-one-workload-out for every candidate and both baselines, plus the nested
//! selection (`model=selected`): for each held-out workload, the candidate that `train` would
//! have picked by grouped CV on the other workloads alone, scored on the held-out one. That
//! figure includes the cost of choosing, so it is the honest one.

use std::fmt::Write as _;
use std::path::PathBuf;

use regex::Regex;

use crate::evaluate::{self, group_result, Plan};
use crate::metrics::Score;
use crate::plots;
use crate::report::{self, SummaryRow};
use crate::samples::{self, NodeSamples};
use crate::{baselines, cv, predictions, select, OfflineOptions};

/// The `model` label of the nested-selection rows.
pub const SELECTED: &str = "selected";

/// Arguments of `crossval`.
#[derive(Debug, Clone)]
pub struct CrossvalArgs {
    /// Trace files or directories.
    pub traces: Vec<PathBuf>,
    /// Report directory.
    pub report: PathBuf,
    /// Shared options.
    pub options: OfflineOptions,
    /// If set, every fit's predictions are written here (see `predictions.rs`).
    pub dump_predictions: Option<PathBuf>,
}

/// What crossval found for one node.
#[derive(Debug, Clone)]
pub struct NodeCrossval {
    /// Summary rows of the node.
    pub rows: Vec<SummaryRow>,
    /// Per held-out workload: the candidate chosen by the inner CV.
    pub chosen: Vec<(String, String)>,
    /// Per model label (`selected` first): held-out rows the power bounds clamped, and rows.
    pub clamped: Vec<(String, usize, usize)>,
    /// How the node was cross-validated (workloads, or time blocks of one workload).
    pub cv_name: String,
    /// Notes for the report.
    pub notes: Vec<String>,
}

/// Why `crossval` stopped.
#[derive(Debug, thiserror::Error)]
pub enum CrossvalError {
    #[error(transparent)]
    Samples(#[from] samples::SamplesError),
    #[error(transparent)]
    Holdable(#[from] crate::NothingHoldable),
    #[error(
        "node {node}: {holdable} workload(s) can be held out; leave-one-workload-out needs at \
         least 2"
    )]
    TooFewHoldable { node: String, holdable: usize },
    #[error(transparent)]
    Report(#[from] report::WriteError),
}

/// Runs crossval and writes the report.
pub fn run(args: &CrossvalArgs) -> Result<Vec<NodeCrossval>, CrossvalError> {
    let nodes = samples::load(&args.traces, args.options.features.as_deref())?
        .iter()
        .map(|s| Ok(args.options.cv_samples(s)?.0.into_owned()))
        .collect::<Result<Vec<_>, CrossvalError>>()?;
    report::create_dir(&args.report)?;
    let mut out = Vec::new();
    for s in &nodes {
        out.push(node(s, args)?);
    }
    let rows: Vec<SummaryRow> = out.iter().flat_map(|n| n.rows.clone()).collect();
    report::write_summary(&args.report, &rows)?;
    let path = args.report.join("report.md");
    std::fs::write(&path, markdown(&nodes, &out, &args.options))
        .map_err(|source| report::WriteError::Write { path, source })?;
    Ok(out)
}

fn node(s: &NodeSamples, args: &CrossvalArgs) -> Result<NodeCrossval, CrossvalError> {
    let o = &args.options;
    let (holdable, always) = o.split_groups(s);
    if holdable.len() < 2 {
        return Err(CrossvalError::TooFewHoldable {
            node: s.node.clone(),
            holdable: holdable.len(),
        });
    }
    let mut notes = s.notes.clone();
    let mut specs = evaluate::candidate_specs(s, &o.candidates, o.counter_variants);
    let candidates = specs.len();
    specs.extend(baselines::specs(s, &o.stress_pattern, &mut notes));

    // Outer jobs: every spec trained without the held-out workload. Inner jobs: the candidates
    // under train's CV inside the other holdable workloads. The plan shares identical fits: with
    // leave-one-workload-out inside, "without g, then without h" and "without h, then without g"
    // are one fit.
    let mut plan = Plan::default();
    let mut outer_of: Vec<Vec<usize>> = Vec::new();
    // inner_of[gi]: (candidate, job, scored group) of held-out holdable[gi]'s inner CV.
    let mut inner_of: Vec<Vec<(usize, usize, usize)>> = Vec::new();
    for &g in &holdable {
        let others: Vec<usize> = (0..s.groups.len()).filter(|&x| x != g).collect();
        outer_of.push(
            (0..specs.len())
                .map(|spec| plan.request(spec, &others, &[g]))
                .collect(),
        );
        let pool: Vec<usize> = holdable.iter().copied().filter(|&x| x != g).collect();
        let mut inner = Vec::new();
        for split in cv::splits(s, &pool, &always, o.inner_folds(s, pool.len())) {
            for c in 0..candidates {
                let j = plan.request(c, &split.train_groups, &split.test_groups);
                inner.extend(split.test_groups.iter().map(|&h| (c, j, h)));
            }
        }
        inner_of.push(inner);
    }
    let jobs = plan.jobs;
    let bar = evaluate::progress(jobs.len(), &format!("crossval {}", s.node));
    let results = evaluate::run(s, &specs, &jobs, &bar);
    bar.finish_and_clear();
    if let Some(dir) = &args.dump_predictions {
        predictions::write(dir, s, &specs, &jobs, &results)?;
    }

    let mut rows = Vec::new();
    let mut clamped = Vec::new();
    for (si, spec) in specs.iter().enumerate() {
        let mut per = Vec::new();
        let (mut hit, mut of) = (0, 0);
        for (gi, &g) in holdable.iter().enumerate() {
            match group_result(&results, outer_of[gi][si], g) {
                Ok(r) => {
                    per.push((s.groups[g].clone(), r.score));
                    hit += r.clamped;
                    of += r.rows.len();
                }
                Err(e) => notes.push(format!("{}: held out {}: {e}", s.node, s.groups[g])),
            }
        }
        rows.extend(report::model_rows(&s.node, &spec.label, &per));
        clamped.push((spec.label.clone(), hit, of));
    }

    // Nested selection, by the rule `train` applies.
    let mut selected = Vec::new();
    let (mut selected_hit, mut selected_of) = (0, 0);
    let mut chosen = Vec::new();
    let mut plot_data = Vec::new();
    for (gi, &g) in holdable.iter().enumerate() {
        let mut per_candidate: Vec<Option<Vec<Score>>> = vec![Some(Vec::new()); candidates];
        for &(c, j, h) in &inner_of[gi] {
            match group_result(&results, j, h) {
                Ok(r) => {
                    if let Some(v) = &mut per_candidate[c] {
                        v.push(r.score);
                    }
                }
                Err(_) => per_candidate[c] = None,
            }
        }
        let Some(best) = select::best(&per_candidate) else {
            notes.push(format!(
                "{}: no candidate fitted without {}",
                s.node, s.groups[g]
            ));
            continue;
        };
        if let Ok(r) = group_result(&results, outer_of[gi][best], g) {
            selected.push((s.groups[g].clone(), r.score));
            selected_hit += r.clamped;
            selected_of += r.rows.len();
            chosen.push((s.groups[g].clone(), specs[best].label.clone()));
            plot_data.push((r.clone(), specs[best].label.clone()));
        }
    }
    rows.extend(report::model_rows(&s.node, SELECTED, &selected));
    clamped.insert(0, (SELECTED.to_string(), selected_hit, selected_of));

    if let Err(e) = plots::held_out(&args.report, s, &plot_data, SELECTED) {
        notes.push(format!(
            "{}: plots skipped: {}",
            s.node,
            greenpipe_common::error_chain(&e)
        ));
    }
    Ok(NodeCrossval {
        rows,
        chosen,
        clamped,
        notes,
        cv_name: o.cv_name(s),
    })
}

fn markdown(nodes: &[NodeSamples], out: &[NodeCrossval], o: &OfflineOptions) -> String {
    let mut md = String::from("# Leave-one-workload-out cross-validation\n\n");
    let _ = writeln!(
        md,
        "Every workload is held out in turn; models are trained on all the others. \
         `selected` is the nested selection: for each held-out workload, what `train` would \
         choose from the other workloads alone ({}, by the same CV inside them), scored on the \
         held-out one. \
         Workloads matching `{}` always stay in training. Baselines: `{}` and `{}` \
         (workloads matching `{}`).\n",
        select::RULE,
        o.always_train
            .as_ref()
            .map(Regex::as_str)
            .unwrap_or("(none)"),
        baselines::CPU_ONLY,
        baselines::STRESS_ONLY,
        o.stress_pattern.as_str()
    );
    for (s, n) in nodes.iter().zip(out) {
        let _ = writeln!(md, "## {}\n", s.node);
        let _ = writeln!(
            md,
            "Features: {}. Samples: {}. Workload groups: {}.\n",
            s.features
                .iter()
                .map(|f| f.column())
                .collect::<Vec<_>>()
                .join(", "),
            s.y.len(),
            s.groups.join(", ")
        );
        let _ = writeln!(md, "Cross-validation: {}.\n", n.cv_name);
        md.push_str(&report::trace_list(s));
        md.push_str(&report::all_table(&n.rows));
        md.push('\n');
        md.push_str(&report::clamp_summary(&n.clamped));
        md.push('\n');
        let mut models = vec![SELECTED, baselines::CPU_ONLY, baselines::STRESS_ONLY];
        let best_fixed = n
            .rows
            .iter()
            .filter(|r| r.workload == report::ALL && r.model != SELECTED)
            .filter(|r| !r.model.starts_with("baseline"))
            .min_by(|a, b| a.score.mape_percent.total_cmp(&b.score.mape_percent));
        if let Some(b) = best_fixed {
            models.push(&b.model);
        }
        md.push_str(&report::workload_table(&n.rows, &s.node, &models));
        md.push_str("\nChosen per held-out workload:\n\n");
        for (w, c) in &n.chosen {
            let plot = |name: &str| {
                format!(
                    "[{0}]({1}__{0}__selected.png)",
                    report::slug(name),
                    report::slug(&s.node)
                )
            };
            let plots: Vec<String> = if s.time_blocks.is_some() {
                vec![plot(w)]
            } else {
                s.traces
                    .iter()
                    .filter(|t| s.groups[t.group] == *w)
                    .map(|t| plot(&t.workload))
                    .collect()
            };
            let _ = writeln!(md, "- {w}: `{c}` (plots: {})", plots.join(", "));
        }
        let _ = writeln!(
            md,
            "\nError distribution: [{0}__errors__selected.png]({0}__errors__selected.png)\n",
            report::slug(&s.node)
        );
        for note in &n.notes {
            let _ = writeln!(md, "- note: {note}");
        }
        md.push('\n');
    }
    md.push_str(&selection_gap_section(out));
    md
}

/// How the selected model of one node compares with fixed candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionGap {
    /// Node.
    pub node: String,
    /// `selected` mean held-out MAPE.
    pub selected: f64,
    /// The fixed candidate best on this node, in hindsight, and its MAPE.
    pub best_here: (String, f64),
    /// Leave one machine out: the fixed candidate with the lowest mean MAPE over the other
    /// nodes (among those scored on every node), and its MAPE on this one; `None` with a single
    /// node.
    pub lomo: Option<(String, f64)>,
}

/// For every node, `selected` against the best fixed candidate: in hindsight on the node, and
/// the one a user would have shipped from the other nodes (leave one machine out). A selection
/// that does not pay off shows as `selected` above the LOMO candidate's score.
pub fn selection_gaps(rows: &[SummaryRow]) -> Vec<SelectionGap> {
    let all: Vec<&SummaryRow> = rows.iter().filter(|r| r.workload == report::ALL).collect();
    let mut nodes: Vec<&str> = Vec::new();
    for r in &all {
        if !nodes.contains(&r.node.as_str()) {
            nodes.push(&r.node);
        }
    }
    let fixed = |r: &&&SummaryRow| r.model != SELECTED && !r.model.starts_with("baseline");
    let score = |node: &str, model: &str| {
        all.iter()
            .find(|r| r.node == node && r.model == model)
            .map(|r| r.score.mape_percent)
    };
    let mut everywhere: Vec<&str> = Vec::new();
    for r in all.iter().filter(fixed) {
        if !everywhere.contains(&r.model.as_str())
            && nodes.iter().all(|n| score(n, &r.model).is_some())
        {
            everywhere.push(&r.model);
        }
    }
    nodes
        .iter()
        .filter_map(|&node| {
            let selected = score(node, SELECTED)?;
            let best = all
                .iter()
                .filter(fixed)
                .filter(|r| r.node == node)
                .min_by(|a, b| a.score.mape_percent.total_cmp(&b.score.mape_percent))?;
            let lomo = (nodes.len() > 1)
                .then(|| {
                    everywhere
                        .iter()
                        .map(|&m| {
                            let others: Vec<f64> = nodes
                                .iter()
                                .filter(|&&n| n != node)
                                .filter_map(|n| score(n, m))
                                .collect();
                            (m, others.iter().sum::<f64>() / others.len() as f64)
                        })
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .and_then(|(m, _)| Some((m.to_string(), score(node, m)?)))
                })
                .flatten();
            Some(SelectionGap {
                node: node.into(),
                selected,
                best_here: (best.model.clone(), best.score.mape_percent),
                lomo,
            })
        })
        .collect()
}

fn selection_gap_section(out: &[NodeCrossval]) -> String {
    let rows: Vec<SummaryRow> = out.iter().flat_map(|n| n.rows.clone()).collect();
    let gaps = selection_gaps(&rows);
    let mut md = String::from("## Does selection pay off?\n\n");
    md.push_str(
        "`selected` against fixed candidates, mean held-out MAPE. *LOMO candidate*: the fixed \
         candidate with the lowest mean MAPE on the other nodes, the one a model chosen without \
         this node's data would be; *best here*: the best fixed candidate on this node, known \
         only in hindsight. A positive gap to the LOMO candidate means selection on this node \
         did worse than shipping that one candidate.\n\n",
    );
    md.push_str(
        "| node | selected | LOMO candidate | its MAPE | selected − LOMO | best here | its MAPE \
         | selected − best |\n|---|---|---|---|---|---|---|---|\n",
    );
    for g in &gaps {
        let (lomo_name, lomo_mape, lomo_gap) = match &g.lomo {
            Some((m, v)) => (
                format!("`{m}`"),
                format!("{v:.2} %"),
                format!("{:+.2}", g.selected - v),
            ),
            None => ("(one node only)".into(), "".into(), "".into()),
        };
        let _ = writeln!(
            md,
            "| {} | {:.2} % | {lomo_name} | {lomo_mape} | {lomo_gap} | `{}` | {:.2} % | {:+.2} |",
            g.node,
            g.selected,
            g.best_here.0,
            g.best_here.1,
            g.selected - g.best_here.1
        );
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Score;

    fn row(node: &str, model: &str, mape: f64) -> SummaryRow {
        SummaryRow {
            node: node.into(),
            workload: report::ALL.into(),
            model: model.into(),
            score: Score {
                mape_percent: mape,
                ..Score::default()
            },
        }
    }

    #[test]
    fn the_lomo_candidate_is_chosen_on_the_other_nodes_only() {
        // forest is best on a and b, ridge on c; knn only exists on a.
        let rows = vec![
            row("a", SELECTED, 5.0),
            row("a", "forest", 4.0),
            row("a", "ridge", 6.0),
            row("a", "knn", 1.0),
            row("a", "baseline_cpu_linear", 0.5),
            row("b", SELECTED, 7.0),
            row("b", "forest", 6.0),
            row("b", "ridge", 9.0),
            row("c", SELECTED, 3.0),
            row("c", "forest", 8.0),
            row("c", "ridge", 2.0),
        ];
        let g = selection_gaps(&rows);
        assert_eq!(g.len(), 3);
        // a: the knn row exists only on a, so it is best here but not a LOMO candidate.
        assert_eq!(g[0].best_here, ("knn".into(), 1.0));
        // Without a: forest (6+8)/2 = 7 against ridge (9+2)/2 = 5.5: ridge.
        assert_eq!(g[0].lomo, Some(("ridge".into(), 6.0)));
        // Without b: forest 6, ridge 4: ridge. Without c: forest 5, ridge 7.5: forest.
        assert_eq!(g[1].lomo, Some(("ridge".into(), 9.0)));
        assert_eq!(g[2].lomo, Some(("forest".into(), 8.0)));
        assert_eq!(g[2].selected, 3.0);
        let one = selection_gaps(&rows[..5]);
        assert_eq!(one[0].lomo, None);
    }
}
