//! `view`: the quick start's live view of what the estimator writes to Prometheus — predicted node
//! power split into idle and dynamic, the top containers with their idle and dynamic shares,
//! joules per inference of inference workloads, and one line saying how idle power is split.
//!
//! On a terminal each frame overwrites the previous one in place (cursor home, every line
//! cleared to its end, the rest of the screen cleared); when the output is not a terminal (a log,
//! a pipe, the tests) frames are printed one after the other, separated by a blank line. Numbers
//! have a fixed precision so columns line up from one frame to the next.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

use clap::Args;
use greenpipe_common::names::{component, container as c, estimate, label, SYSTEM_CONTAINER};

use crate::attribution::IdleSplit;

/// The recording rule of deploy/prometheus giving a workload container's joules per inference
/// over a fixed minute (dashboards).
pub const ENERGY_PER_INFERENCE_RULE: &str = "greenpipe:container_energy_per_inference_joules";

/// The workload counter energy per inference divides by.
const INFERENCES: &str = "greenpipe_workload_inferences_total";

/// Joules per inference of each pod, over the last minute or, for a younger workload, since it
/// became ready. The recording rule `greenpipe:container_energy_per_inference_joules` averages a
/// fixed minute, so while a workload is young that minute holds its model build (power, no
/// inferences) and its first figures are several times too high. The workload creates its
/// inference counter when its model is built; here both the power average and the inference
/// rate run from that counter's first sample. There is no figure in the first
/// [`READY_SECONDS`] (the estimator's power lags the load by a tick or two, and one such tick
/// halved the first figure in the quick start of 2026-12-02), nor once the counter is gone (the
/// workload ended).
pub fn energy_per_inference_query() -> String {
    let pod = label::POD_UID;
    let counter = format!("{INFERENCES}{{{pod}!=\"\"}}");
    format!(
        "sum by ({cid}, {pod}) (avg_over_time(({power}{{{pod}!=\"\"}} and on ({pod}) sum by ({pod}) ({counter}))[1m:1s]))\n  \
         / on ({pod}) group_left ()\n\
         (sum by ({pod}) (increase({counter}[1m]))\n  \
         / on ({pod}) ((time() - min by ({pod}) (min_over_time(timestamp({counter})[1m:1s]))) > {READY_SECONDS})\n  \
         > 0)\n\
         and on ({pod}) sum by ({pod}) ({counter})",
        cid = label::CONTAINER_ID,
        power = estimate::CONTAINER_POWER_WATTS,
    )
}

/// Seconds a workload's inference counter must exist before the view shows its joules per
/// inference.
pub const READY_SECONDS: u32 = 10;

/// `view` arguments.
#[derive(Debug, Clone, Args)]
pub struct ViewArgs {
    /// Prometheus base URL (where the estimator remote-writes).
    #[arg(long)]
    pub prometheus_url: String,
    /// Seconds between frames.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many seconds (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// Containers shown.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// The estimator's `--idle-split`, for the line that explains it.
    #[arg(long, value_enum, default_value_t = IdleSplit::Processes)]
    pub idle_split: IdleSplit,
    /// A display name for a pod, `UID=NAME` (repeatable).
    #[arg(long = "pod-name", value_parser = parse_pod_name)]
    pub pod_names: Vec<(String, String)>,
    /// Length of the demo load, seconds, for the header (0: no demo load).
    #[arg(long, default_value_t = 0)]
    pub load_seconds: u64,
}

fn parse_pod_name(s: &str) -> Result<(String, String), String> {
    let (uid, name) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not UID=NAME"))?;
    Ok((uid.to_string(), name.to_string()))
}

/// One node's predicted power.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeLine {
    /// Node name.
    pub node: String,
    /// Model label.
    pub model: String,
    /// Predicted node power, W.
    pub watts: f64,
    /// Its idle part, W.
    pub idle_watts: Option<f64>,
}

/// One container's attributed power.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerLine {
    /// Container id.
    pub container_id: String,
    /// Pod UID.
    pub pod_uid: String,
    /// Idle share, W.
    pub idle_watts: f64,
    /// Dynamic share, W.
    pub dynamic_watts: f64,
    /// Processes in the container.
    pub processes: Option<f64>,
    /// Joules per inference, for inference workloads.
    pub joules_per_inference: Option<f64>,
}

/// Everything one frame shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Nodes, by name.
    pub nodes: Vec<NodeLine>,
    /// Every container, largest total first.
    pub containers: Vec<ContainerLine>,
}

/// Renders one frame (no terminal control sequences).
pub fn render(
    snapshot: &Snapshot,
    args: &ViewArgs,
    elapsed: Duration,
    names: &BTreeMap<String, String>,
) -> String {
    let mut out = String::new();
    let secs = elapsed.as_secs();
    let _ = write!(
        out,
        "GreenPipe quick start   Prometheus: {}   ({secs}s",
        args.prometheus_url
    );
    if args.duration > 0 {
        let _ = write!(out, " of {}s", args.duration);
    }
    if args.load_seconds > 0 {
        out.push_str(if secs < args.load_seconds {
            ", demo load running"
        } else {
            ", load finished"
        });
    }
    out.push_str(")\n");
    out.push_str("Predicted node power:\n");
    if snapshot.nodes.is_empty() {
        out.push_str("  (waiting for the first prediction)\n");
    } else {
        let _ = writeln!(
            out,
            "  {:<20} {:>9} {:>9} {:>9}   model",
            "node", "total W", "idle W", "dynamic W"
        );
        for n in &snapshot.nodes {
            let (idle, dynamic) = match n.idle_watts {
                Some(i) => (format!("{i:9.2}"), format!("{:9.2}", n.watts - i)),
                None => (format!("{:>9}", "-"), format!("{:>9}", "-")),
            };
            let _ = writeln!(
                out,
                "  {:<20} {:9.2} {idle} {dynamic}   {}",
                n.node, n.watts, n.model
            );
        }
    }
    out.push_str("Top containers:\n");
    if snapshot.containers.is_empty() {
        out.push_str("  (waiting for the first attribution)\n");
    } else {
        let _ = writeln!(
            out,
            "  {:<16} {:>9} {:>9} {:>9} {:>6} {:>10}   pod",
            "container", "total W", "idle W", "dynamic W", "procs", "J/infer"
        );
        for ct in snapshot.containers.iter().take(args.top) {
            let name = names
                .get(&ct.pod_uid)
                .cloned()
                .unwrap_or_else(|| ct.container_id.chars().take(12).collect());
            let pod = if ct.container_id == SYSTEM_CONTAINER {
                "(host processes outside containers)".to_string()
            } else if ct.pod_uid.is_empty() {
                "(not in a pod)".to_string()
            } else {
                ct.pod_uid.clone()
            };
            let procs = ct
                .processes
                .map_or_else(|| "-".to_string(), |p| format!("{p:.0}"));
            let jpi = ct
                .joules_per_inference
                .map_or_else(|| "-".to_string(), |j| format!("{j:.4}"));
            let _ = writeln!(
                out,
                "  {name:<16} {:9.2} {:9.2} {:9.2} {procs:>6} {jpi:>10}   {pod}",
                ct.idle_watts + ct.dynamic_watts,
                ct.idle_watts,
                ct.dynamic_watts
            );
        }
    }
    // Before the first attribution there is no split to explain (and an empty sum is -0.0).
    if !snapshot.containers.is_empty() {
        out.push_str(&idle_line(snapshot, args.idle_split));
        out.push('\n');
    }
    out
}

/// The one line that says how idle power is split, with the numbers of this frame.
pub fn idle_line(snapshot: &Snapshot, split: IdleSplit) -> String {
    let idle: f64 = snapshot.nodes.iter().filter_map(|n| n.idle_watts).sum();
    let procs: f64 = snapshot.containers.iter().filter_map(|c| c.processes).sum();
    let system = snapshot
        .containers
        .iter()
        .find(|c| c.container_id == SYSTEM_CONTAINER);
    let system_procs = system.and_then(|s| s.processes).unwrap_or(0.0);
    let system_idle = system.map_or(0.0, |s| s.idle_watts);
    match split {
        IdleSplit::Processes => format!(
            "Idle power ({idle:.2} W) is split by process count: host processes outside containers \
             (system) are {system_procs:.0} of {procs:.0} processes, so system carries \
             {system_idle:.2} W of it; dynamic power follows each container's measured usage."
        ),
        IdleSplit::Even => format!(
            "Idle power ({idle:.2} W) is split evenly over the containers and system; dynamic \
             power follows each container's measured usage."
        ),
        IdleSplit::None => format!(
            "Idle power ({idle:.2} W) is not split: containers carry dynamic power only, which \
             follows each container's measured usage."
        ),
    }
}

/// Why a frame's data could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("querying {base}")]
    Request {
        base: String,
        source: reqwest::Error,
    },
    #[error("reading the answer")]
    Answer(#[source] reqwest::Error),
}

/// Instant-query answer as (labels, value) pairs.
async fn query(
    client: &reqwest::Client,
    base: &str,
    promql: &str,
) -> Result<Vec<(BTreeMap<String, String>, f64)>, SnapshotError> {
    let body: serde_json::Value = client
        .get(format!("{}/api/v1/query", base.trim_end_matches('/')))
        .query(&[("query", promql)])
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .map_err(|source| SnapshotError::Request {
            base: base.to_string(),
            source,
        })?
        .json()
        .await
        .map_err(SnapshotError::Answer)?;
    let result = body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(result
        .iter()
        .filter_map(|s| {
            let labels = s["metric"]
                .as_object()?
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect();
            let v: f64 = s["value"][1].as_str()?.parse().ok()?;
            v.is_finite().then_some((labels, v))
        })
        .collect())
}

fn get<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    labels.get(key).map_or("", String::as_str)
}

/// Reads one frame's data. Series that are missing leave their cells empty.
pub async fn snapshot(client: &reqwest::Client, base: &str) -> Result<Snapshot, SnapshotError> {
    let node_q = format!(
        "max by ({n}, {m}) ({})",
        estimate::NODE_POWER_WATTS,
        n = label::NODE,
        m = label::MODEL
    );
    let idle_q = format!(
        "max by ({n}) ({})",
        estimate::NODE_IDLE_POWER_WATTS,
        n = label::NODE
    );
    let container_q = format!(
        "sum by ({}, {}, {}) ({})",
        label::CONTAINER_ID,
        label::POD_UID,
        label::COMPONENT,
        estimate::CONTAINER_POWER_WATTS
    );
    let procs_q = format!(
        "max by ({}, {}) ({})",
        label::CONTAINER_ID,
        label::POD_UID,
        c::PROCESSES
    );
    let jpi_q = energy_per_inference_query();
    let (nodes, idle, containers, procs, jpi) = tokio::try_join!(
        query(client, base, &node_q),
        query(client, base, &idle_q),
        query(client, base, &container_q),
        query(client, base, &procs_q),
        query(client, base, &jpi_q),
    )?;
    let idle: BTreeMap<&str, f64> = idle
        .iter()
        .map(|(l, v)| (get(l, label::NODE), *v))
        .collect();
    let mut snap = Snapshot {
        nodes: nodes
            .iter()
            .map(|(l, v)| NodeLine {
                node: get(l, label::NODE).to_string(),
                model: get(l, label::MODEL).to_string(),
                watts: *v,
                idle_watts: idle.get(get(l, label::NODE)).copied(),
            })
            .collect(),
        containers: Vec::new(),
    };
    snap.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    let mut by_id: BTreeMap<(String, String), ContainerLine> = BTreeMap::new();
    let key = |l: &BTreeMap<String, String>| {
        (
            get(l, label::CONTAINER_ID).to_string(),
            get(l, label::POD_UID).to_string(),
        )
    };
    for (l, v) in &containers {
        let k = key(l);
        let line = by_id.entry(k.clone()).or_insert_with(|| ContainerLine {
            container_id: k.0,
            pod_uid: k.1,
            ..Default::default()
        });
        if get(l, label::COMPONENT) == component::IDLE {
            line.idle_watts += v;
        } else {
            line.dynamic_watts += v;
        }
    }
    for (l, v) in &procs {
        if let Some(line) = by_id.get_mut(&key(l)) {
            line.processes = Some(*v);
        }
    }
    for (l, v) in &jpi {
        if let Some(line) = by_id.get_mut(&key(l)) {
            line.joules_per_inference = Some(*v);
        }
    }
    snap.containers = by_id.into_values().collect();
    snap.containers.sort_by(|a, b| {
        (b.idle_watts + b.dynamic_watts).total_cmp(&(a.idle_watts + a.dynamic_watts))
    });
    Ok(snap)
}

/// Why `view` could not run.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// `--interval` is not a positive number.
    #[error("--interval must be a positive number of seconds")]
    Interval,
    /// The Tokio runtime could not start.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    /// Writing a frame to stdout failed.
    #[error("writing to stdout")]
    Stdout(#[from] std::io::Error),
}

/// Runs `view` until `--duration` or until interrupted.
pub fn run(args: ViewArgs) -> Result<(), ViewError> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        return Err(ViewError::Interval);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ViewError::Runtime)?;
    let client = reqwest::Client::new();
    let names: BTreeMap<String, String> = args.pod_names.iter().cloned().collect();
    let tty = std::io::stdout().is_terminal();
    let started = Instant::now();
    let mut stdout = std::io::stdout();
    loop {
        let elapsed = started.elapsed();
        let snap = runtime
            .block_on(snapshot(&client, &args.prometheus_url))
            .unwrap_or_default();
        let frame = render(&snap, &args, elapsed, &names);
        if tty {
            let mut screen = String::from("\x1b[H");
            for line in frame.lines() {
                screen.push_str(line);
                screen.push_str("\x1b[K\n");
            }
            screen.push_str("\nCtrl-C stops everything.\x1b[K\n\x1b[J");
            stdout.write_all(screen.as_bytes())?;
        } else {
            writeln!(stdout, "{frame}")?;
        }
        stdout.flush()?;
        if args.duration > 0 && elapsed.as_secs() >= args.duration {
            return Ok(());
        }
        let next = Duration::from_secs_f64(
            args.interval * ((elapsed.as_secs_f64() / args.interval).floor() + 1.0),
        );
        std::thread::sleep(next.saturating_sub(started.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ViewArgs {
        ViewArgs {
            prometheus_url: "http://127.0.0.1:9".into(),
            interval: 1.0,
            duration: 60,
            top: 5,
            idle_split: IdleSplit::Processes,
            pod_names: vec![],
            load_seconds: 30,
        }
    }

    #[test]
    fn frame_has_fixed_precision_idle_and_dynamic_columns_and_the_idle_line() {
        let snap = Snapshot {
            nodes: vec![NodeLine {
                node: "n1".into(),
                model: "x86-uncalibrated".into(),
                watts: 95.0,
                idle_watts: Some(83.0),
            }],
            containers: vec![
                ContainerLine {
                    container_id: SYSTEM_CONTAINER.into(),
                    pod_uid: String::new(),
                    idle_watts: 80.0,
                    dynamic_watts: 3.0,
                    processes: Some(140.0),
                    joules_per_inference: None,
                },
                ContainerLine {
                    container_id: "ab".repeat(32),
                    pod_uid: "uid-1".into(),
                    idle_watts: 3.0,
                    dynamic_watts: 9.0,
                    processes: Some(4.0),
                    joules_per_inference: Some(0.125),
                },
            ],
        };
        let names = BTreeMap::from([("uid-1".to_string(), "cpu-burner".to_string())]);
        let text = render(&snap, &args(), Duration::from_secs(12), &names);
        assert!(text.contains("(12s of 60s, demo load running)"), "{text}");
        assert!(text.contains("    95.00     83.00     12.00"), "{text}");
        assert!(
            text.contains("cpu-burner           12.00      3.00      9.00      4     0.1250"),
            "{text}"
        );
        assert!(
            text.contains("(system) are 140 of 144 processes, so system carries 80.00 W"),
            "{text}"
        );
        assert!(!text.contains("3.1 W") && !text.contains(" 3 W"));
        let waiting = render(
            &Snapshot::default(),
            &args(),
            Duration::from_secs(40),
            &names,
        );
        assert!(
            waiting.contains("load finished")
                && waiting.contains("waiting for the first prediction")
        );
        // No idle split is explained before there is one (it read "-0.00 W ... 0 of -0").
        assert!(
            !waiting.contains("Idle power") && !waiting.contains("-0"),
            "{waiting}"
        );
    }
}
