//! `validate`: scores a model file on traces it never saw, through `NodeModel::predict` — the
//! exact code path of the online estimator.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context};
use greenpipe_common::features::FeatureValues;
use greenpipe_common::model::ModelFile;

use crate::offline::evaluate::GroupResult;
use crate::offline::metrics::score;
use crate::offline::report::{self, SummaryRow};
use crate::offline::{plots, samples};

/// Arguments of `validate`.
#[derive(Debug, Clone)]
pub struct ValidateArgs {
    /// Model file.
    pub model: PathBuf,
    /// Trace files or directories.
    pub traces: Vec<PathBuf>,
    /// Report directory.
    pub report: PathBuf,
}

/// Scores the model on every trace and writes the report; returns the summary rows.
pub fn run(args: &ValidateArgs) -> anyhow::Result<Vec<SummaryRow>> {
    let text = std::fs::read_to_string(&args.model)
        .with_context(|| format!("reading {}", args.model.display()))?;
    let file = ModelFile::from_json(&text).with_context(|| args.model.display().to_string())?;
    let nodes = samples::load(&args.traces, None)?;
    report::create_dir(&args.report)?;
    let mut rows = Vec::new();
    let mut md = format!(
        "# Validation of {}\n\nScored through `NodeModel::predict`, as the online estimator \
         predicts.\n\n",
        args.model.display()
    );
    for s in &nodes {
        let Some(model) = file.select(&s.node, &BTreeMap::new()) else {
            bail!("{} has no model for node {}", args.model.display(), s.node);
        };
        let missing: Vec<&str> = model
            .required_features()
            .into_iter()
            .filter(|f| s.feature_index(*f).is_none())
            .map(|f| f.column())
            .collect();
        if !missing.is_empty() {
            bail!(
                "node {}: model {} needs {missing:?}, which the traces do not provide (empty or \
                 constant)",
                s.node,
                model.name
            );
        }
        let mut per = Vec::new();
        let mut results = Vec::new();
        for g in 0..s.groups.len() {
            let rows_g = s.rows_of(&[g]);
            let predicted = rows_g
                .iter()
                .map(|&i| {
                    let mut v = FeatureValues::default();
                    for (c, &f) in s.features.iter().enumerate() {
                        v.set(f, Some(s.x.row(i)[c]));
                    }
                    model.predict(&v)
                })
                .collect::<Result<Vec<f64>, _>>()?;
            let measured: Vec<f64> = rows_g.iter().map(|&i| s.y[i]).collect();
            let sc = score(&measured, &predicted);
            per.push((s.groups[g].clone(), sc));
            results.push((
                GroupResult {
                    group: g,
                    rows: rows_g,
                    predicted,
                    score: sc,
                },
                model.name.clone(),
            ));
        }
        let node_rows = report::model_rows(&s.node, &model.name, &per);
        let _ = writeln!(md, "## {} (model `{}`)\n", s.node, model.name);
        md.push_str(&report::workload_table(&node_rows, &s.node, &[&model.name]));
        md.push('\n');
        md.push_str(&report::all_table(&node_rows));
        if let Some(cv) = model.scores.cv_mape_percent {
            let _ = writeln!(md, "\nTraining CV MAPE for comparison: {cv:.2} %.");
        }
        if let Err(e) = plots::held_out(&args.report, s, &results, "validate") {
            let _ = writeln!(md, "\n- note: plots skipped: {e:#}");
        }
        for n in &s.notes {
            let _ = writeln!(md, "- note: {n}");
        }
        md.push('\n');
        rows.extend(node_rows);
    }
    report::write_summary(&args.report, &rows)?;
    std::fs::write(args.report.join("report.md"), md)?;
    Ok(rows)
}
