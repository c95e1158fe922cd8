//! `train`: per node, grouped k-fold CV (workloads as groups) of every candidate, pick the best
//! by CV MAPE, refit it on all the node's data and write the model file the online estimator
//! reads, with standardisation, idle power, attribution weights and every CV score inside.

use std::fmt::Write as _;
use std::path::PathBuf;

use greenpipe_common::model::{
    BaselineModel, ModelError, ModelFile, NodeModel, NodeSelector, Scores, TrainingInfo,
    SCHEMA_VERSION,
};

use crate::evaluate::{self, GroupResult, Job};
use crate::metrics::{mean, Score};
use crate::report::{self, SummaryRow};
use crate::samples::{self, NodeSamples};
use crate::{attribution, baselines, cv, fit, plots, select, OfflineOptions};

/// Arguments of `train`.
#[derive(Debug, Clone)]
pub struct TrainArgs {
    /// Trace files or directories.
    pub traces: Vec<PathBuf>,
    /// Model file to write.
    pub out: PathBuf,
    /// Optional report directory.
    pub report: Option<PathBuf>,
    /// Shared options.
    pub options: OfflineOptions,
}

/// One node's training outcome.
#[derive(Debug, Clone)]
pub struct NodeTraining {
    /// The model written.
    pub model: NodeModel,
    /// CV rows of every spec.
    pub rows: Vec<SummaryRow>,
    /// CV predictions of the chosen candidate.
    pub chosen_cv: Vec<GroupResult>,
    /// Label of the chosen candidate.
    pub chosen: String,
    /// Per spec label: CV rows the power bounds clamped, and CV rows predicted.
    pub clamped: Vec<(String, usize, usize)>,
    /// Notes for the report.
    pub notes: Vec<String>,
}

/// Why `train` stopped.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Samples(#[from] samples::SamplesError),
    #[error(transparent)]
    Holdable(#[from] crate::NothingHoldable),
    #[error("node {node}: no candidate could be fitted: {notes:?}")]
    NothingFitted { node: String, notes: Vec<String> },
    #[error(transparent)]
    Fit(#[from] crate::models::FitError),
    #[error("the trained model file does not pass its own check")]
    SelfCheck(#[source] ModelError),
    #[error("creating {}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Report(#[from] report::WriteError),
}

/// Trains every node found in the traces and writes the model file (and the report).
pub fn run(args: &TrainArgs) -> Result<ModelFile, TrainError> {
    let nodes = samples::load(&args.traces, args.options.features.as_deref())?
        .iter()
        .map(|s| Ok(args.options.cv_samples(s)?.0.into_owned()))
        .collect::<Result<Vec<_>, TrainError>>()?;
    let mut trained = Vec::new();
    for s in &nodes {
        trained.push(node(s, &args.options)?);
    }
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: trained.iter().map(|t| t.model.clone()).collect(),
    };
    // Refuse to write what the online estimator would refuse to read.
    let text = file.to_json();
    ModelFile::from_json(&text).map_err(TrainError::SelfCheck)?;
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| TrainError::CreateDir {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(&args.out, text).map_err(|source| report::WriteError::Write {
        path: args.out.clone(),
        source,
    })?;
    if let Some(dir) = &args.report {
        report::create_dir(dir)?;
        let rows: Vec<SummaryRow> = trained.iter().flat_map(|t| t.rows.clone()).collect();
        report::write_summary(dir, &rows)?;
        let mut md = String::from("# Training report\n\n");
        for (s, t) in nodes.iter().zip(&mut trained) {
            let labelled: Vec<(GroupResult, String)> = t
                .chosen_cv
                .iter()
                .map(|r| (r.clone(), t.chosen.clone()))
                .collect();
            if let Err(e) = plots::held_out(dir, s, &labelled, "cv") {
                t.notes.push(format!(
                    "plots skipped: {}",
                    greenpipe_common::error_chain(&e)
                ));
            }
            md.push_str(&markdown(s, t, &args.options));
        }
        let path = dir.join("report.md");
        std::fs::write(&path, md).map_err(|source| report::WriteError::Write { path, source })?;
    }
    Ok(file)
}

/// Selects, refits and describes one node's model.
pub fn node(s: &NodeSamples, o: &OfflineOptions) -> Result<NodeTraining, TrainError> {
    let (s, holdable, always) = o.cv_samples(s)?;
    let s = s.as_ref();
    let mut notes = s.notes.clone();
    let mut specs = evaluate::candidate_specs(s, &o.candidates, o.counter_variants);
    specs.extend(baselines::specs(s, &o.stress_pattern, &mut notes));
    let splits = cv::splits(s, &holdable, &always, o.inner_folds(s, holdable.len()));
    let jobs: Vec<Job> = splits
        .iter()
        .flat_map(|split| {
            (0..specs.len()).map(move |spec| Job {
                spec,
                train_groups: split.train_groups.clone(),
                test_groups: split.test_groups.clone(),
            })
        })
        .collect();
    let bar = evaluate::progress(jobs.len(), &format!("train {}", s.node));
    let results = evaluate::run(s, &specs, &jobs, &bar);
    bar.finish_and_clear();

    let mut per_spec: Vec<Vec<GroupResult>> = vec![Vec::new(); specs.len()];
    let mut failed = vec![false; specs.len()];
    for (job, r) in jobs.iter().zip(results) {
        match r {
            Ok(r) => per_spec[job.spec].extend(r),
            Err(e) => {
                failed[job.spec] = true;
                notes.push(e);
            }
        }
    }
    let clamped = specs
        .iter()
        .zip(&per_spec)
        .map(|(spec, r)| {
            let hit = r.iter().map(|g| g.clamped).sum();
            (
                spec.label.clone(),
                hit,
                r.iter().map(|g| g.rows.len()).sum(),
            )
        })
        .collect();
    let mut rows = Vec::new();
    let mut means: Vec<Option<Score>> = Vec::new();
    for (spec, results) in specs.iter().zip(&per_spec) {
        let mut per: Vec<(String, Score)> = results
            .iter()
            .map(|r| (s.groups[r.group].clone(), r.score))
            .collect();
        per.sort_by(|a, b| a.0.cmp(&b.0));
        rows.extend(report::model_rows(&s.node, &spec.label, &per));
        means.push((!per.is_empty()).then(|| mean(&per.iter().map(|p| p.1).collect::<Vec<_>>())));
    }
    let per_candidate: Vec<Option<Vec<Score>>> = (0..specs.len())
        .map(|i| {
            (!specs[i].baseline && !failed[i])
                .then(|| per_spec[i].iter().map(|r| r.score).collect())
        })
        .collect();
    let Some(best) = select::best(&per_candidate) else {
        return Err(TrainError::NothingFitted {
            node: s.node.clone(),
            notes,
        });
    };
    let best_score = means[best].unwrap_or_default();
    let spec = &specs[best];
    let all_rows: Vec<usize> = (0..s.y.len()).collect();
    let fitted = fit::fit(s, &all_rows, &spec.columns, &spec.candidate)?;
    notes.extend(dropped_note(s, &spec.label, &fitted));
    let mut baseline_models = Vec::new();
    for b in specs.iter().filter(|b| b.baseline) {
        let rows = match &b.only_groups {
            Some(groups) => s.rows_of(groups),
            None => all_rows.clone(),
        };
        match fit::fit(s, &rows, &b.columns, &b.candidate) {
            Ok(f) => {
                notes.extend(dropped_note(s, &b.label, &f));
                baseline_models.push(BaselineModel {
                    name: b.label.clone(),
                    features: f.scaling,
                    regressor: f.kind,
                    power_bounds: Some(f.bounds),
                })
            }
            Err(e) => notes.push(format!(
                "{}: {} not stored: {}",
                s.node,
                b.label,
                greenpipe_common::error_chain(&e)
            )),
        }
    }
    let (idle, weights) = attribution::fit(&s.features, &s.x, &s.y);
    let mut scores = Scores {
        cv_mape_percent: Some(best_score.mape_percent),
        ..Default::default()
    };
    scores
        .extra
        .insert("cv_mae_watts".into(), best_score.mae_watts);
    scores
        .extra
        .insert("cv_rmse_watts".into(), best_score.rmse_watts);
    if let Some(k) = s.time_blocks {
        scores.extra.insert("cv_time_blocks".into(), k as f64);
    }
    if let Some(per) = &per_candidate[best] {
        scores
            .extra
            .insert("cv_median_mape_percent".into(), select::criterion(per).0);
    }
    if best_score.r2.is_finite() {
        scores.extra.insert("cv_r2".into(), best_score.r2);
    }
    for (spec, m) in specs.iter().zip(&means) {
        if let Some(m) = m {
            scores
                .extra
                .insert(format!("cv_mape_percent:{}", spec.label), m.mape_percent);
        }
    }
    let (from, to) = s
        .timestamp
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
    let model = NodeModel {
        name: format!("{}-{}", spec.candidate.family(), s.node),
        selector: NodeSelector {
            node: Some(s.node.clone()),
            ..Default::default()
        },
        features: fitted.scaling,
        regressor: fitted.kind,
        idle_power_watts: idle,
        attribution_weights: weights,
        training: Some(TrainingInfo {
            from,
            to,
            samples: s.y.len() as u64,
            workloads: s.traces.iter().map(|t| t.workload.clone()).collect(),
        }),
        scores,
        source: None,
        baselines: baseline_models,
        power_bounds: Some(fitted.bounds),
        recalibrations: Vec::new(),
    };
    Ok(NodeTraining {
        model,
        rows,
        chosen_cv: per_spec[best].clone(),
        chosen: spec.label.clone(),
        clamped,
        notes,
    })
}

/// What the final fit of `label` left out, for the report.
fn dropped_note(s: &NodeSamples, label: &str, f: &fit::Fitted) -> Option<String> {
    (!f.dropped.is_empty()).then(|| {
        let names: Vec<&str> = f.dropped.iter().map(|&c| s.features[c].column()).collect();
        format!(
            "{}: {label} leaves out {} (constant or collinear in its training rows); its \
             predictions are clamped into [{:.2}, {:.2}] W",
            s.node,
            names.join(", "),
            f.bounds.min_watts,
            f.bounds.max_watts
        )
    })
}

fn markdown(s: &NodeSamples, t: &NodeTraining, o: &OfflineOptions) -> String {
    let mut md = String::new();
    let m = &t.model;
    let _ = writeln!(md, "## {}\n", s.node);
    let _ = writeln!(
        md,
        "Chosen: `{}` (model `{}`), {}, mean MAPE {:.2} % over workloads {}. Rule: {}.\n",
        t.chosen,
        m.name,
        o.cv_name(s),
        m.scores.cv_mape_percent.unwrap_or(f64::NAN),
        s.groups.join(", "),
        select::RULE
    );
    md.push_str(&report::trace_list(s));
    md.push_str("Cross-validation, mean over held-out workloads (baselines side by side):\n\n");
    md.push_str(&report::all_table(&t.rows));
    md.push('\n');
    md.push_str(&report::clamp_summary(&t.clamped));
    let _ = writeln!(
        md,
        "\nIdle power: {:.2} W. Attribution weights (non-negative least squares on raw features):\n",
        m.idle_power_watts
    );
    md.push_str("| feature | mean | scale | W per unit |\n|---|---|---|---|\n");
    for (sc, w) in m.features.iter().zip(&m.attribution_weights) {
        let _ = writeln!(
            md,
            "| {} | {:.4e} | {:.4e} | {:.4e} |",
            sc.feature.column(),
            sc.mean,
            sc.scale,
            w.watts_per_unit
        );
    }
    let _ = writeln!(
        md,
        "\nPlots of the chosen candidate's CV predictions: `{0}__<workload>__cv.png`, error \
         distribution `{0}__errors__cv.png`.\n",
        report::slug(&s.node)
    );
    for n in &t.notes {
        let _ = writeln!(md, "- note: {n}");
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::TraceInfo;
    use greenpipe_common::features::Feature;
    use greenpipe_common::model::ModelKind;

    /// power = 40 + 12·cpu + 3e-8·disk over five workloads with different mixes.
    pub(crate) fn synthetic() -> NodeSamples {
        let features = vec![Feature::CpuSecondsPerSecond, Feature::DiskBytesPerSecond];
        let mut s = NodeSamples::empty("syn", features);
        for w in 0..5 {
            s.groups.push(format!("w{w}"));
            s.traces.push(TraceInfo {
                path: format!("w{w}.csv").into(),
                workload: format!("w{w}"),
                group: w,
                rows: 200,
            });
            for i in 0..200 {
                let cpu = ((i * (w + 3)) % 37) as f64 / 9.0;
                let disk = (((i * 7 + w * 11) % 29) as f64) * 1e7;
                s.x.data.extend([cpu, disk]);
                s.x.rows += 1;
                s.y.push(40.0 + 12.0 * cpu + 3e-8 * disk);
                s.timestamp.push((w * 1000 + i) as f64);
                s.trace.push(w);
                s.group.push(w);
            }
        }
        s
    }

    #[test]
    fn known_coefficients_are_recovered() {
        let s = synthetic();
        let o = OfflineOptions::parse(Some("ols,ridge,knn"), "stress", None, None, None).unwrap();
        let t = node(&s, &o).unwrap();
        let m = &t.model;
        // Exact linear data: OLS must win with ~0 CV error.
        assert!(t.chosen == "ols", "chose {}", t.chosen);
        assert!(m.scores.cv_mape_percent.unwrap() < 1e-6);
        let ModelKind::Linear {
            intercept,
            coefficients,
        } = &m.regressor
        else {
            panic!("{:?}", m.regressor)
        };
        // Back from standardised to raw units.
        let raw: Vec<f64> = coefficients
            .iter()
            .zip(&m.features)
            .map(|(c, s)| c / s.scale)
            .collect();
        let raw_intercept = intercept
            - coefficients
                .iter()
                .zip(&m.features)
                .map(|(c, s)| c * s.mean / s.scale)
                .sum::<f64>();
        assert!((raw[0] - 12.0).abs() < 1e-6, "{raw:?}");
        assert!((raw[1] - 3e-8).abs() < 1e-12, "{raw:?}");
        assert!((raw_intercept - 40.0).abs() < 1e-6, "{raw_intercept}");
        // The attribution fit sees the same non-negative truth.
        assert!(
            (m.idle_power_watts - 40.0).abs() < 1e-3,
            "{}",
            m.idle_power_watts
        );
        assert!((m.attribution_weights[0].watts_per_unit - 12.0).abs() < 1e-3);
        assert!((m.attribution_weights[1].watts_per_unit - 3e-8).abs() < 1e-11);
        // Baselines are scored beside the candidates.
        assert!(m
            .scores
            .extra
            .contains_key(&format!("cv_mape_percent:{}", baselines::CPU_ONLY)));
    }

    /// A GPU node's trace (the optional GPU columns): power follows GPU load times the clock that
    /// the power mode sets. Training reads the GPU columns, uses them, gives GPU time an
    /// attribution weight, and predicts far better than without them.
    #[test]
    fn gpu_columns_are_read_used_and_attributed() {
        use greenpipe_common::features::FeatureValues;
        use greenpipe_common::trace::{write_trace, TraceRow};
        let dir = tempfile::tempdir().unwrap();
        let clocks = [1.3e9, 0.85e9, 0.62e9, 0.42e9];
        for (w, load) in [0.7, 0.4, 0.85, 0.2, 0.95].into_iter().enumerate() {
            let mut rows = Vec::new();
            for i in 0..160 {
                let clock = clocks[i / 40];
                let gpu = (load + 0.1 * ((i * 7 % 11) as f64 / 10.0 - 0.5)).clamp(0.0, 1.0);
                let cpu = 0.2 + ((i * (w + 3)) % 13) as f64 / 5.0;
                let mut f = FeatureValues::default();
                f.set(Feature::CpuSecondsPerSecond, Some(cpu));
                f.set(Feature::GpuSecondsPerSecond, Some(gpu));
                f.set(Feature::GpuFrequencyHertz, Some(clock));
                rows.push(TraceRow {
                    timestamp: (w * 1000 + i) as f64,
                    node: "orin".into(),
                    workload: format!("w{w}"),
                    power_watts: Some(5.0 + 1.1 * cpu + 14.0 * gpu * (clock / 1.3e9).powi(2)),
                    features: f,
                });
            }
            let text = write_trace(&rows).unwrap();
            assert!(
                text.starts_with(&greenpipe_common::features::trace_header_with(
                    &Feature::ALL
                ))
            );
            std::fs::write(dir.path().join(format!("w{w}.csv")), text).unwrap();
        }
        let paths = [dir.path().to_path_buf()];
        let o = OfflineOptions::parse(Some("ols,polynomial_ridge"), "stress", None, None, None)
            .unwrap();
        let with_gpu = &samples::load(&paths, None).unwrap()[0];
        assert!(with_gpu.features.contains(&Feature::GpuSecondsPerSecond));
        assert!(with_gpu.features.contains(&Feature::GpuFrequencyHertz));
        let t = node(with_gpu, &o).unwrap();
        let gpu_weight = t
            .model
            .attribution_weights
            .iter()
            .find(|w| w.feature == Feature::GpuSecondsPerSecond)
            .map(|w| w.watts_per_unit);
        assert!(gpu_weight.is_some_and(|w| w > 1.0), "{gpu_weight:?}");
        let cpu_only = &samples::load(&paths, Some(&[Feature::CpuSecondsPerSecond])).unwrap()[0];
        let without = node(cpu_only, &o).unwrap();
        let (a, b) = (
            t.model.scores.cv_mape_percent.unwrap(),
            without.model.scores.cv_mape_percent.unwrap(),
        );
        assert!(
            a < 5.0 && b > 4.0 * a,
            "MAPE with GPU columns {a} %, without {b} %"
        );
    }

    #[test]
    fn always_train_workloads_are_never_scored() {
        let s = synthetic();
        let o = OfflineOptions::parse(Some("ols"), "stress", Some("^w0$"), Some(3), None).unwrap();
        let t = node(&s, &o).unwrap();
        assert!(t.rows.iter().all(|r| r.workload != "w0"));
        assert!(t.rows.iter().any(|r| r.workload == "w1"));
    }
}
