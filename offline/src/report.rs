//! The report directory: `summary.csv` (one row per node × workload × model, plus `ALL` means),
//! `report.md` and the PNG plots.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a report file could not be written. Each names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The report directory could not be created.
    #[error("creating report directory {}", path.display())]
    ReportDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another directory could not be created.
    #[error("creating {}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A CSV file could not be created.
    #[error("creating {}", path.display())]
    CreateCsv {
        /// The file.
        path: PathBuf,
        /// The csv crate's error.
        source: csv::Error,
    },
    /// A CSV file could not be written.
    #[error("writing {}", path.display())]
    WriteCsv {
        /// The file.
        path: PathBuf,
        /// The csv crate's error.
        source: csv::Error,
    },
    /// A text file could not be written.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

use crate::metrics::{mean, Score};
use crate::samples::NodeSamples;

/// The exact header of `summary.csv`.
pub const SUMMARY_HEADER: &str = "node,workload,samples,model,mape_percent,mae_watts,rmse_watts,r2";

/// The `workload` value of the mean-over-workloads rows.
pub const ALL: &str = "ALL";

/// One `summary.csv` row.
#[derive(Debug, Clone)]
pub struct SummaryRow {
    /// Node.
    pub node: String,
    /// Held-out workload (group), or [`ALL`].
    pub workload: String,
    /// Model label.
    pub model: String,
    /// Scores.
    pub score: Score,
}

/// Rows of one model on one node: one per workload and the `ALL` mean.
pub fn model_rows(node: &str, model: &str, per_workload: &[(String, Score)]) -> Vec<SummaryRow> {
    let mut rows: Vec<SummaryRow> = per_workload
        .iter()
        .map(|(w, s)| SummaryRow {
            node: node.into(),
            workload: w.clone(),
            model: model.into(),
            score: *s,
        })
        .collect();
    if !per_workload.is_empty() {
        let scores: Vec<Score> = per_workload.iter().map(|(_, s)| *s).collect();
        rows.push(SummaryRow {
            node: node.into(),
            workload: ALL.into(),
            model: model.into(),
            score: mean(&scores),
        });
    }
    rows
}

/// Writes `summary.csv`.
pub fn write_summary(dir: &Path, rows: &[SummaryRow]) -> Result<(), WriteError> {
    let path = dir.join("summary.csv");
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_path(&path)
        .map_err(|source| WriteError::CreateCsv {
            path: path.clone(),
            source,
        })?;
    let write = |out: &mut csv::Writer<std::fs::File>| -> csv::Result<()> {
        out.write_record(SUMMARY_HEADER.split(','))?;
        for r in rows {
            let s = &r.score;
            out.write_record([
                r.node.clone(),
                r.workload.clone(),
                s.samples.to_string(),
                r.model.clone(),
                format!("{:.4}", s.mape_percent),
                format!("{:.4}", s.mae_watts),
                format!("{:.4}", s.rmse_watts),
                format!("{:.4}", s.r2),
            ])?;
        }
        out.flush()?;
        Ok(())
    };
    write(&mut out).map_err(|source| WriteError::WriteCsv { path, source })
}

/// A markdown table of the `ALL` rows of `rows`, best MAPE first.
pub fn all_table(rows: &[SummaryRow]) -> String {
    let mut all: Vec<&SummaryRow> = rows.iter().filter(|r| r.workload == ALL).collect();
    all.sort_by(|a, b| {
        (a.node.as_str(), a.score.mape_percent)
            .partial_cmp(&(b.node.as_str(), b.score.mape_percent))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut out = String::from(
        "| node | model | MAPE % | MAE W | RMSE W | R² |\n|---|---|---|---|---|---|\n",
    );
    for r in all {
        let s = &r.score;
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.3} |",
            r.node, r.model, s.mape_percent, s.mae_watts, s.rmse_watts, s.r2
        );
    }
    out
}

/// A markdown table: one row per workload, one MAPE column per listed model.
pub fn workload_table(rows: &[SummaryRow], node: &str, models: &[&str]) -> String {
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.node == node) {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let mut out = format!("| workload (MAPE %) | {} |\n|---|", models.join(" | "));
    out.push_str(&"---|".repeat(models.len()));
    out.push('\n');
    for w in workloads {
        let cells: Vec<String> = models
            .iter()
            .map(|m| {
                rows.iter()
                    .find(|r| r.node == node && r.workload == w && r.model == *m)
                    .map(|r| format!("{:.2}", r.score.mape_percent))
                    .unwrap_or_else(|| "–".into())
            })
            .collect();
        let _ = writeln!(out, "| {w} | {} |", cells.join(" | "));
    }
    out
}

/// A markdown paragraph counting the predictions the power bounds clamped, per model label:
/// `(label, clamped rows, predicted rows)`.
pub fn clamp_summary(per_model: &[(String, usize, usize)]) -> String {
    let total: usize = per_model.iter().map(|m| m.1).sum();
    let rows: usize = per_model.iter().map(|m| m.2).sum();
    let mut out = format!(
        "Clamped predictions: {total} of {rows} held-out rows fell outside the training power \
         range widened by its width (at least 10 % of its maximum) and were clamped into it, as \
         the online estimator clamps them.\n"
    );
    let hit: Vec<&(String, usize, usize)> = per_model.iter().filter(|m| m.1 > 0).collect();
    if !hit.is_empty() {
        out.push_str("\n| model | clamped rows | of rows |\n|---|---|---|\n");
        for (label, n, of) in hit {
            let _ = writeln!(out, "| {label} | {n} | {of} |");
        }
    }
    out
}

/// Creates the report directory.
pub fn create_dir(dir: &Path) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::ReportDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// A file-name-safe version of a label.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A markdown list of the node's trace files and the rows kept from each.
pub fn trace_list(s: &NodeSamples) -> String {
    let mut out = String::from("Traces:\n\n");
    for t in &s.traces {
        let _ = writeln!(
            out,
            "- `{}`: workload {} (group {}), {} rows",
            t.path.display(),
            t.workload,
            s.groups[t.group],
            t.rows
        );
    }
    out.push('\n');
    out
}
