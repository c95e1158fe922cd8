//! The placement controller: every interval, fetch each zone's data, forecast the horizon, read
//! the nodes, plan with [`crate::planner`], and patch the nodes that must change (or print the
//! plan with `--dry-run`). Talks to the API server with `kube` and the pod's service account
//! (RBAC: nodes get/list/patch, deploy/carbon/rbac.yaml).

use crate::forecast::{self, Predicted};
use crate::patch::{json_patch, node_state};
use crate::planner::{self, Plan, Policy};
use crate::sink::{Sample, SampleSink};
use crate::sources::{self, Credentials, ZoneSource};
use greenpipe_common::names;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What stops the controller (a node's failed patch does not: it is logged and re-planned).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The `--nodes-file` cannot be read.
    #[error("reading {}", path.display())]
    ReadNodes {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The `--nodes-file` is not `kubectl get nodes -o json` output.
    #[error("{}: not a NodeList", path.display())]
    NotANodeList {
        /// The file.
        path: PathBuf,
        /// The parse error (with line and column).
        source: serde_json::Error,
    },
    /// A node of the plan is not among the nodes read (a planner bug).
    #[error("planned node {node} vanished")]
    NodeVanished {
        /// The node.
        node: String,
    },
    /// The JSON patch for a node cannot be built or encoded.
    #[error("building the patch for node {node}")]
    Patch {
        /// The node.
        node: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The HTTP client for the intensity sources cannot be built.
    #[error("building the HTTP client")]
    HttpClient(#[source] reqwest::Error),
    /// No Kubernetes configuration, or the API server is unreachable.
    #[error("connecting to the Kubernetes API server (in-cluster service account or kubeconfig)")]
    Connect(#[source] kube::Error),
    /// Listing the nodes failed.
    #[error("listing nodes")]
    ListNodes(#[source] kube::Error),
    /// The SIGTERM or SIGINT handler cannot be installed.
    #[error(transparent)]
    Signal(#[from] greenpipe_common::shutdown::SignalError),
}

/// How nodes map to grid zones.
#[derive(Debug, Clone, Default)]
pub struct ZoneMap {
    /// Node name → grid zone (wins over the label).
    pub nodes: BTreeMap<String, String>,
    /// `topology.kubernetes.io/zone` value → grid zone; without an alias the label value is used.
    pub aliases: BTreeMap<String, String>,
}

impl ZoneMap {
    /// The grid zone of a node.
    pub fn zone_of(&self, node: &str, topology: Option<&str>) -> Option<String> {
        if let Some(z) = self.nodes.get(node) {
            return Some(z.clone());
        }
        let t = topology?;
        Some(
            self.aliases
                .get(t)
                .cloned()
                .unwrap_or_else(|| t.to_string()),
        )
    }
}

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Zone sources.
    pub sources: Vec<ZoneSource>,
    /// Provider credentials.
    pub credentials: Credentials,
    /// Forecast horizon, seconds.
    pub horizon: i64,
    /// Decision policy.
    pub policy: Policy,
    /// Node → zone mapping.
    pub zones: ZoneMap,
    /// Print, do not patch.
    pub dry_run: bool,
    /// Seconds between rounds.
    pub interval: i64,
    /// Run one round and exit.
    pub once: bool,
    /// Plan against a NodeList JSON file instead of the API server (dry runs only).
    pub nodes_file: Option<PathBuf>,
    /// Fixed "now" (replaying history), unix seconds.
    pub at: Option<i64>,
}

/// Every zone's forecast (ours merged with the provider's) and latest actual.
pub struct ZoneForecasts {
    /// Zone → forecast for the next 48 h (empty if the source failed).
    pub forecasts: BTreeMap<String, Vec<Predicted>>,
    /// Zone → (source name, latest actual value).
    pub actuals: BTreeMap<String, (String, Option<f64>)>,
    /// Zone → hourly actual history.
    pub history: BTreeMap<String, crate::series::Hourly>,
    /// Zone → why its source failed this round.
    pub errors: BTreeMap<String, String>,
}

/// Fetches and forecasts every zone. A failing source leaves its zone without a forecast and is
/// logged; it never stops the others (the planner then removes that zone's labels and taints).
pub async fn forecast_all(
    client: &reqwest::Client,
    sources: &[ZoneSource],
    creds: &Credentials,
    now: i64,
) -> ZoneForecasts {
    let mut out = ZoneForecasts {
        forecasts: BTreeMap::new(),
        actuals: BTreeMap::new(),
        history: BTreeMap::new(),
        errors: BTreeMap::new(),
    };
    for src in sources {
        match sources::fetch(client, src, creds, now).await {
            Ok(data) => {
                let gaps = data.actual.gaps();
                if !gaps.is_empty() {
                    let recent: Vec<String> =
                        gaps.iter().rev().take(3).map(|g| g.to_string()).collect();
                    tracing::warn!(zone = %src.zone, gaps = gaps.len(), recent = ?recent, "gaps in actual series (kept, not filled)");
                }
                let f = forecast::forecast_zone(&data.actual, data.forecast.as_ref(), now);
                let latest = data.actual.points.iter().rev().find_map(|p| p.value);
                out.actuals
                    .insert(src.zone.clone(), (data.actual.source.clone(), latest));
                out.history.insert(src.zone.clone(), data.actual.hourly());
                out.forecasts.insert(src.zone.clone(), f);
            }
            Err(e) => {
                tracing::error!(zone = %src.zone, error = %e, "source failed; zone has no forecast this round");
                out.forecasts.insert(src.zone.clone(), Vec::new());
                out.errors.insert(src.zone.clone(), e.to_string());
            }
        }
    }
    out
}

/// Samples of the intensity metric: latest actual per zone, and forecasts at `horizons` hours
/// after `now`, all stamped `stamp_ms` (the wall clock when written: Prometheus refuses samples
/// far in the past, and a replay with `--at` is still "what we believed when we wrote it").
pub fn samples(z: &ZoneForecasts, now: i64, horizons: &[i64], stamp_ms: i64) -> Vec<Sample> {
    use names::carbon::*;
    let ts = stamp_ms;
    let mut out = Vec::new();
    for (zone, (source, value)) in &z.actuals {
        if let Some(v) = value {
            out.push(Sample::new(
                GRID_CARBON_INTENSITY_GRAMS_PER_KWH,
                &[
                    (ZONE, zone),
                    (names::label::SOURCE, source),
                    (names::label::KIND, KIND_ACTUAL),
                ],
                *v,
                ts,
            ));
        }
    }
    for (zone, f) in &z.forecasts {
        let source = z
            .actuals
            .get(zone)
            .map(|a| a.0.as_str())
            .unwrap_or("unknown");
        for &h in horizons {
            if let Some(p) = forecast::at(f, now + 3600 * h) {
                let src = if p.method == forecast::Method::Provider {
                    source.to_string()
                } else {
                    format!("greenpipe_{}", p.method.name())
                };
                let h = h.to_string();
                out.push(Sample::new(
                    GRID_CARBON_INTENSITY_GRAMS_PER_KWH,
                    &[
                        (ZONE, zone),
                        (names::label::SOURCE, &src),
                        (names::label::KIND, KIND_FORECAST),
                        (HORIZON_HOURS, &h),
                    ],
                    p.value,
                    ts,
                ));
            }
        }
    }
    out
}

/// Reads a `kubectl get nodes -o json` NodeList.
pub fn read_nodes_file(path: &std::path::Path) -> Result<Vec<Node>, ControllerError> {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<Node>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| ControllerError::ReadNodes {
        path: path.to_path_buf(),
        source,
    })?;
    let list: List =
        serde_json::from_str(&text).map_err(|source| ControllerError::NotANodeList {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(list.items)
}

/// Prints a plan and the patches it implies.
pub fn print_plan(plan: &Plan, nodes: &[Node], now: i64) -> Result<(), ControllerError> {
    for (zone, class) in &plan.zones {
        println!("zone {zone}: {}", class.as_str());
    }
    for h in &plan.held {
        println!(
            "hold {}: would become {} but dwell lasts until {}",
            h.node,
            h.wanted.as_str(),
            crate::time::format(h.until)
        );
    }
    if plan.changes.is_empty() {
        println!("no changes");
    }
    for c in &plan.changes {
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&c.node))
            .ok_or_else(|| ControllerError::NodeVanished {
                node: c.node.clone(),
            })?;
        let patch_error = |source| ControllerError::Patch {
            node: c.node.clone(),
            source,
        };
        let patch = json_patch(node, c, now, crate::time::now()).map_err(patch_error)?;
        let patch = serde_json::to_string(&patch).map_err(patch_error)?;
        println!(
            "node {}: {} -> {}{} ({})\n  patch: {}",
            c.node,
            c.from.map_or("none", |x| x.as_str()),
            c.to.class.map_or("none", |x| x.as_str()),
            if c.taint_changes {
                if c.to.tainted {
                    ", taint"
                } else {
                    ", untaint"
                }
            } else {
                ""
            },
            c.reason,
            patch
        );
    }
    Ok(())
}

/// Patch attempts per node and round: the first, plus re-plans after concurrent edits.
const PATCH_ATTEMPTS: usize = 5;

/// Whether a refused patch may be a lost race: 409, or 422, which is what the API server answers
/// when our `test` of `resourceVersion` fails (its message does not say which op failed, so the
/// caller re-reads the node and compares resourceVersions to tell a race from a bad patch).
fn may_be_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409 || status.code == 422)
}

/// Patches one node; when someone else changed it between our read and our write (another
/// controller's taint, kubectl label), reads it again, re-plans that node and retries at once
/// rather than a whole interval later. Errors are logged: one node never stops the round.
async fn apply_change(
    api: &kube::Api<Node>,
    node: &Node,
    change: &planner::Change,
    at_horizon: &BTreeMap<String, Option<f64>>,
    settings: &Settings,
    now: i64,
) {
    let mut node = node.clone();
    let mut change = change.clone();
    for attempt in 1..=PATCH_ATTEMPTS {
        let patch = match json_patch(&node, &change, now, crate::time::now()) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(node = %change.node, error = %e, "building the patch failed");
                return;
            }
        };
        let result = api
            .patch(
                &change.node,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Json::<()>(patch),
            )
            .await;
        match result {
            Ok(_) => {
                tracing::info!(node = %change.node, reason = %change.reason, attempt, "patched");
                return;
            }
            Err(e) if may_be_conflict(&e) && attempt < PATCH_ATTEMPTS => {
                let fresh = match api.get(&change.node).await {
                    Ok(n) => n,
                    Err(get) => {
                        tracing::warn!(node = %change.node, error = %e, get_error = %get, "patch refused and re-reading the node failed; will re-plan next round");
                        return;
                    }
                };
                if fresh.metadata.resource_version == node.metadata.resource_version {
                    // Same node as planned: the patch itself is bad, a retry would be too.
                    tracing::error!(node = %change.node, error = %e, "patch refused for a node that did not change");
                    return;
                }
                tracing::warn!(node = %change.node, error = %e, attempt, "node changed since it was read (conflict); re-reading and re-planning it");
                node = fresh;
                let state = node_state(&node, |name, topo| settings.zones.zone_of(name, topo));
                let replan = planner::plan(&[state], at_horizon, &settings.policy, now);
                match replan.changes.into_iter().next() {
                    Some(c) => change = c,
                    None => {
                        tracing::info!(node = %change.node, "after the concurrent edit nothing is left to change");
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(node = %change.node, error = %e, attempt, "patch failed; will re-plan next round");
                return;
            }
        }
    }
}

/// Runs the controller until interrupted (or one round with `once`).
pub async fn run(
    settings: Settings,
    sink: Option<&(impl SampleSink + Sync)>,
) -> Result<(), ControllerError> {
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(ControllerError::HttpClient)?;
    let kube_client = match &settings.nodes_file {
        Some(_) => None,
        None => Some(
            kube::Client::try_default()
                .await
                .map_err(ControllerError::Connect)?,
        ),
    };
    // Installed once, before the first round: a SIGTERM during a round ends the next wait.
    let mut stop = greenpipe_common::shutdown::Shutdown::install()?;
    loop {
        let now = settings.at.unwrap_or_else(crate::time::now);
        let zf = forecast_all(&http, &settings.sources, &settings.credentials, now).await;
        let at_horizon: BTreeMap<String, Option<f64>> = zf
            .forecasts
            .iter()
            .map(|(z, f)| {
                (
                    z.clone(),
                    forecast::at(f, now + settings.horizon).map(|p| p.value),
                )
            })
            .collect();
        let nodes: Vec<Node> = match (&kube_client, &settings.nodes_file) {
            (Some(c), _) => {
                let api: kube::Api<Node> = kube::Api::all(c.clone());
                api.list(&Default::default())
                    .await
                    .map_err(ControllerError::ListNodes)?
                    .items
            }
            (None, Some(path)) => read_nodes_file(path)?,
            (None, None) => unreachable!("a client or a nodes file is always set"),
        };
        let states: Vec<_> = nodes
            .iter()
            .map(|n| node_state(n, |name, topo| settings.zones.zone_of(name, topo)))
            .collect();
        let plan = planner::plan(&states, &at_horizon, &settings.policy, now);
        print_plan(&plan, &nodes, now)?;
        if let (false, Some(c)) = (settings.dry_run, &kube_client) {
            let api: kube::Api<Node> = kube::Api::all(c.clone());
            for change in &plan.changes {
                let node = nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(&change.node))
                    .ok_or_else(|| ControllerError::NodeVanished {
                        node: change.node.clone(),
                    })?;
                apply_change(&api, node, change, &at_horizon, &settings, now).await;
            }
        }
        if let Some(sink) = sink {
            let stamp = crate::time::now() * 1000;
            let mut s = samples(&zf, now, &[1, 2, 6, 12, 24, 48], stamp);
            for st in &states {
                if let Some(z) = &st.zone {
                    s.push(Sample::new(
                        names::carbon::NODE_GRID_ZONE_INFO,
                        &[(names::label::NODE, &st.name), (names::carbon::ZONE, z)],
                        1.0,
                        stamp,
                    ));
                }
            }
            if let Err(e) = sink.write(&s).await {
                tracing::error!(error = %e, "writing metrics failed");
            }
        }
        if settings.once {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(settings.interval.max(1) as u64)) => {}
            signal = stop.recv() => {
                tracing::info!(signal, "shutting down");
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_nodes_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.json");
        let e = read_nodes_file(&path).unwrap_err();
        assert!(
            matches!(&e, ControllerError::ReadNodes { path: p, .. } if *p == path),
            "{e}"
        );
        assert_eq!(e.to_string(), format!("reading {}", path.display()));
        std::fs::write(&path, r#"{"kind": "Node"}"#).unwrap();
        let e = read_nodes_file(&path).unwrap_err();
        assert!(matches!(&e, ControllerError::NotANodeList { .. }), "{e}");
        assert_eq!(e.to_string(), format!("{}: not a NodeList", path.display()));
        let source = std::error::Error::source(&e).unwrap().to_string();
        assert!(source.contains("items"), "{source}");
    }
}
