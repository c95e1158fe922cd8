//! `campaign run`'s second half, and all of `campaign report`: a trace for every complete window
//! (`dataset`, the meter as the label), `train` on the `train` traces, `validate` on the
//! `validate` traces with the baselines stored in the model, and the energy of every window.
//! Each stage keeps what exists: a trace or model already in the directory is reused, so a
//! report can be rebuilt without touching what it was built from.

use std::path::{Path, PathBuf};

use greenpipe_common::model::{ModelError, ModelFile, NodeModel};
use greenpipe_common::trace::{write_trace, TraceError};

use crate::energy::{self, SourceEnergy};
use crate::plan::{Plan, Tag};
use crate::windows::{self, Status, Window};
use greenpipe_offline::dataset::{self, DatasetArgs};
use greenpipe_offline::report::SummaryRow;
use greenpipe_offline::train::{self, TrainArgs};
use greenpipe_offline::validate::{self, ValidateArgs};
use greenpipe_offline::OfflineOptions;

/// What became of one step.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// Its last record (none if it never ran).
    pub window: Option<Window>,
    /// Its trace, when one could be made.
    pub trace: Option<PathBuf>,
    /// Rows with meter power in the trace.
    pub metered_rows: usize,
    /// Why it is not used, if it is not.
    pub skipped: Option<String>,
    /// Energy per power source.
    pub energy: Vec<SourceEnergy>,
}

/// Everything the report is built from.
#[derive(Debug)]
pub struct Analysis {
    /// Per plan step, in plan order.
    pub steps: Vec<(String, StepResult)>,
    /// The node's trained model.
    pub model: Option<NodeModel>,
    /// Validation rows (model and baselines).
    pub validation: Vec<SummaryRow>,
    /// Problems met on the way.
    pub notes: Vec<String>,
}

/// Paths inside a campaign directory.
pub fn trace_path(out: &Path, tag: Tag, step: &str) -> PathBuf {
    out.join("traces")
        .join(tag.as_str())
        .join(format!("{step}.csv"))
}

/// The model file of a campaign.
pub fn model_path(out: &Path) -> PathBuf {
    out.join("model.json")
}

/// Why the analysis stopped (a stage that fails for one step or model is a note instead).
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Windows(#[from] windows::WindowsError),
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Options(#[from] greenpipe_offline::OptionsError),
    #[error("{}", path.display())]
    ModelFile { path: PathBuf, source: ModelError },
}

/// Why a window's trace could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum StepTraceError {
    #[error("trace path has a parent")]
    NoParent,
    #[error(transparent)]
    Extract(#[from] dataset::ExtractError),
    #[error("creating {}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Runs the stages. `retrain` replaces an existing model file.
pub fn analyse(
    plan: &Plan,
    out: &Path,
    prometheus_url: &str,
    node: &str,
    retrain: bool,
) -> Result<Analysis, AnalysisError> {
    let records = windows::read(out)?;
    let latest = windows::latest(&records);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AnalysisError::Runtime)?;
    let mut notes = Vec::new();
    let mut steps = Vec::new();
    for st in &plan.steps {
        let window = latest.get(st.name.as_str()).map(|w| (*w).clone());
        let mut r = StepResult {
            window: window.clone(),
            trace: None,
            metered_rows: 0,
            skipped: None,
            energy: Vec::new(),
        };
        match &window {
            None => r.skipped = Some("never ran".into()),
            Some(w) if w.status != Status::Complete => {
                r.skipped = Some(format!(
                    "{}: {}",
                    match w.status {
                        Status::Failed => "failed",
                        _ => "interrupted",
                    },
                    w.error.as_deref().unwrap_or("no reason recorded")
                ))
            }
            Some(w) => match trace(&runtime, out, prometheus_url, node, w) {
                Ok((path, metered)) => {
                    r.metered_rows = metered;
                    if metered < greenpipe_common::trace::MIN_ROWS {
                        r.skipped = Some(format!(
                            "no meter data in the window ({metered} rows with power): not used \
                             for training or validation"
                        ));
                    } else {
                        r.trace = Some(path);
                    }
                }
                Err(e) => {
                    r.skipped = Some(format!("no trace: {}", greenpipe_common::error_chain(&e)))
                }
            },
        }
        steps.push((st.name.clone(), r));
    }
    let of_tag = |tag: Tag| -> Vec<PathBuf> {
        plan.steps
            .iter()
            .zip(&steps)
            .filter(|(st, _)| st.tag == tag)
            .filter_map(|(_, (_, r))| r.trace.clone())
            .collect()
    };
    let model_file = model_path(out);
    if retrain || !model_file.exists() {
        let train_traces = of_tag(Tag::Train);
        let mut options = OfflineOptions::parse(
            plan.campaign.models.as_deref(),
            &plan.campaign.stress_pattern,
            None,
            None,
            None,
        )?;
        options.counter_variants = !plan.campaign.no_counter_variants;
        if let Err(e) = train::run(&TrainArgs {
            traces: train_traces,
            out: model_file.clone(),
            report: Some(out.join("train")),
            options,
        }) {
            notes.push(format!(
                "train failed: {}",
                greenpipe_common::error_chain(&e)
            ));
        }
    }
    let model = match std::fs::read_to_string(&model_file) {
        Ok(text) => {
            let file = ModelFile::from_json(&text).map_err(|source| AnalysisError::ModelFile {
                path: model_file.clone(),
                source,
            })?;
            file.select(node, &Default::default()).cloned()
        }
        Err(_) => None,
    };
    let mut validation = Vec::new();
    let validate_traces = of_tag(Tag::Validate);
    if model.is_some() && !validate_traces.is_empty() {
        match validate::run(&ValidateArgs {
            model: model_file.clone(),
            traces: validate_traces,
            report: out.join("validate"),
        }) {
            Ok(rows) => validation = rows,
            Err(e) => notes.push(format!(
                "validate failed: {}",
                greenpipe_common::error_chain(&e)
            )),
        }
    } else if model.is_none() {
        notes.push("no model, so no validation and no energy figures".into());
    } else {
        notes.push("no validation trace with meter data".into());
    }
    if let Some(m) = &model {
        for (name, r) in &mut steps {
            let Some(w) = r.window.as_ref().filter(|w| w.status == Status::Complete) else {
                continue;
            };
            match runtime.block_on(energy::window(prometheus_url, m, node, w.start, w.end)) {
                Ok(e) => r.energy = e,
                Err(e) => notes.push(format!(
                    "{name}: energy not computed: {}",
                    greenpipe_common::error_chain(&e)
                )),
            }
        }
    }
    Ok(Analysis {
        steps,
        model,
        validation,
        notes,
    })
}

/// The trace of a window (extracted once, then reused); returns its path and metered rows.
fn trace(
    runtime: &tokio::runtime::Runtime,
    out: &Path,
    prometheus_url: &str,
    node: &str,
    w: &Window,
) -> Result<(PathBuf, usize), StepTraceError> {
    let path = trace_path(out, w.tag, &w.workload);
    if !path.exists() {
        let dir = path.parent().ok_or(StepTraceError::NoParent)?.to_path_buf();
        let args = DatasetArgs {
            prometheus_url: prometheus_url.to_string(),
            node: node.to_string(),
            from: format!("{:.3}", w.start),
            to: format!("{:.3}", w.end),
            step: "1s".into(),
            rate_window: "5s".into(),
            workload: w.workload.clone(),
            out: dir.clone(),
            force: false,
        };
        let rows = runtime.block_on(dataset::extract(&args))?;
        let metered: Vec<_> = rows
            .into_iter()
            .filter(|r| r.power_watts.is_some())
            .collect();
        if metered.len() < greenpipe_common::trace::MIN_ROWS {
            return Ok((path, metered.len()));
        }
        std::fs::create_dir_all(&dir).map_err(|source| StepTraceError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        std::fs::write(&path, write_trace(&metered)?).map_err(|source| StepTraceError::Write {
            path: path.clone(),
            source,
        })?;
    }
    let text = std::fs::read_to_string(&path).map_err(|source| StepTraceError::Read {
        path: path.clone(),
        source,
    })?;
    let rows = greenpipe_common::trace::parse_trace(&path.display().to_string(), &text)?;
    Ok((
        path,
        rows.iter().filter(|r| r.power_watts.is_some()).count(),
    ))
}
