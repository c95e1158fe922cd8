//! `greenpipe-campaign`: the automated profiling → training → validation pipeline on one node.
//!
//! `greenpipe-campaign run` runs a plan's steps (each process in its own pod-shaped cgroup, or with
//! `--kubernetes` each step as a Job on the node; idle gaps between steps, warm-up left out of
//! the windows), then with no further command extracts a trace per window, trains on the `train` steps, validates on the `validate` steps beside the
//! stored baselines and writes the campaign report. `greenpipe-campaign report` rebuilds the report from
//! what the directory holds.
//!
//! The directory: `plan.toml` (the plan it ran; a rerun must use the same one), `campaign.json`
//! (node and Prometheus URL), `windows.jsonl` (the campaign log), `logs/` (each process's
//! output), `traces/{train,validate}/`, `model.json`, `train/`, `validate/`, and the report
//! files (see [`report`]).

pub mod analysis;
pub mod energy;
pub mod kubernetes;
pub mod plan;
pub mod pod;
pub mod report;
pub mod runner;
pub mod windows;
pub mod workload_metrics;
