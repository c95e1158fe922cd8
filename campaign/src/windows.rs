//! The campaign log, `DIR/windows.jsonl`: one JSON object per step run, appended when the step
//! ends. Its keys follow the workload campaign log of docs/workloads.md (`workload`, `group`,
//! `config`, `node`, `container_id`, `pod_uid`, `start`/`end` in Unix seconds, `complete`,
//! `inferences`, `operations`) plus the runner's own: `tag`, `status`, `error` and the latency
//! quantiles read from the workload's histogram.
//!
//! Resuming reads it back: a step with a `complete` or `failed` record is done; an
//! `interrupted` one runs again.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::Tag;

/// How a step ended.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its window ran to the end.
    Complete,
    /// A process failed (could not start, or exited non-zero before the window ended).
    Failed,
    /// Stopped by Ctrl-C or SIGTERM; runs again on resume.
    Interrupted,
}

/// One step run.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Window {
    /// Step name.
    pub workload: String,
    /// Step group.
    pub group: String,
    /// Step tag.
    pub tag: Tag,
    /// Inference configuration from the plan.
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// Node name.
    pub node: String,
    /// Container id of the measured process.
    pub container_id: String,
    /// Pod UID of the measured process.
    pub pod_uid: String,
    /// Containers of every process of the step, name → container id.
    #[serde(default)]
    pub containers: BTreeMap<String, String>,
    /// Window start (after warm-up), Unix seconds.
    pub start: f64,
    /// Window end, Unix seconds.
    pub end: f64,
    /// Whether the window ran to its end.
    pub complete: bool,
    /// How the step ended.
    pub status: Status,
    /// Why it failed or was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Inferences counted by the measured process during the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferences: Option<f64>,
    /// Operations counted during the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<f64>,
    /// Median inference latency during the window, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_seconds: Option<f64>,
    /// 95th-percentile inference latency during the window, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p95_seconds: Option<f64>,
}

impl Window {
    /// Window length, seconds.
    pub fn seconds(&self) -> f64 {
        self.end - self.start
    }
}

/// The log file of a campaign directory.
pub fn path(dir: &Path) -> PathBuf {
    dir.join("windows.jsonl")
}

/// Why the window log could not be read or appended to.
#[derive(Debug, thiserror::Error)]
pub enum WindowsError {
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("opening {}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Encode(serde_json::Error),
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Every record of the log, in order (none if there is no log yet). A malformed line is an
/// error naming the line: the log is the campaign's memory and must not be guessed at.
pub fn read(dir: &Path) -> Result<Vec<Window>, WindowsError> {
    let p = path(dir);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(WindowsError::Read { path: p, source }),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| WindowsError::Line {
                path: p.clone(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// Appends one record (and syncs it, so an interruption right after keeps it).
pub fn append(dir: &Path, w: &Window) -> Result<(), WindowsError> {
    let p = path(dir);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .map_err(|source| WindowsError::Open {
            path: p.clone(),
            source,
        })?;
    let mut line = serde_json::to_string(w).map_err(WindowsError::Encode)?;
    line.push('\n');
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(|source| WindowsError::Write { path: p, source })?;
    Ok(())
}

/// The last record of every step, by name.
pub fn latest(records: &[Window]) -> BTreeMap<&str, &Window> {
    records.iter().map(|w| (w.workload.as_str(), w)).collect()
}

/// Whether a step needs no further run.
pub fn done(latest: &BTreeMap<&str, &Window>, step: &str) -> bool {
    latest
        .get(step)
        .is_some_and(|w| w.status != Status::Interrupted)
}
