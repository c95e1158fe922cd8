//! `validate`: scores a model file on traces it never saw, through `NodeModel::predict` — the
//! exact code path of the online estimator.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use greenpipe_common::features::FeatureValues;
use greenpipe_common::model::{ModelError, ModelFile};

use crate::evaluate::GroupResult;
use crate::metrics::score;
use crate::plots;
use crate::report::{self, SummaryRow};
use crate::samples::{self, NodeSamples};

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

/// Why `validate` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", path.display())]
    ModelFile { path: PathBuf, source: ModelError },
    #[error(transparent)]
    Samples(#[from] samples::SamplesError),
    #[error(transparent)]
    Report(#[from] report::WriteError),
    #[error("{} has no model for node {node}", path.display())]
    NoModel { path: PathBuf, node: String },
    #[error(
        "node {node}: model {model} needs {missing:?}, which the traces do not provide (empty or \
         constant)"
    )]
    MissingFeatures {
        node: String,
        model: String,
        missing: Vec<&'static str>,
    },
    /// A prediction failed (the model file passed its check, so this is a defect in it).
    #[error(transparent)]
    Predict(ModelError),
}

/// Scores the model on every trace and writes the report; returns the summary rows.
pub fn run(args: &ValidateArgs) -> Result<Vec<SummaryRow>, ValidateError> {
    let text = std::fs::read_to_string(&args.model).map_err(|source| ValidateError::Read {
        path: args.model.clone(),
        source,
    })?;
    let file = ModelFile::from_json(&text).map_err(|source| ValidateError::ModelFile {
        path: args.model.clone(),
        source,
    })?;
    // Every column a model or baseline of the file reads, constant ones included.
    let mut columns: Vec<_> = file
        .models
        .iter()
        .flat_map(|m| {
            m.required_features().into_iter().chain(
                m.baselines
                    .iter()
                    .flat_map(|b| b.features.iter().map(|f| f.feature)),
            )
        })
        .collect();
    columns.sort();
    columns.dedup();
    let nodes = samples::load_columns(&args.traces, &columns)?;
    report::create_dir(&args.report)?;
    let mut rows = Vec::new();
    let mut md = format!(
        "# Validation of {}\n\nScored through `NodeModel::predict`, as the online estimator \
         predicts, beside the baselines trained with it.\n\n",
        args.model.display()
    );
    for s in &nodes {
        let Some(model) = file.select(&s.node, &BTreeMap::new()) else {
            return Err(ValidateError::NoModel {
                path: args.model.clone(),
                node: s.node.clone(),
            });
        };
        let missing: Vec<&'static str> = model
            .required_features()
            .into_iter()
            .filter(|f| s.feature_index(*f).is_none())
            .map(|f| f.column())
            .collect();
        if !missing.is_empty() {
            return Err(ValidateError::MissingFeatures {
                node: s.node.clone(),
                model: model.name.clone(),
                missing,
            });
        }
        // The model, then every stored baseline the traces can feed, scored side by side.
        let mut node_rows = Vec::new();
        let mut results = Vec::new();
        let mut labels = vec![model.name.as_str()];
        let mut clamped = Vec::new();
        let (rows_m, results_m) = score_groups(s, &model.name, |v| model.predict_bounded(v))?;
        clamped.push(clamp_count(&model.name, &results_m));
        node_rows.extend(rows_m);
        results.extend(results_m);
        let mut skipped = Vec::new();
        for b in &model.baselines {
            if let Some(f) = b
                .features
                .iter()
                .find(|f| s.feature_index(f.feature).is_none())
            {
                skipped.push(format!(
                    "baseline {} not scored: the traces lack {}",
                    b.name,
                    f.feature.column()
                ));
                continue;
            }
            let (rows_b, results_b) = score_groups(s, &b.name, |v| b.predict_bounded(v))?;
            clamped.push(clamp_count(&b.name, &results_b));
            node_rows.extend(rows_b);
            labels.push(&b.name);
        }
        if model.baselines.is_empty() {
            skipped.push(
                "the model file stores no baselines to score beside the model (bundled profiles \
                 and files trained before baselines were stored have none)"
                    .into(),
            );
        }
        let _ = writeln!(md, "## {} (model `{}`)\n", s.node, model.name);
        md.push_str(&report::workload_table(&node_rows, &s.node, &labels));
        md.push('\n');
        md.push_str(&report::all_table(&node_rows));
        md.push('\n');
        md.push_str(&report::clamp_summary(&clamped));
        if let Some(cv) = model.scores.cv_mape_percent {
            let _ = writeln!(md, "\nTraining CV MAPE for comparison: {cv:.2} %.");
        }
        if let Err(e) = plots::held_out(&args.report, s, &results, "validate") {
            let _ = writeln!(
                md,
                "\n- note: plots skipped: {}",
                greenpipe_common::error_chain(&e)
            );
        }
        for n in s.notes.iter().chain(&skipped) {
            let _ = writeln!(md, "- note: {n}");
        }
        md.push('\n');
        rows.extend(node_rows);
    }
    report::write_summary(&args.report, &rows)?;
    let path = args.report.join("report.md");
    std::fs::write(&path, md).map_err(|source| report::WriteError::Write { path, source })?;
    Ok(rows)
}

/// Held-out predictions with the label of the model that made them (what the plots draw).
type Labelled = Vec<(GroupResult, String)>;

/// `(label, clamped rows, rows)` over one predictor's results.
fn clamp_count(label: &str, results: &Labelled) -> (String, usize, usize) {
    (
        label.to_string(),
        results.iter().map(|r| r.0.clamped).sum(),
        results.iter().map(|r| r.0.rows.len()).sum(),
    )
}

/// Per-workload rows (and the plot data) of one predictor over every group of the node.
fn score_groups(
    s: &NodeSamples,
    label: &str,
    predict: impl Fn(&FeatureValues) -> Result<(f64, bool), ModelError>,
) -> Result<(Vec<SummaryRow>, Labelled), ValidateError> {
    let mut per = Vec::new();
    let mut results = Vec::new();
    for g in 0..s.groups.len() {
        let rows_g = s.rows_of(&[g]);
        let mut clamped = 0;
        let predicted = rows_g
            .iter()
            .map(|&i| {
                let mut v = FeatureValues::default();
                for (c, &f) in s.features.iter().enumerate() {
                    v.set(f, Some(s.x.row(i)[c]));
                }
                let (w, hit) = predict(&v)?;
                clamped += usize::from(hit);
                Ok(w)
            })
            .collect::<Result<Vec<f64>, ModelError>>()
            .map_err(ValidateError::Predict)?;
        let measured: Vec<f64> = rows_g.iter().map(|&i| s.y[i]).collect();
        let sc = score(&measured, &predicted);
        per.push((s.groups[g].clone(), sc));
        results.push((
            GroupResult {
                group: g,
                rows: rows_g,
                predicted,
                score: sc,
                clamped,
            },
            label.to_string(),
        ));
    }
    Ok((report::model_rows(&s.node, label, &per), results))
}
