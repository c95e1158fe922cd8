//! The campaign plan (TOML): timing, training options, and the steps. A step is one or more
//! processes, each run in its own pod-shaped cgroup; nothing in the runner knows what a process
//! does, so stress-ng, `greenpipe-workload` benchmarks, a served model and its client are all
//! just commands.
//!
//! Arguments may hold placeholders, replaced when the step starts:
//! `{timeout}` (warm-up + step + 30 s, as `NNs`), `{seconds}` (the same, a bare number),
//! `{metrics_address}` (a free loopback `host:port` for this process's `/metrics`, which the
//! runner scrapes for inference counts and latency), `{port:NAME}` (a free port shared by the
//! step's processes, e.g. a server's gRPC port and its client's target), `{node}`, `{step}`,
//! `{out}` (the campaign directory) and `{campaign_log}` (a JSON-lines file in it that
//! workloads append their own windows to).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A whole plan.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Timing and training options.
    #[serde(default)]
    pub campaign: Settings,
    /// Steps, run in order.
    #[serde(rename = "step")]
    pub steps: Vec<Step>,
}

/// Plan-wide settings.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Seconds after a step's processes start that are left out of its window.
    pub warmup_seconds: f64,
    /// Idle seconds before every step and after the last one.
    pub idle_seconds: f64,
    /// Window length of a step that does not say.
    pub step_seconds: f64,
    /// Workloads matching this regex are the CPU-stress runs the stress-trained baseline is
    /// fitted on.
    pub stress_pattern: String,
    /// Model families `train` tries (comma-separated; default: all).
    pub models: Option<String>,
    /// Offer tree models only on all features (fewer fits).
    pub no_counter_variants: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            warmup_seconds: 10.0,
            idle_seconds: 10.0,
            step_seconds: 60.0,
            stress_pattern: "^micro-cpu".into(),
            models: None,
            no_counter_variants: false,
        }
    }
}

/// What a step's window is used for.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Tag {
    /// Training data.
    Train,
    /// Validation only (never trained on).
    Validate,
}

impl Tag {
    /// The name used in paths and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Train => "train",
            Tag::Validate => "validate",
        }
    }
}

/// One step.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique name; the workload name of its trace.
    pub name: String,
    /// `micro`, `combined`, `kernels` or `inference`.
    pub group: String,
    /// `train` or `validate`.
    pub tag: Tag,
    /// Window length (default: the plan's `step_seconds`).
    pub seconds: Option<f64>,
    /// Inference configuration for the report: `model`, `precision`, `threads`, `batch`,
    /// `mode` (`local`|`served`), and any benchmark parameters.
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// Processes, started in order.
    #[serde(rename = "process")]
    pub processes: Vec<Process>,
    /// Extra labels and annotations of the step's pod with `--kubernetes` (ignored otherwise).
    #[serde(default)]
    pub kubernetes: PodMetadata,
}

/// Labels and annotations a step adds to its pod (`[step.kubernetes]`): e.g. a service mesh's
/// opt-out annotation, which would otherwise put a proxy beside the benchmark.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PodMetadata {
    /// Pod labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pod annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// One process of a step, in its own pod-shaped cgroup.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// Name within the step (default `p<index>`).
    pub name: Option<String>,
    /// Program: a path, or a name looked up beside the estimator binary, then on `PATH`.
    pub command: String,
    /// Arguments, with placeholders.
    #[serde(default)]
    pub args: Vec<String>,
    /// The process whose container's energy and inference counts the step reports (default: the
    /// first process).
    #[serde(default)]
    pub measure: bool,
}

/// The groups a plan may use.
pub const GROUPS: [&str; 4] = ["micro", "combined", "kernels", "inference"];
/// The inference configuration keys the report groups by.
pub const CONFIG_KEYS: [&str; 5] = ["model", "precision", "engine", "threads", "mode"];

/// Why a plan was refused.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("campaign.{what} must be a non-negative number, not {value}")]
    NegativeSeconds { what: &'static str, value: f64 },
    #[error("campaign.stress_pattern")]
    StressPattern(#[source] regex::Error),
    #[error("the plan has no [[step]]")]
    NoSteps,
    #[error("step {step:?}: a window needs at least 3 s, not {seconds}")]
    ShortWindow { step: String, seconds: f64 },
    #[error("step name {step:?}: use letters, digits, '-', '_' and '.' only (it names files)")]
    BadName { step: String },
    #[error("step name {step:?} is used twice")]
    DuplicateName { step: String },
    #[error("step {step:?}: group {group:?} is not one of {:?}", GROUPS)]
    UnknownGroup { step: String, group: String },
    #[error("step {step:?} has no [[step.process]]")]
    NoProcess { step: String },
    #[error("step {step:?}: more than one process has measure = true")]
    SeveralMeasured { step: String },
    #[error("step {step:?}: config.mode must be \"local\" or \"served\"")]
    BadMode { step: String },
}

/// Why a plan file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("reading {}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("plan {}", path.display())]
    Invalid {
        path: std::path::PathBuf,
        source: PlanError,
    },
}

impl Plan {
    /// Parses and checks a plan.
    pub fn parse(text: &str) -> Result<Plan, PlanError> {
        let plan: Plan = toml::from_str(text)?;
        plan.check()?;
        Ok(plan)
    }

    /// Reads a plan file.
    pub fn load(path: &Path) -> Result<Plan, PlanFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Plan::parse(&text).map_err(|source| PlanFileError::Invalid {
            path: path.to_path_buf(),
            source,
        })
    }

    fn check(&self) -> Result<(), PlanError> {
        let s = &self.campaign;
        for (what, v) in [
            ("warmup_seconds", s.warmup_seconds),
            ("idle_seconds", s.idle_seconds),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(PlanError::NegativeSeconds { what, value: v });
            }
        }
        regex::Regex::new(&s.stress_pattern).map_err(PlanError::StressPattern)?;
        if self.steps.is_empty() {
            return Err(PlanError::NoSteps);
        }
        let mut seen = std::collections::HashSet::new();
        for st in &self.steps {
            let seconds = self.seconds(st);
            if !(seconds >= 3.0 && seconds.is_finite()) {
                return Err(PlanError::ShortWindow {
                    step: st.name.clone(),
                    seconds,
                });
            }
            if st.name.is_empty()
                || !st
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                return Err(PlanError::BadName {
                    step: st.name.clone(),
                });
            }
            if !seen.insert(st.name.as_str()) {
                return Err(PlanError::DuplicateName {
                    step: st.name.clone(),
                });
            }
            if !GROUPS.contains(&st.group.as_str()) {
                return Err(PlanError::UnknownGroup {
                    step: st.name.clone(),
                    group: st.group.clone(),
                });
            }
            if st.processes.is_empty() {
                return Err(PlanError::NoProcess {
                    step: st.name.clone(),
                });
            }
            if st.processes.iter().filter(|p| p.measure).count() > 1 {
                return Err(PlanError::SeveralMeasured {
                    step: st.name.clone(),
                });
            }
            if let Some(mode) = st.config.get("mode") {
                if !matches!(mode.as_str(), Some("local" | "served")) {
                    return Err(PlanError::BadMode {
                        step: st.name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The window length of a step.
    pub fn seconds(&self, step: &Step) -> f64 {
        step.seconds.unwrap_or(self.campaign.step_seconds)
    }

    /// Index of the measured process of a step.
    pub fn measured(step: &Step) -> usize {
        step.processes.iter().position(|p| p.measure).unwrap_or(0)
    }

    /// Seconds the whole plan takes, idle gaps and warm-ups included (not start-up time).
    pub fn length_seconds(&self) -> f64 {
        let s = &self.campaign;
        self.steps
            .iter()
            .map(|st| s.idle_seconds + s.warmup_seconds + self.seconds(st))
            .sum::<f64>()
            + s.idle_seconds
    }
}

/// A config value as text (`2` for integers, the string itself for strings).
pub fn config_text(config: &BTreeMap<String, toml::Value>, key: &str) -> String {
    match config.get(key) {
        None => String::new(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
[campaign]
warmup_seconds = 2
idle_seconds = 1
step_seconds = 5

[[step]]
name = "micro-cpu"
group = "micro"
tag = "train"
[[step.process]]
command = "stress-ng"
args = ["--cpu", "1", "--timeout", "{timeout}"]

[[step]]
name = "mobilenet-served"
group = "inference"
tag = "validate"
seconds = 8
config = { model = "mobilenet_v2", precision = "f32", threads = 2, mode = "served" }
[[step.process]]
name = "server"
command = "greenpipe-workload"
measure = true
[[step.process]]
name = "client"
command = "greenpipe-workload"
"#;

    #[test]
    fn parses_a_plan_and_computes_its_length() {
        let p = Plan::parse(PLAN).unwrap();
        assert_eq!(p.steps.len(), 2);
        assert_eq!(p.steps[1].tag, Tag::Validate);
        assert_eq!(Plan::measured(&p.steps[1]), 0);
        assert_eq!(config_text(&p.steps[1].config, "threads"), "2");
        assert_eq!(config_text(&p.steps[1].config, "model"), "mobilenet_v2");
        // (1 + 2 + 5) + (1 + 2 + 8) + 1
        assert_eq!(p.length_seconds(), 20.0);
    }

    #[test]
    fn bad_plans_are_refused_with_a_reason() {
        let unknown = PLAN.replace("idle_seconds", "idle_secs");
        assert!(Plan::parse(&unknown)
            .unwrap_err()
            .to_string()
            .contains("idle_secs"));
        let twice = PLAN.replace("mobilenet-served", "micro-cpu");
        assert!(format!("{:#}", Plan::parse(&twice).unwrap_err()).contains("used twice"));
        let group = PLAN.replace("\"micro\"", "\"macro\"");
        assert!(format!("{:#}", Plan::parse(&group).unwrap_err()).contains("macro"));
        let mode = PLAN.replace("\"served\"", "\"remote\"");
        assert!(format!("{:#}", Plan::parse(&mode).unwrap_err()).contains("config.mode"));
    }

    #[test]
    fn shipped_plans_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/profiling/plans");
        for name in ["ci.toml", "paper.toml"] {
            let plan = Plan::load(&dir.join(name)).unwrap();
            for g in GROUPS {
                assert!(
                    plan.steps.iter().any(|s| s.group == g),
                    "{name} has no {g} step"
                );
            }
            for mode in ["local", "served"] {
                assert!(
                    plan.steps
                        .iter()
                        .any(|s| s.tag == Tag::Validate && config_text(&s.config, "mode") == mode),
                    "{name} has no {mode} validation step"
                );
            }
        }
    }
}
