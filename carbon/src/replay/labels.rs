//! The controller's labelling, hour by hour: [`crate::planner::plan`] on the nodes' current
//! labels, taints and dwell clocks, its changes applied the way [`crate::patch::json_patch`]
//! applies them to a Node (the dwell clock restarts when the label value changes and is removed
//! with the label). A test runs both side by side on a fixture.

use crate::planner::{self, Class, NodeState, Plan, Policy};
use std::collections::BTreeMap;

/// The nodes as the controller sees them.
#[derive(Debug, Clone)]
pub struct Labeller {
    /// Planner view of each node, in fleet order.
    pub nodes: Vec<NodeState>,
    /// When each node's taint was added (the NoExecute eviction clock).
    pub tainted_since: Vec<Option<i64>>,
    policy: Policy,
    index: BTreeMap<String, usize>,
}

impl Labeller {
    /// Unlabelled, untainted nodes: (name, zone).
    pub fn new<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a str)>, policy: Policy) -> Self {
        let nodes: Vec<NodeState> = nodes
            .into_iter()
            .map(|(name, zone)| NodeState {
                name: name.to_string(),
                zone: Some(zone.to_string()),
                class: None,
                tainted: false,
                since: None,
            })
            .collect();
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        Labeller {
            tainted_since: vec![None; nodes.len()],
            nodes,
            policy,
            index,
        }
    }

    /// One controller round at `now`: plans on `forecasts` (zone → forecast at the horizon) and
    /// applies the plan.
    pub fn step(&mut self, forecasts: &BTreeMap<String, Option<f64>>, now: i64) -> Plan {
        let plan = planner::plan(&self.nodes, forecasts, &self.policy, now);
        for c in &plan.changes {
            let i = self.index[&c.node];
            let n = &mut self.nodes[i];
            if c.to.class != n.class {
                n.since = c.to.class.map(|_| now);
            }
            n.class = c.to.class;
            if c.to.tainted && !n.tainted {
                self.tainted_since[i] = Some(now);
            }
            if !c.to.tainted {
                self.tainted_since[i] = None;
            }
            n.tainted = c.to.tainted;
        }
        plan
    }

    /// Label of node `i`.
    pub fn class(&self, i: usize) -> Option<Class> {
        self.nodes[i].class
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{json_patch, node_state, TOPOLOGY_ZONE_LABEL};
    use crate::replay::forecasts::{self, Forecast};
    use crate::replay::grid::{Grid, Zone};
    use k8s_openapi::api::core::v1::Node;

    /// The live controller's round on Node objects: read each node's state, plan, build the JSON
    /// patch of every change and apply it to the Node.
    fn live_round(
        nodes: &mut [Node],
        forecasts: &BTreeMap<String, Option<f64>>,
        policy: &Policy,
        now: i64,
    ) {
        let zone_of = |_: &str, topo: Option<&str>| topo.map(String::from);
        let states: Vec<NodeState> = nodes.iter().map(|n| node_state(n, zone_of)).collect();
        let plan = planner::plan(&states, forecasts, policy, now);
        for c in &plan.changes {
            let node = nodes
                .iter_mut()
                .find(|n| n.metadata.name.as_deref() == Some(&c.node))
                .unwrap();
            let patch = json_patch(node, c, now, now).unwrap();
            let mut value = serde_json::to_value(&*node).unwrap();
            json_patch::patch(&mut value, &patch).unwrap();
            *node = serde_json::from_value(value).unwrap();
        }
    }

    /// On the 2022 EIA fixture series (three zones, two nodes each, a month of hours with the
    /// regression's forecasts), the replay's labeller and the live controller's
    /// plan → patch → Node cycle agree on every node's label, taint and dwell clock every hour.
    #[test]
    fn replay_and_live_controller_label_every_hour_alike() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/eia-dcrl-2022");
        let zones: Vec<Zone> = ["CISO", "ERCO", "NYIS"]
            .iter()
            .map(|z| {
                let s = crate::sources::csv::read(std::path::Path::new(&format!("{dir}/{z}.csv")))
                    .unwrap();
                let mut hourly = s.hourly();
                hourly.values.truncate(24 * 45);
                Zone {
                    name: z.to_string(),
                    hourly,
                }
            })
            .collect();
        let grid = Grid::new(zones).unwrap();
        let fc: Vec<Vec<Option<f64>>> = (0..grid.zones.len())
            .map(|z| forecasts::series(&grid, z, Forecast::Regression, 1))
            .collect();
        let policy = Policy {
            hysteresis: 15.0,
            min_dwell: 2 * 3600,
            ..Policy::default()
        };
        let pairs: Vec<(String, String)> = grid
            .zones
            .iter()
            .flat_map(|z| {
                (1..=2).map(move |k| (format!("{}-{k}", z.name.to_lowercase()), z.name.clone()))
            })
            .collect();
        let mut replay = Labeller::new(
            pairs.iter().map(|(n, z)| (n.as_str(), z.as_str())),
            policy.clone(),
        );
        let mut live: Vec<Node> = pairs
            .iter()
            .enumerate()
            .map(|(i, (name, zone))| {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "resourceVersion": i.to_string(),
                                 "labels": {TOPOLOGY_ZONE_LABEL: zone}},
                    "spec": {}
                }))
                .unwrap()
            })
            .collect();
        let (mut changes, mut red_hours) = (0, 0);
        for h in 24 * 14..grid.hours {
            let now = grid.time(h);
            let forecasts: BTreeMap<String, Option<f64>> = grid
                .zones
                .iter()
                .zip(&fc)
                .map(|(z, f)| (z.name.clone(), f[h]))
                .collect();
            changes += replay.step(&forecasts, now).changes.len();
            live_round(&mut live, &forecasts, &policy, now);
            for (i, node) in live.iter().enumerate() {
                let want = node_state(node, |_, t| t.map(String::from));
                assert_eq!(replay.nodes[i], want, "hour {h}");
                red_hours += usize::from(want.tainted);
            }
        }
        // The fixture exercises relabelling, not one standing plan.
        assert!(changes > 50, "{changes}");
        assert!(red_hours > 100, "{red_hours}");
    }
}
