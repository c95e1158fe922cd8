//! Trace files → one in-memory sample table per node.
//!
//! Rows without power are dropped (nothing to learn from), feature columns that are empty or
//! constant over a node's whole training set are left out (and reported), and rows that lack a
//! used feature are dropped and counted: every exclusion ends up in the report, none is silent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use greenpipe_common::features::Feature;
use greenpipe_common::model::FeatureScaling;
use greenpipe_common::trace::{column_status, parse_trace, ColumnStatus, TraceError, TraceRow};

/// Why traces could not be turned into samples. Each names the path, file or node.
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    /// A trace directory could not be listed.
    #[error("reading directory {}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A path given does not exist.
    #[error("trace path {} does not exist", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// The paths hold no `*.csv`.
    #[error("no trace CSV files under {paths:?}")]
    NoFiles {
        /// The paths given.
        paths: Vec<PathBuf>,
    },
    /// A trace file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A trace file is malformed (the error names the file and line).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Every feature column of a node is empty or constant.
    #[error("node {node}: no feature column varies in its traces; nothing to train on")]
    NothingVaries {
        /// The node.
        node: String,
    },
    /// A trace holds two workloads.
    #[error("{}: holds workloads {first:?} and {other:?}; write one workload per trace", path.display())]
    MixedWorkloads {
        /// The file.
        path: PathBuf,
        /// Its first row's workload.
        first: String,
        /// Another row's.
        other: String,
    },
}

/// Row-major matrix of f64.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows * cols` values, row after row.
    pub data: Vec<f64>,
}

impl Matrix {
    /// One row.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// The rows `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> Matrix {
        let mut data = Vec::with_capacity(idx.len() * self.cols);
        for &i in idx {
            data.extend_from_slice(self.row(i));
        }
        Matrix {
            rows: idx.len(),
            cols: self.cols,
            data,
        }
    }

    /// Only the columns `cols`, in that order.
    pub fn columns(&self, cols: &[usize]) -> Matrix {
        let mut data = Vec::with_capacity(self.rows * cols.len());
        for i in 0..self.rows {
            let r = self.row(i);
            data.extend(cols.iter().map(|&c| r[c]));
        }
        Matrix {
            rows: self.rows,
            cols: cols.len(),
            data,
        }
    }

    /// Mean and standard deviation per column (scale 1 for a constant column, so the file stays
    /// valid).
    pub fn standardisation(&self, features: &[Feature]) -> Vec<FeatureScaling> {
        (0..self.cols)
            .map(|c| {
                let n = self.rows.max(1) as f64;
                let mean = (0..self.rows).map(|i| self.row(i)[c]).sum::<f64>() / n;
                let var = (0..self.rows)
                    .map(|i| (self.row(i)[c] - mean).powi(2))
                    .sum::<f64>()
                    / n;
                let scale = var.sqrt();
                FeatureScaling {
                    feature: features[c],
                    mean,
                    scale: if scale > 0.0 && scale.is_finite() {
                        scale
                    } else {
                        1.0
                    },
                }
            })
            .collect()
    }

    /// `(x - mean) / scale` column by column.
    pub fn standardised(&self, scaling: &[FeatureScaling]) -> Matrix {
        let mut out = self.clone();
        for row in out.data.chunks_mut(self.cols) {
            for (v, s) in row.iter_mut().zip(scaling) {
                *v = (*v - s.mean) / s.scale;
            }
        }
        out
    }
}

/// One trace file as loaded.
#[derive(Debug, Clone)]
pub struct TraceInfo {
    /// Where it came from.
    pub path: PathBuf,
    /// Workload name (from the rows).
    pub workload: String,
    /// Index into [`NodeSamples::groups`].
    pub group: usize,
    /// Rows kept.
    pub rows: usize,
}

/// Every usable sample of one node.
#[derive(Debug, Clone)]
pub struct NodeSamples {
    /// Node name.
    pub node: String,
    /// Features used, in column order of `x`.
    pub features: Vec<Feature>,
    /// Raw feature values.
    pub x: Matrix,
    /// Measured power, watts.
    pub y: Vec<f64>,
    /// Unix seconds.
    pub timestamp: Vec<f64>,
    /// Index into `traces` per row.
    pub trace: Vec<usize>,
    /// Workload group per row (index into `groups`).
    pub group: Vec<usize>,
    /// Workload group names (see [`workload_group`]).
    pub groups: Vec<String>,
    /// Trace files.
    pub traces: Vec<TraceInfo>,
    /// What was left out, for the report.
    pub notes: Vec<String>,
    /// Set when the groups are contiguous time blocks of a single workload
    /// ([`NodeSamples::with_time_blocks`]): how many.
    pub time_blocks: Option<usize>,
}

/// Blocks of the blocked time-series cross-validation when a node has one workload group.
pub const TIME_BLOCKS: usize = 5;

impl NodeSamples {
    /// A node with these feature columns and no rows yet (tests add their own).
    #[cfg(test)]
    pub(crate) fn empty(node: &str, features: Vec<Feature>) -> NodeSamples {
        NodeSamples {
            node: node.into(),
            x: Matrix {
                rows: 0,
                cols: features.len(),
                data: vec![],
            },
            features,
            y: vec![],
            timestamp: vec![],
            trace: vec![],
            group: vec![],
            groups: vec![],
            traces: vec![],
            notes: vec![],
            time_blocks: None,
        }
    }

    /// The same samples with the rows of `group` cut into `k` contiguous blocks (in trace and
    /// time order, equal row counts), each its own group `<group>#<i>`: a blocked time-series
    /// cross-validation for a node that recorded a single workload. A block is held out whole
    /// and never shares rows with another fold, so a score measures a stretch of time the model
    /// has not seen.
    pub fn with_time_blocks(&self, group: usize, k: usize) -> NodeSamples {
        let rows = self.rows_of(&[group]);
        let k = k.clamp(2, rows.len().max(2));
        let name = self.groups[group].clone();
        let mut out = self.clone();
        // Block 1 keeps the workload's group id (and its traces), so other ids do not move.
        let mut ids = vec![group];
        ids.extend(out.groups.len()..out.groups.len() + k - 1);
        out.groups[group] = format!("{name}#1");
        out.groups.extend((2..=k).map(|i| format!("{name}#{i}")));
        for (i, &r) in rows.iter().enumerate() {
            out.group[r] = ids[i * k / rows.len()];
        }
        out.notes.push(format!(
            "{}: one workload group ({name}): blocked time-series cross-validation over {k} \
             contiguous time blocks ({name}#1..{name}#{k}), each held out whole",
            self.node
        ));
        out.time_blocks = Some(k);
        out
    }

    /// Rows of the given groups.
    pub fn rows_of(&self, groups: &[usize]) -> Vec<usize> {
        (0..self.y.len())
            .filter(|&i| groups.contains(&self.group[i]))
            .collect()
    }

    /// Workload group index by name.
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g == name)
    }

    /// Position of a feature among the used ones.
    pub fn feature_index(&self, f: Feature) -> Option<usize> {
        self.features.iter().position(|&g| g == f)
    }
}

/// The cross-validation group of a workload: repeated runs of one workload (`web_serving_run2`,
/// `x_series2`) must never sit on both sides of a split, so the run suffix is dropped.
pub fn workload_group(workload: &str) -> String {
    for marker in ["_run", "_series"] {
        if let Some(at) = workload.rfind(marker) {
            let suffix = &workload[at + marker.len()..];
            if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
                return workload[..at].to_string();
            }
        }
    }
    workload.to_string()
}

/// Expands files and directories (recursively, `*.csv`) into a sorted list of trace files.
pub fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, SamplesError> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<(), SamplesError> {
        if p.is_dir() {
            let read_dir = |source| SamplesError::ReadDir {
                path: p.to_path_buf(),
                source,
            };
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(read_dir)?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()
                .map_err(read_dir)?;
            entries.sort();
            for e in entries {
                if e.is_dir() || e.extension().is_some_and(|x| x == "csv") {
                    walk(&e, out)?;
                }
            }
        } else if p.exists() {
            out.push(p.to_path_buf());
        } else {
            return Err(SamplesError::Missing {
                path: p.to_path_buf(),
            });
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        walk(p, &mut out)?;
    }
    if out.is_empty() {
        return Err(SamplesError::NoFiles {
            paths: paths.to_vec(),
        });
    }
    Ok(out)
}

/// Reads every trace and groups the rows by node. `only` restricts the features offered
/// (`None` = all canonical ones).
pub fn load(paths: &[PathBuf], only: Option<&[Feature]>) -> Result<Vec<NodeSamples>, SamplesError> {
    load_with(paths, only, false)
}

/// Like [`load`] with exactly `columns`, kept also where they are constant: a model is scored on
/// what it was trained with, and a feature that happens to be constant in the scored traces
/// (no network traffic at all during a workload) is still a valid input.
pub fn load_columns(
    paths: &[PathBuf],
    columns: &[Feature],
) -> Result<Vec<NodeSamples>, SamplesError> {
    load_with(paths, Some(columns), true)
}

fn load_with(
    paths: &[PathBuf],
    only: Option<&[Feature]>,
    keep_constant: bool,
) -> Result<Vec<NodeSamples>, SamplesError> {
    let mut by_node: BTreeMap<String, Vec<(PathBuf, Vec<TraceRow>)>> = BTreeMap::new();
    for path in trace_files(paths)? {
        let text = std::fs::read_to_string(&path).map_err(|source| SamplesError::Read {
            path: path.clone(),
            source,
        })?;
        let rows = parse_trace(&path.display().to_string(), &text)?;
        let mut per_node: BTreeMap<String, Vec<TraceRow>> = BTreeMap::new();
        for r in rows {
            per_node.entry(r.node.clone()).or_default().push(r);
        }
        for (node, rows) in per_node {
            by_node.entry(node).or_default().push((path.clone(), rows));
        }
    }
    by_node
        .into_iter()
        .map(|(node, traces)| build_node(node, traces, only, keep_constant))
        .collect()
}

fn build_node(
    node: String,
    traces: Vec<(PathBuf, Vec<TraceRow>)>,
    only: Option<&[Feature]>,
    keep_constant: bool,
) -> Result<NodeSamples, SamplesError> {
    let mut notes = Vec::new();
    let metered = traces
        .iter()
        .flat_map(|(_, rows)| rows.iter().filter(|r| r.power_watts.is_some()));
    let status = column_status(metered.map(|r| &r.features));
    let mut features = Vec::new();
    for f in Feature::ALL {
        if only.is_some_and(|o| !o.contains(&f)) {
            continue;
        }
        match status[f.index()] {
            ColumnStatus::Varies => features.push(f),
            ColumnStatus::Constant(_) if keep_constant => features.push(f),
            ColumnStatus::AllEmpty => notes.push(format!(
                "{node}: feature {} is empty in every trace: not used",
                f.column()
            )),
            ColumnStatus::Constant(v) => notes.push(format!(
                "{node}: feature {} is constant ({v}) over all traces: not used",
                f.column()
            )),
        }
    }
    if features.is_empty() {
        return Err(SamplesError::NothingVaries { node });
    }
    let mut s = NodeSamples {
        node: node.clone(),
        x: Matrix {
            rows: 0,
            cols: features.len(),
            data: Vec::new(),
        },
        features,
        y: Vec::new(),
        timestamp: Vec::new(),
        trace: Vec::new(),
        group: Vec::new(),
        groups: Vec::new(),
        traces: Vec::new(),
        notes,
        time_blocks: None,
    };
    for (path, rows) in traces {
        let workload = rows[0].workload.clone();
        let group_name = workload_group(&workload);
        let group = match s.group_index(&group_name) {
            Some(g) => g,
            None => {
                s.groups.push(group_name);
                s.groups.len() - 1
            }
        };
        let t = s.traces.len();
        let (mut kept, mut no_power, mut no_feature) = (0, 0, 0);
        for r in &rows {
            if r.workload != workload {
                return Err(SamplesError::MixedWorkloads {
                    path,
                    first: workload,
                    other: r.workload.clone(),
                });
            }
            let Some(power) = r.power_watts else {
                no_power += 1;
                continue;
            };
            let values: Option<Vec<f64>> = s.features.iter().map(|&f| r.features.get(f)).collect();
            let Some(values) = values else {
                no_feature += 1;
                continue;
            };
            s.x.data.extend(values);
            s.x.rows += 1;
            s.y.push(power);
            s.timestamp.push(r.timestamp);
            s.trace.push(t);
            s.group.push(group);
            kept += 1;
        }
        if no_power + no_feature > 0 {
            s.notes.push(format!(
                "{}: dropped {no_power} rows without power and {no_feature} rows missing a used feature",
                path.display()
            ));
        }
        s.traces.push(TraceInfo {
            path,
            workload,
            group,
            rows: kept,
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_workload_is_cut_into_contiguous_time_blocks() {
        let mut s = NodeSamples::empty("n", vec![Feature::CpuSecondsPerSecond]);
        s.groups.push("run".into());
        s.traces.push(TraceInfo {
            path: "run.csv".into(),
            workload: "run".into(),
            group: 0,
            rows: 23,
        });
        for i in 0..23 {
            s.x.data.push(i as f64);
            s.x.rows += 1;
            s.y.push(1.0);
            s.timestamp.push(i as f64);
            s.trace.push(0);
            s.group.push(0);
        }
        let b = s.with_time_blocks(0, 5);
        assert_eq!(b.time_blocks, Some(5));
        assert_eq!(b.groups, ["run#1", "run#2", "run#3", "run#4", "run#5"]);
        let mut sizes = Vec::new();
        for g in 0..5 {
            let rows = b.rows_of(&[g]);
            // Contiguous in time: consecutive rows, and every row of an earlier block is older.
            assert!(rows.windows(2).all(|w| w[1] == w[0] + 1), "{rows:?}");
            if g > 0 {
                let before = b.rows_of(&[g - 1]);
                assert!(before.last() < rows.first());
            }
            sizes.push(rows.len());
        }
        assert_eq!(sizes.iter().sum::<usize>(), 23);
        assert!(sizes.iter().all(|&n| n == 4 || n == 5), "{sizes:?}");
        assert!(b.notes.iter().any(|n| n.contains("blocked time-series")));
    }

    #[test]
    fn repeated_runs_share_a_group() {
        assert_eq!(workload_group("web_serving_run2"), "web_serving");
        assert_eq!(workload_group("media_series2"), "media");
        assert_eq!(workload_group("web_serving"), "web_serving");
        assert_eq!(workload_group("run_"), "run_");
        assert_eq!(workload_group("x_runner"), "x_runner");
    }
}
