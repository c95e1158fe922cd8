//! `campaign run`'s first half: the plan's steps, one after the other, each preceded by an idle
//! gap; a step's processes start in their own pod-shaped cgroups, the warm-up passes, and the
//! window runs for the step's length; then the step's processes are stopped and its record is
//! appended to the campaign log. Ctrl-C (or SIGTERM) stops the running step, records it as
//! interrupted and ends the run; what was done stays, and a rerun resumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::plan::{Plan, Step};
use crate::pod::{self, Pod};
use crate::windows::{self, Status, Window};
use crate::workload_metrics::{self, Reading};

/// How a run of the steps ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every step has a record.
    Finished,
    /// Stopped by a signal.
    Interrupted,
}

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Campaign directory.
    pub out: PathBuf,
    /// Node name.
    pub node: String,
}

/// Why the steps could not be run (a step that fails is recorded as failed instead).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("setting up the signal handlers")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Signal(#[from] greenpipe_common::shutdown::SignalError),
    #[error("finding a free port")]
    Port(#[source] std::io::Error),
    #[error(transparent)]
    Windows(#[from] windows::WindowsError),
    #[error(transparent)]
    Pod(#[from] pod::PodError),
    #[error("creating {}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("building the HTTP client")]
    HttpClient(#[source] reqwest::Error),
}

/// Why a process's arguments could not be expanded.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error("argument {arg:?}: '{{' without '}}'")]
    Unclosed { arg: String },
    #[error("argument {arg:?}: unknown placeholder {{{key}}}")]
    Unknown { arg: String, key: String },
}

/// Why a step's process did not start (the step is recorded as failed).
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Expand(#[from] ExpandError),
    #[error(transparent)]
    Pod(#[from] pod::PodError),
}

/// Set by Ctrl-C or SIGTERM.
pub fn stop_flag() -> Result<Arc<AtomicBool>, RunError> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Signals)?;
    let mut signals = {
        let _entered = runtime.enter();
        greenpipe_common::shutdown::Shutdown::install()?
    };
    std::thread::Builder::new()
        .name("campaign-signals".into())
        .spawn(move || {
            runtime.block_on(async move {
                // Installed above, before the thread starts: a signal during start-up is kept.
                signals.recv().await;
                f.store(true, Ordering::SeqCst);
            })
        })
        .map_err(RunError::Signals)?;
    Ok(flag)
}

pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn free_port() -> Result<u16, RunError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(RunError::Port)
}

/// Sleeps up to `d`, returning early (false) when the stop flag is set.
pub(crate) fn sleep_unless_stopped(
    d: Duration,
    stop: &AtomicBool,
    bar: &ProgressBar,
    base: u64,
) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        bar.set_position(
            base + (d.as_secs_f64()
                - until
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64()) as u64,
        );
        std::thread::sleep(
            Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())),
        );
    }
    true
}

/// A process's placeholders replaced.
pub(crate) fn expand(
    args: &[String],
    vars: &BTreeMap<String, String>,
) -> Result<Vec<String>, ExpandError> {
    args.iter()
        .map(|a| {
            let mut out = String::new();
            let mut rest = a.as_str();
            while let Some(open) = rest.find('{') {
                out.push_str(&rest[..open]);
                let close = rest[open..]
                    .find('}')
                    .ok_or_else(|| ExpandError::Unclosed { arg: a.clone() })?;
                let key = &rest[open + 1..open + close];
                let v = vars.get(key).ok_or_else(|| ExpandError::Unknown {
                    arg: a.clone(),
                    key: key.to_string(),
                })?;
                out.push_str(v);
                rest = &rest[open + close + 1..];
            }
            out.push_str(rest);
            Ok(out)
        })
        .collect()
}

/// A blocking HTTP client for a workload's `/metrics` (short timeouts: a workload that does not
/// answer is a failed step, not a hung campaign).
pub struct MetricsClient(reqwest::blocking::Client);

impl MetricsClient {
    fn new() -> Result<MetricsClient, RunError> {
        Ok(MetricsClient(
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .map_err(RunError::HttpClient)?,
        ))
    }

    /// The page's text, or `None` when it does not answer 200.
    fn get(&self, url: &str) -> Option<String> {
        let r = self.0.get(url).send().ok()?;
        r.status().is_success().then(|| r.text().ok()).flatten()
    }
}

/// Runs every step without a record as local processes in pod-shaped cgroups; returns whether
/// it finished or was interrupted.
pub fn run_steps(plan: &Plan, ctx: &RunContext, stop: &AtomicBool) -> Result<Outcome, RunError> {
    let scope = pod::cgroup2_root()?.join(format!("greenpipe-campaign-{}", std::process::id()));
    std::fs::create_dir_all(&scope).map_err(|source| RunError::CreateDir {
        path: scope.clone(),
        source,
    })?;
    let mut backend = LocalProcesses {
        plan,
        ctx,
        logs: logs_dir(ctx)?,
        client: MetricsClient::new()?,
        scope: &scope,
        stop,
    };
    let outcome = drive(plan, ctx, stop, &mut backend);
    pod::remove_scope(&scope);
    outcome
}

/// Runs a plan's steps one at a time, however they run (local processes, Kubernetes Jobs).
/// [`drive`] calls it; each backend depends on the driver, never the other way.
pub trait StepBackend {
    /// Runs `step` and returns its record; `bar` and `base` (seconds before the step on the
    /// bar) draw its progress.
    fn run_step(&mut self, step: &Step, bar: &ProgressBar, base: u64) -> Result<Window, RunError>;
}

/// Steps as local processes in pod-shaped cgroups under `scope`.
struct LocalProcesses<'a> {
    plan: &'a Plan,
    ctx: &'a RunContext,
    logs: PathBuf,
    client: MetricsClient,
    scope: &'a Path,
    stop: &'a AtomicBool,
}

impl StepBackend for LocalProcesses<'_> {
    fn run_step(&mut self, step: &Step, bar: &ProgressBar, base: u64) -> Result<Window, RunError> {
        run_step(
            self.plan,
            step,
            self.ctx,
            self.scope,
            &self.logs,
            &self.client,
            self.stop,
            bar,
            base,
        )
    }
}

/// `DIR/logs/`, where each process's output goes.
pub(crate) fn logs_dir(ctx: &RunContext) -> Result<PathBuf, RunError> {
    let logs = ctx.out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|source| RunError::CreateDir {
        path: logs.clone(),
        source,
    })?;
    Ok(logs)
}

/// The campaign loop every backend shares: every step without a record, each after an idle
/// gap, run by the backend, its record appended; an idle gap after the last one. Resume, the
/// progress bar and the log lines live here, so local processes and Kubernetes Jobs keep one
/// directory format.
pub fn drive(
    plan: &Plan,
    ctx: &RunContext,
    stop: &AtomicBool,
    backend: &mut dyn StepBackend,
) -> Result<Outcome, RunError> {
    let records = windows::read(&ctx.out)?;
    let latest = windows::latest(&records);
    let todo: Vec<&Step> = plan
        .steps
        .iter()
        .filter(|s| !windows::done(&latest, &s.name))
        .collect();
    let skipped = plan.steps.len() - todo.len();
    if skipped > 0 {
        eprintln!(
            "campaign: resuming: {skipped} of {} steps already done, {} to run",
            plan.steps.len(),
            todo.len()
        );
    }
    if todo.is_empty() {
        return Ok(Outcome::Finished);
    }
    let s = &plan.campaign;
    let total: f64 = todo
        .iter()
        .map(|st| s.idle_seconds + s.warmup_seconds + plan.seconds(st))
        .sum::<f64>()
        + s.idle_seconds;
    let bar = ProgressBar::new(total.ceil() as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:30} [{elapsed_precise}] {wide_bar} {pos}/{len} s (eta {eta})",
    ) {
        bar.set_style(style);
    }
    let mut base = 0u64;
    let mut outcome = Outcome::Finished;
    for (i, st) in todo.iter().enumerate() {
        bar.set_message(format!("idle before {}", st.name));
        if !sleep_unless_stopped(Duration::from_secs_f64(s.idle_seconds), stop, &bar, base) {
            outcome = Outcome::Interrupted;
            break;
        }
        base += s.idle_seconds as u64;
        bar.set_message(format!(
            "[{}/{}] {}",
            skipped + i + 1,
            plan.steps.len(),
            st.name
        ));
        let w = backend.run_step(st, &bar, base)?;
        base += (s.warmup_seconds + plan.seconds(st)) as u64;
        let line = match w.status {
            Status::Complete => format!(
                "campaign: {} done ({:.1} s window{})",
                st.name,
                w.seconds(),
                w.inferences
                    .map(|n| format!(", {n:.0} inferences"))
                    .unwrap_or_default()
            ),
            Status::Failed => format!(
                "campaign: {} FAILED, skipped: {}",
                st.name,
                w.error.as_deref().unwrap_or("?")
            ),
            Status::Interrupted => format!("campaign: {} interrupted", st.name),
        };
        // A hidden bar (not a terminal) prints nothing, not even println: log plainly then.
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
        windows::append(&ctx.out, &w)?;
        if w.status == Status::Interrupted {
            outcome = Outcome::Interrupted;
            break;
        }
    }
    if outcome == Outcome::Finished {
        // The last window needs its trailing scrapes in Prometheus before it is queried.
        bar.set_message("idle after the last step");
        if !sleep_unless_stopped(
            Duration::from_secs_f64(s.idle_seconds.max(3.0)),
            stop,
            &bar,
            base,
        ) {
            outcome = Outcome::Interrupted;
        }
    }
    bar.finish_and_clear();
    Ok(outcome)
}

/// A step's record before it runs: failed until shown otherwise, times now.
pub(crate) fn new_window(st: &Step, node: &str) -> Window {
    Window {
        workload: st.name.clone(),
        group: st.group.clone(),
        tag: st.tag,
        config: st.config.clone(),
        node: node.to_string(),
        container_id: String::new(),
        pod_uid: String::new(),
        containers: BTreeMap::new(),
        start: now(),
        end: now(),
        complete: false,
        status: Status::Failed,
        error: None,
        inferences: None,
        operations: None,
        latency_p50_seconds: None,
        latency_p95_seconds: None,
    }
}

/// The placeholders every process of a step sees (`{timeout}`, `{seconds}`, `{node}`, `{step}`,
/// `{out}`, `{campaign_log}`), with `out` and `campaign_log` as the processes see them.
pub(crate) fn step_vars(
    plan: &Plan,
    st: &Step,
    node: &str,
    out: &str,
    campaign_log: &str,
) -> BTreeMap<String, String> {
    let s = &plan.campaign;
    let timeout = (s.warmup_seconds + plan.seconds(st) + 30.0).ceil() as u64;
    BTreeMap::from([
        ("timeout".into(), format!("{timeout}s")),
        ("seconds".into(), timeout.to_string()),
        ("node".into(), node.to_string()),
        ("step".into(), st.name.clone()),
        ("out".into(), out.to_string()),
        ("campaign_log".into(), campaign_log.to_string()),
    ])
}

/// The `{port:NAME}` placeholders of a step's processes (`port:NAME`), each once, in order.
pub(crate) fn named_ports(st: &Step) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in &st.processes {
        for a in &p.args {
            let mut rest = a.as_str();
            while let Some(at) = rest.find("{port:") {
                let end = rest[at..].find('}').map_or(rest.len(), |e| at + e);
                let key = rest[at + 1..end].to_string();
                if !keys.contains(&key) {
                    keys.push(key);
                }
                rest = &rest[end..];
            }
        }
    }
    keys
}

#[allow(clippy::too_many_arguments)]
fn run_step(
    plan: &Plan,
    st: &Step,
    ctx: &RunContext,
    scope: &Path,
    logs: &Path,
    client: &MetricsClient,
    stop: &AtomicBool,
    bar: &ProgressBar,
    base: u64,
) -> Result<Window, RunError> {
    let s = &plan.campaign;
    let seconds = plan.seconds(st);
    let mut w = new_window(st, &ctx.node);
    let mut vars = step_vars(
        plan,
        st,
        &ctx.node,
        &ctx.out.display().to_string(),
        &ctx.out.join("workload-log.jsonl").display().to_string(),
    );
    // Named ports shared by the step's processes.
    for key in named_ports(st) {
        vars.insert(key, free_port()?.to_string());
    }
    let measured = Plan::measured(st);
    let mut pods: Vec<Pod> = Vec::new();
    let mut metrics_url: Option<String> = None;
    let mut failure: Option<String> = None;
    for (k, p) in st.processes.iter().enumerate() {
        let name = p.name.clone().unwrap_or_else(|| format!("p{k}"));
        let address = format!("127.0.0.1:{}", free_port()?);
        vars.insert("metrics_address".into(), address.clone());
        let started = (|| -> Result<Pod, StartError> {
            let args = expand(&p.args, &vars)?;
            let command = pod::resolve_command(&p.command)?;
            Pod::start(
                scope,
                &command,
                &args,
                &logs.join(format!("{}__{name}.log", st.name)),
            )
            .map_err(StartError::from)
        })();
        match started {
            Ok(pod) => {
                w.containers.insert(name.clone(), pod.container_id.clone());
                if k == measured {
                    w.container_id = pod.container_id.clone();
                    w.pod_uid = pod.pod_uid.clone();
                    if p.args.iter().any(|a| a.contains("{metrics_address}")) {
                        metrics_url = Some(format!("http://{address}/metrics"));
                    }
                }
                pods.push(pod);
            }
            Err(e) => {
                failure = Some(format!(
                    "process {name}: {}",
                    greenpipe_common::error_chain(&e)
                ));
                break;
            }
        }
        // A process that serves metrics is up when it answers; the next one (a client) may
        // need it.
        if k == measured {
            if let Some(url) = &metrics_url {
                let deadline = Instant::now() + Duration::from_secs(120);
                while client.get(url).is_none() && Instant::now() < deadline {
                    if stop.load(Ordering::SeqCst)
                        || pods.last_mut().and_then(Pod::exited).is_some()
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    let exited_badly = |pods: &mut Vec<Pod>| -> Option<String> {
        pods.iter_mut().enumerate().find_map(|(k, p)| {
            let status = p.exited()?;
            let name = st.processes[k]
                .name
                .clone()
                .unwrap_or_else(|| format!("p{k}"));
            Some(if status.success() {
                format!("process {name} ended before the window did")
            } else {
                format!("process {name} exited with {status}")
            })
        })
    };
    if failure.is_none()
        && !sleep_unless_stopped(Duration::from_secs_f64(s.warmup_seconds), stop, bar, base)
    {
        w.status = Status::Interrupted;
    }
    if failure.is_none() && w.status != Status::Interrupted {
        failure = exited_badly(&mut pods);
    }
    if failure.is_none() && w.status != Status::Interrupted {
        let first: Option<Reading> = metrics_url
            .as_deref()
            .and_then(|u| client.get(u))
            .map(|t| workload_metrics::parse(&t));
        w.start = now();
        let until = Instant::now() + Duration::from_secs_f64(seconds);
        let warm = base + s.warmup_seconds as u64;
        while Instant::now() < until {
            if stop.load(Ordering::SeqCst) {
                w.status = Status::Interrupted;
                break;
            }
            if let Some(e) = exited_badly(&mut pods) {
                failure = Some(e);
                break;
            }
            bar.set_position(
                warm + (seconds
                    - until
                        .saturating_duration_since(Instant::now())
                        .as_secs_f64()) as u64,
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        w.end = now();
        if failure.is_none() && w.status != Status::Interrupted {
            let last = metrics_url
                .as_deref()
                .and_then(|u| client.get(u))
                .map(|t| workload_metrics::parse(&t));
            if let (Some(a), Some(b)) = (&first, &last) {
                let d = workload_metrics::delta(a, b);
                w.inferences = d.inferences;
                w.operations = d.operations;
                w.latency_p50_seconds = workload_metrics::quantile(&d.buckets, 0.5);
                w.latency_p95_seconds = workload_metrics::quantile(&d.buckets, 0.95);
            } else if metrics_url.is_some() {
                failure = Some(format!(
                    "the measured process's metrics did not answer at {}",
                    metrics_url.as_deref().unwrap_or("")
                ));
            }
        }
    }
    // Clients first, then servers: stop in reverse start order.
    for p in pods.iter_mut().rev() {
        p.stop(Duration::from_secs(5));
    }
    match (failure, w.status) {
        (_, Status::Interrupted) => {
            w.error = Some("stopped by a signal".into());
        }
        (Some(e), _) => {
            w.status = Status::Failed;
            w.error = Some(e);
        }
        (None, _) => {
            w.status = Status::Complete;
            w.complete = true;
        }
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_expanded_and_unknown_ones_refused() {
        let vars = BTreeMap::from([
            ("timeout".to_string(), "40s".to_string()),
            ("port:grpc".to_string(), "8001".to_string()),
        ]);
        let got = expand(
            &[
                "--timeout".into(),
                "{timeout}".into(),
                "127.0.0.1:{port:grpc}".into(),
            ],
            &vars,
        )
        .unwrap();
        assert_eq!(got, ["--timeout", "40s", "127.0.0.1:8001"]);
        let err = expand(&["{nope}".into()], &vars).unwrap_err().to_string();
        assert!(err.contains("unknown placeholder {nope}"), "{err}");
    }
}
