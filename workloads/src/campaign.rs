//! The campaign log: one JSON object per line, one line per run window, so that the campaign
//! runner (and the trace extractor) can label the exporter's samples with the workload that
//! produced them. The format is documented in docs/workloads.md.
//!
//! Each line is written with a single `write(2)` on a file opened `O_APPEND`: concurrent
//! workloads on one node (a served model and its client, two Jobs) interleave whole lines,
//! never parts of them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use greenpipe_common::container_id::from_cgroup_path;
use serde::Serialize;

/// Where this process runs: node name and, inside a container, its id and pod UID.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Placement {
    pub node: String,
    pub container_id: Option<String>,
    pub pod_uid: Option<String>,
}

impl Placement {
    /// `node` if given (the Downward API's `spec.nodeName`), else the host name; the container
    /// from `/proc/self/cgroup` through the exporter's own parser, so both agree on the id.
    pub fn detect(node: Option<&str>) -> Placement {
        let node = node
            .map(str::to_string)
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_default();
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Placement::from_cgroup(node, &cgroup)
    }

    /// Reads the container from the text of a `/proc/<pid>/cgroup` file.
    pub fn from_cgroup(node: String, proc_cgroup: &str) -> Placement {
        // Lines are `hierarchy-id:controllers:path`; the path may itself contain ':'.
        let container = proc_cgroup
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .find_map(from_cgroup_path);
        Placement {
            node,
            container_id: container.as_ref().map(|c| c.container_id.clone()),
            pod_uid: container.map(|c| c.pod_uid).filter(|uid| !uid.is_empty()),
        }
    }
}

/// One run window.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Benchmark or workload name (`cpu-int`, `gemm`, `infer`, …).
    pub workload: String,
    /// `micro`, `combined`, `kernels` or `inference`.
    pub group: &'static str,
    /// The run's configuration: model, precision, threads, batch, mode for inference; the
    /// benchmark's own parameters (load level, sizes) otherwise.
    pub config: serde_json::Value,
    #[serde(flatten)]
    pub placement: Placement,
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    /// False when the window was cut short (SIGTERM/SIGINT before its planned end).
    pub complete: bool,
    /// Inferences completed in the window (0 for benchmarks).
    pub inferences: u64,
    /// Benchmark operations completed in the window, in `config.unit` units.
    pub operations: u64,
}

/// Appends windows to `--campaign-log` (or nowhere when not configured).
/// Why a window could not be written to the campaign log; each names the log.
#[derive(Debug, thiserror::Error)]
pub enum CampaignLogError {
    #[error("opening campaign log {} for appending", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("appending to campaign log {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("short write to campaign log {}", path.display())]
    ShortWrite { path: PathBuf },
    #[error("encoding a window for campaign log {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Debug, Clone)]
pub struct CampaignLog {
    path: Option<PathBuf>,
}

impl CampaignLog {
    pub fn new(path: Option<PathBuf>) -> CampaignLog {
        CampaignLog { path }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Checks the log can be opened for appending, so a bad path fails at start, not after an
    /// hour of benchmark.
    pub fn check(&self) -> Result<(), CampaignLogError> {
        if let Some(p) = &self.path {
            open_append(p)?;
        }
        Ok(())
    }

    pub fn append(&self, window: &Window) -> Result<(), CampaignLogError> {
        let Some(p) = &self.path else { return Ok(()) };
        let mut line = serde_json::to_vec(window).map_err(|source| CampaignLogError::Encode {
            path: p.clone(),
            source,
        })?;
        line.push(b'\n');
        let mut f = open_append(p)?;
        // One write: O_APPEND makes it atomic with respect to other appenders.
        let n = f.write(&line).map_err(|source| CampaignLogError::Write {
            path: p.clone(),
            source,
        })?;
        if n != line.len() {
            return Err(CampaignLogError::ShortWrite { path: p.clone() });
        }
        Ok(())
    }
}

fn open_append(p: &Path) -> Result<std::fs::File, CampaignLogError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|source| CampaignLogError::Open {
            path: p.to_path_buf(),
            source,
        })
}

/// Now, in Unix seconds.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_from_kubelet_cgroup() {
        let text = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9e3c2a_1f1e_4b6a_9a43_3c2d3e4f5a6b.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n";
        let p = Placement::from_cgroup("edge-1".into(), text);
        assert_eq!(
            p.container_id.as_deref(),
            Some("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        );
        assert_eq!(
            p.pod_uid.as_deref(),
            Some("0b9e3c2a-1f1e-4b6a-9a43-3c2d3e4f5a6b")
        );
        let host = Placement::from_cgroup("n".into(), "0::/user.slice/session-1.scope\n");
        assert_eq!(host.container_id, None);
        assert_eq!(host.pod_uid, None);
    }

    #[test]
    fn an_unwritable_log_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("c.jsonl");
        let err = CampaignLog::new(Some(path.clone())).check().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("opening campaign log {} for appending", path.display())
        );
        let source = std::error::Error::source(&err).expect("the OS error is the source");
        assert!(source.to_string().contains("No such file"), "{source}");
    }

    #[test]
    fn windows_append_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = CampaignLog::new(Some(dir.path().join("c.jsonl")));
        let w = Window {
            workload: "cpu-int".into(),
            group: "micro",
            config: serde_json::json!({"level": 50}),
            placement: Placement {
                node: "n".into(),
                container_id: None,
                pod_uid: None,
            },
            start: 1.5,
            end: 2.5,
            complete: false,
            inferences: 0,
            operations: 7,
        };
        log.append(&w).unwrap();
        log.append(&w).unwrap();
        let text = std::fs::read_to_string(dir.path().join("c.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["workload"], "cpu-int");
        assert_eq!(lines[0]["node"], "n");
        assert_eq!(lines[0]["container_id"], serde_json::Value::Null);
        assert_eq!(lines[0]["complete"], false);
        assert_eq!(lines[0]["operations"], 7);
    }
}
