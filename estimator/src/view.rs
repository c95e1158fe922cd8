//! `view`: the quick start's live view of what the estimator writes to Prometheus — predicted node
//! power split into idle and dynamic, every container that fits the terminal (in an order that
//! does not move as power changes; a line counts those left out) with its idle and dynamic shares,
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
const INFERENCES: &str = greenpipe_common::names::workload::INFERENCES_TOTAL;

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
    /// Containers shown at most (default: every one the terminal has rows for; every one when
    /// the output is not a terminal).
    #[arg(long)]
    pub top: Option<usize>,
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
    /// Every container, in [`Snapshot::containers`]'s order.
    pub containers: Vec<ContainerLine>,
}

/// The terminal a frame is drawn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub columns: usize,
}

/// Lines a terminal frame adds below the rendered one ("Ctrl-C stops everything." after a blank
/// line) plus the line the cursor rests on, which must not scroll the frame.
const FRAME_FOOTER_ROWS: usize = 3;

/// The size of the terminal on stdout, where it is one.
fn screen_size() -> Option<Screen> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct passed, which outlives the call.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_row > 0 && size.ws_col > 0).then_some(Screen {
        rows: usize::from(size.ws_row),
        columns: usize::from(size.ws_col),
    })
}

/// A container's name in the view: its pod's display name, else the start of its id.
fn display_name(ct: &ContainerLine, names: &BTreeMap<String, String>) -> String {
    names
        .get(&ct.pod_uid)
        .cloned()
        .unwrap_or_else(|| ct.container_id.chars().take(12).collect())
}

/// The view's order, which does not move from one frame to the next as power changes: `system`
/// first, then containers by display name, pod UID and id.
fn stable_order(containers: &mut [ContainerLine], names: &BTreeMap<String, String>) {
    containers.sort_by_cached_key(|ct| {
        (
            ct.container_id != SYSTEM_CONTAINER,
            display_name(ct, names),
            ct.pod_uid.clone(),
            ct.container_id.clone(),
        )
    });
}

/// `text` cut to `columns` characters, so a line never wraps and pushes the frame down.
fn fit(text: &str, columns: usize) -> String {
    text.chars().take(columns).collect()
}

/// `text` broken at spaces into lines of at most `columns` characters.
fn wrap(text: &str, columns: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.last_mut().expect("never empty");
        let len = last.chars().count();
        if len > 0 && len + 1 + word.chars().count() > columns {
            lines.push(word.to_string());
        } else {
            if len > 0 {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    lines.into_iter().map(|l| fit(&l, columns)).collect()
}

/// Renders one frame (no terminal control sequences). On a `screen`, no line is wider than it
/// and the frame leaves [`FRAME_FOOTER_ROWS`] rows free: the containers that do not fit are
/// counted on a line of their own instead.
pub fn render(
    snapshot: &Snapshot,
    args: &ViewArgs,
    elapsed: Duration,
    names: &BTreeMap<String, String>,
    screen: Option<Screen>,
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
    out.push_str("Containers:\n");
    // Rows left for container lines once everything else of the frame is counted.
    let idle = (!snapshot.containers.is_empty()).then(|| idle_line(snapshot, args.idle_split));
    let room = screen.map(|sc| {
        let idle_rows = idle.as_ref().map_or(0, |l| wrap(l, sc.columns).len());
        let used = out.lines().count() + 1 + idle_rows + FRAME_FOOTER_ROWS;
        sc.rows.saturating_sub(used)
    });
    let total = snapshot.containers.len();
    let cap = args.top.unwrap_or(usize::MAX);
    let fits = room.unwrap_or(usize::MAX);
    let shown = if total <= cap.min(fits) {
        total
    } else if cap < fits {
        cap
    } else {
        // One row for the line that says how many are hidden.
        fits.saturating_sub(1)
    };
    if snapshot.containers.is_empty() {
        out.push_str("  (waiting for the first attribution)\n");
    } else {
        let _ = writeln!(
            out,
            "  {:<16} {:>9} {:>9} {:>9} {:>6} {:>10}   pod",
            "container", "total W", "idle W", "dynamic W", "procs", "J/infer"
        );
        for ct in snapshot.containers.iter().take(shown) {
            let name = display_name(ct, names);
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
    if shown < total {
        let hidden = total - shown;
        let plural = if hidden == 1 { "" } else { "s" };
        let why = if shown == cap {
            format!("--top {cap}")
        } else {
            format!("{shown} of {total} fit this terminal")
        };
        let _ = writeln!(
            out,
            "  ... {hidden} more container{plural} not shown: {why}"
        );
    }
    // Before the first attribution there is no split to explain (and an empty sum is -0.0).
    if let Some(idle) = idle {
        out.push_str(&idle);
        out.push('\n');
    }
    match screen {
        None => out,
        Some(sc) => out
            .lines()
            .flat_map(|l| {
                if l.starts_with("Idle power") {
                    wrap(l, sc.columns)
                } else {
                    vec![fit(l, sc.columns)]
                }
            })
            .fold(String::new(), |mut acc, l| {
                acc.push_str(&l);
                acc.push('\n');
                acc
            }),
    }
}

/// The one line that says how idle power is split, with the numbers of this frame.
pub fn idle_line(snapshot: &Snapshot, split: IdleSplit) -> String {
    let idle: f64 = snapshot.nodes.iter().filter_map(|n| n.idle_watts).sum();
    // `+ 0.0`: an empty f64 sum is -0.0, which printed as "0 of -0 processes".
    let procs: f64 = snapshot
        .containers
        .iter()
        .filter_map(|c| c.processes)
        .sum::<f64>()
        + 0.0;
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
    #[error(transparent)]
    Decode(#[from] crate::promql::DecodeError),
}

/// Instant-query answer as (labels, value) pairs; NaN and infinite values left out.
async fn query(
    client: &reqwest::Client,
    base: &str,
    promql: &str,
) -> Result<Vec<(BTreeMap<String, String>, f64)>, SnapshotError> {
    let body = client
        .get(format!("{}/api/v1/query", base.trim_end_matches('/')))
        .query(&[("query", promql)])
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .map_err(|source| SnapshotError::Request {
            base: base.to_string(),
            source,
        })?
        .bytes()
        .await
        .map_err(SnapshotError::Answer)?;
    Ok(crate::promql::decode_matrix(&body)?
        .into_iter()
        .filter_map(|s| {
            let &(_, v) = s.points.last()?;
            let labels = s
                .labels
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
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
        let mut snap = runtime
            .block_on(snapshot(&client, &args.prometheus_url))
            .unwrap_or_default();
        stable_order(&mut snap.containers, &names);
        // Read each frame: the terminal may have been resized.
        let screen = if tty { screen_size() } else { None };
        let frame = render(&snap, &args, elapsed, &names, screen);
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
            top: None,
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
        let text = render(&snap, &args(), Duration::from_secs(12), &names, None);
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
            None,
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

    /// The quick start's demo: `system`, five pods and the gRPC server with its client.
    fn demo() -> (Snapshot, BTreeMap<String, String>) {
        let pods = [
            "cpu-burner",
            "memory-stream",
            "disk-writer",
            "infer-f32",
            "infer-int8",
            "infer-server",
            "infer-client",
        ];
        let mut containers = vec![ContainerLine {
            container_id: SYSTEM_CONTAINER.into(),
            idle_watts: 1.0,
            dynamic_watts: 0.1,
            processes: Some(140.0),
            ..Default::default()
        }];
        let mut names = BTreeMap::new();
        for (i, pod) in pods.iter().enumerate() {
            let uid = format!("7a3c9e10-0000-4000-8000-00000000000{i}");
            names.insert(uid.clone(), pod.to_string());
            containers.push(ContainerLine {
                container_id: format!("{i}").repeat(64),
                pod_uid: uid,
                idle_watts: 0.01,
                // Power in the reverse of the display order, so order by power would differ.
                dynamic_watts: 0.2 * i as f64,
                processes: Some(2.0),
                joules_per_inference: pod.starts_with("infer").then_some(0.05),
            });
        }
        let snap = Snapshot {
            nodes: vec![NodeLine {
                node: "my-host".into(),
                model: "uncalibrated-vm".into(),
                watts: 3.1,
                idle_watts: Some(1.53),
            }],
            containers,
        };
        (snap, names)
    }

    #[test]
    fn every_demo_container_fits_140_by_40_in_an_order_that_does_not_follow_power() {
        let (mut snap, names) = demo();
        snap.containers.reverse();
        stable_order(&mut snap.containers, &names);
        let screen = Screen {
            rows: 40,
            columns: 140,
        };
        let text = render(
            &snap,
            &args(),
            Duration::from_secs(12),
            &names,
            Some(screen),
        );
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows.len() + FRAME_FOOTER_ROWS <= 40, "{text}");
        assert!(rows.iter().all(|l| l.chars().count() <= 140), "{text}");
        let order: Vec<&str> = rows
            .iter()
            .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
            .filter(|n| *n == "system" || names.values().any(|v| v == n))
            .collect();
        assert_eq!(
            order,
            [
                "system",
                "cpu-burner",
                "disk-writer",
                "infer-client",
                "infer-f32",
                "infer-int8",
                "infer-server",
                "memory-stream"
            ],
            "{text}"
        );
        assert!(!text.contains("not shown"), "{text}");
        // A frame later, with other power figures, the rows stay where they were.
        snap.containers
            .iter_mut()
            .for_each(|c| c.dynamic_watts *= 3.0);
        snap.containers.swap(1, 5);
        stable_order(&mut snap.containers, &names);
        let again = render(
            &snap,
            &args(),
            Duration::from_secs(13),
            &names,
            Some(screen),
        );
        let names_at = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(names_at(&text), names_at(&again));
    }

    #[test]
    fn at_80_by_24_lines_are_cut_to_the_width_and_hidden_containers_counted() {
        let (mut snap, names) = demo();
        stable_order(&mut snap.containers, &names);
        let screen = Screen {
            rows: 24,
            columns: 80,
        };
        let text = render(
            &snap,
            &args(),
            Duration::from_secs(12),
            &names,
            Some(screen),
        );
        assert!(text.lines().count() + FRAME_FOOTER_ROWS <= 24, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        // The idle line is wrapped, not cut: its end is still there.
        assert!(text.contains("measured usage."), "{text}");
        assert!(!text.contains("not shown"), "all eight fit 24 rows: {text}");
        let small = Screen {
            rows: 14,
            columns: 80,
        };
        let text = render(&snap, &args(), Duration::from_secs(12), &names, Some(small));
        assert!(text.lines().count() + FRAME_FOOTER_ROWS <= 14, "{text}");
        let shown = text.lines().filter(|l| l.contains("  2 ")).count()
            + usize::from(text.contains("  system "));
        let hidden = 8 - shown;
        assert!(hidden > 0, "{text}");
        assert!(
            text.contains(&format!("... {hidden} more container")),
            "{text}"
        );
        // --top caps the rows whatever the room.
        let top = ViewArgs {
            top: Some(3),
            ..args()
        };
        let text = render(&snap, &top, Duration::from_secs(12), &names, Some(screen));
        assert!(
            text.contains("... 5 more containers not shown: --top 3"),
            "{text}"
        );
    }
}
