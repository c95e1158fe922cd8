//! Energy of a campaign window, per container: the online estimator's readout (same PromQL,
//! same rate windows) over the window at a 1 s step, the node's power at each tick — measured by
//! the meter where it has a reading, predicted by the trained model always — and the online
//! attribution rule (`attribution::attribute`, idle split by process count) at each tick. The
//! shares add up to the node's power at every tick, so the containers' energies add up to the
//! node's energy over the window.

use std::collections::BTreeMap;
use std::time::Duration;

use greenpipe_common::model::NodeModel;

use greenpipe_query::attribution::{attribute, IdleSplit};
use greenpipe_query::endpoint::{AuthFlags, Endpoint};
use greenpipe_query::promql::{decode_matrix, Prometheus};
use greenpipe_query::readout::{assemble, node_matcher, QuerySet};
use greenpipe_query::shard::Shard;

/// Where node power came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PowerSource {
    /// The node's power meter.
    Meter,
    /// The trained model.
    Predicted,
}

impl PowerSource {
    /// The `power_source` column value.
    pub fn as_str(self) -> &'static str {
        match self {
            PowerSource::Meter => "meter",
            PowerSource::Predicted => "predicted",
        }
    }
}

/// One container's (or `system`'s) energy over a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerEnergy {
    /// Idle share, J.
    pub idle_joules: f64,
    /// Dynamic share, J.
    pub dynamic_joules: f64,
    /// Pod UID.
    pub pod_uid: String,
}

impl ContainerEnergy {
    /// Idle + dynamic, J.
    pub fn joules(&self) -> f64 {
        self.idle_joules + self.dynamic_joules
    }
}

/// A window's energy from one power source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEnergy {
    /// Power source.
    pub source: PowerSource,
    /// Ticks with a node power value.
    pub ticks: usize,
    /// Window length, s.
    pub seconds: f64,
    /// Node energy, J (mean power × window length).
    pub node_joules: f64,
    /// Its idle part, J.
    pub node_idle_joules: f64,
    /// Per container id.
    pub containers: BTreeMap<String, ContainerEnergy>,
    /// The exporter's own energy, J: the node's dynamic power at each tick times the exporter's
    /// share of the node's busy CPU time (the attribution rule applied to the exporter's usage,
    /// on CPU alone). `None` when the exporter's CPU counter was not scraped.
    pub exporter_joules: Option<f64>,
}

impl SourceEnergy {
    /// Mean node power, W.
    pub fn node_watts(&self) -> f64 {
        self.node_joules / self.seconds
    }
}

/// Why a window's energy could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum EnergyError {
    #[error(transparent)]
    Endpoint(#[from] greenpipe_query::endpoint::EndpointError),
    #[error("empty window {start}..{end}")]
    EmptyWindow { start: f64, end: f64 },
    #[error(transparent)]
    Query(#[from] greenpipe_query::promql::QueryError),
    #[error(transparent)]
    Decode(#[from] greenpipe_query::promql::DecodeError),
}

/// Queries and integrates one window of `node`. Sources without any tick are left out.
pub async fn window(
    prometheus_url: &str,
    model: &NodeModel,
    node: &str,
    start: f64,
    end: f64,
) -> Result<Vec<SourceEnergy>, EnergyError> {
    let endpoint = Endpoint::new(
        concat!("greenpipe-campaign/", env!("CARGO_PKG_VERSION")),
        "prometheus",
        prometheus_url,
        &AuthFlags::default(),
        Duration::from_secs(30),
    )?;
    let api = Prometheus::new(endpoint);
    let weights: Vec<_> = model
        .attribution_weights
        .iter()
        .map(|w| w.feature)
        .collect();
    let q = QuerySet::new(
        &model.required_features(),
        &weights,
        Duration::from_secs(5),
        &[],
        &node_matcher(&[node]),
    );
    let step = Duration::from_secs(1);
    let start_ms = (start * 1000.0).ceil() as i64;
    let end_ms = (end * 1000.0).floor() as i64;
    if end_ms <= start_ms {
        return Err(EnergyError::EmptyWindow { start, end });
    }
    let (exporter_q, busy_q) = overhead_queries(node);
    let (n, c, e, b) = tokio::try_join!(
        api.query_range(&q.node, start_ms, end_ms, step),
        api.query_range(&q.container, start_ms, end_ms, step),
        api.query_range(&exporter_q, start_ms, end_ms, step),
        api.query_range(&busy_q, start_ms, end_ms, step),
    )?;
    let node_series = decode_matrix(&n.body)?;
    let container_series = decode_matrix(&c.body)?;
    let exporter_share = cpu_share(&decode_matrix(&e.body)?, &decode_matrix(&b.body)?);
    let count = ((end_ms - start_ms) / 1000 + 1) as usize;
    let ticks = assemble(
        start_ms,
        1000,
        count,
        &node_series,
        &container_series,
        &[],
        Shard::ALL,
    );
    let seconds = end - start;
    let mut out = Vec::new();
    for source in [PowerSource::Meter, PowerSource::Predicted] {
        let mut used = 0usize;
        let mut node_sum = 0.0;
        let mut idle_sum = 0.0;
        let mut per: BTreeMap<String, ContainerEnergy> = BTreeMap::new();
        let mut exporter_sum = 0.0;
        let mut exporter_ticks = 0usize;
        for (timestamp_ms, usage) in ticks.iter().flat_map(|t| {
            t.nodes
                .iter()
                .filter(|u| u.node == node)
                .map(|u| (t.timestamp_ms, u))
        }) {
            // A profile made from per-CPU figures predicts and attributes as this node's instance.
            let Ok(model) = model.for_node_cpus(usage.cpus) else {
                continue;
            };
            let watts = match source {
                PowerSource::Meter => usage.meter_watts,
                PowerSource::Predicted => model.predict(&usage.features).ok(),
            };
            let Some(watts) = watts.filter(|w| w.is_finite() && *w >= 0.0) else {
                continue;
            };
            used += 1;
            node_sum += watts;
            let idle = model.idle_power_watts.min(watts).max(0.0);
            idle_sum += idle;
            if let Some(share) = exporter_share.get(&timestamp_ms) {
                exporter_sum += (watts - idle) * share;
                exporter_ticks += 1;
            }
            for s in attribute(&model, watts, usage, IdleSplit::Processes) {
                let e = per.entry(s.container_id.to_string()).or_default();
                e.pod_uid = s.pod_uid.to_string();
                e.idle_joules += s.idle_watts;
                e.dynamic_joules += s.dynamic_watts;
            }
        }
        if used == 0 {
            continue;
        }
        // Mean power over the ticks × window length.
        let scale = seconds / used as f64;
        for e in per.values_mut() {
            e.idle_joules *= scale;
            e.dynamic_joules *= scale;
        }
        out.push(SourceEnergy {
            source,
            ticks: used,
            seconds,
            node_joules: node_sum * scale,
            node_idle_joules: idle_sum * scale,
            containers: per,
            exporter_joules: (exporter_ticks > 0)
                .then(|| exporter_sum * seconds / exporter_ticks as f64),
        });
    }
    Ok(out)
}

/// The exporter's CPU rate and the node's busy CPU rate, cores (the recording rule
/// `greenpipe:exporter_power_watts` of deploy/prometheus uses the same ratio).
fn overhead_queries(node: &str) -> (String, String) {
    use greenpipe_common::contract::cpu_mode;
    use greenpipe_common::names::{exporter, node as n};
    let node = node_matcher(&[node]);
    (
        format!("sum(rate({}{{{node}}}[5s]))", exporter::CPU_SECONDS_TOTAL),
        format!(
            "sum(rate({}{{{node},{}}}[5s]))",
            n::CPU_SECONDS_TOTAL,
            cpu_mode::busy_matcher()
        ),
    )
}

/// The exporter's share of busy CPU at each timestamp where both rates exist and the node was
/// busy (clamped to 1: the two counters are read at slightly different instants).
fn cpu_share(
    exporter: &[greenpipe_query::promql::RangeSeries<'_>],
    busy: &[greenpipe_query::promql::RangeSeries<'_>],
) -> BTreeMap<i64, f64> {
    let busy: BTreeMap<i64, f64> = busy.iter().flat_map(|s| s.points.iter().copied()).collect();
    exporter
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter_map(|(t, cores)| {
            let total = *busy.get(&t)?;
            (total > 0.0 && cores.is_finite() && cores >= 0.0)
                .then(|| (t, (cores / total).min(1.0)))
        })
        .collect()
}
