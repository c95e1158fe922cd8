//! Energy counters (`greenpipe_node_energy_joules_total`, `greenpipe_container_energy_joules_total`):
//! every tick adds power x tick length to a running total per series, so the counter's increase
//! between two ticks is exactly the integral of the written power over the ticks in between, and
//! `increase(...[1d])` is a day's energy without users integrating gauges across gaps.
//!
//! A tick's power stands for the interval that ends at the tick. Totals live in memory; after a
//! restart they are restored from the last values written at or before the resume point (the
//! same place the tick marker is found), so a counter never goes back and never restarts from
//! zero while its series is within `--backfill.max-age`. Series unseen for longer than that are
//! forgotten, in memory as after a restart, and start again from zero (a counter reset, which
//! `increase()` handles) when they come back.

use std::collections::HashMap;
use std::sync::Arc;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use greenpipe_common::names::{component, label};

use crate::attribution::Share;
use crate::estimate::TickEstimates;
use crate::promql::RangeSeries;
use crate::shard::Shard;

/// Totals of one (node, model) pair.
#[derive(Debug, Clone)]
struct NodeAccount {
    model: String,
    last_ms: i64,
    joules: f64,
    /// The node's GPUs' joules, from the first tick with a GPU reading (or a restored value).
    gpu_joules: Option<f64>,
    // In the order of the last tick's shares, then any it did not have: a tick with the same
    // containers walks them in step, comparing ids (pointers when the account was opened in the
    // same read) instead of hashing a 64-character id per container into a map.
    containers: Vec<ContainerAccount>,
}

#[derive(Debug, Clone)]
struct ContainerAccount {
    container_id: Arc<str>,
    pod_uid: Arc<str>,
    last_ms: i64,
    /// `[idle, dynamic]` joules.
    joules: [f64; 2],
}

/// The counters' values at one tick, in the order of [`TickEstimates::nodes`] and their shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickEnergy {
    /// One entry per node estimate.
    pub nodes: Vec<NodeEnergy>,
}

/// A node's counters at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeEnergy {
    /// Node energy, joules.
    pub joules: f64,
    /// The node's GPUs' energy, joules, at a tick with a GPU reading.
    pub gpu_joules: Option<f64>,
    /// `[idle, dynamic]` joules of every share, in share order.
    pub shares: Vec<[f64; 2]>,
}

/// Every running total of this replica.
#[derive(Debug, Clone)]
pub struct Ledger {
    nodes: FastMap<String, Vec<NodeAccount>>,
    forget_after_ms: i64,
    last_sweep_ms: i64,
}

fn component_index(name: &str) -> Option<usize> {
    match name {
        component::IDLE => Some(0),
        component::DYNAMIC => Some(1),
        _ => None,
    }
}

impl NodeAccount {
    fn new(model: &str) -> NodeAccount {
        NodeAccount {
            model: model.to_string(),
            last_ms: i64::MIN,
            joules: 0.0,
            gpu_joules: None,
            containers: Vec::new(),
        }
    }

    /// The account of a container, by name (restoring: once per series at start).
    fn container(&mut self, id: &str, pod_uid: &str) -> &mut ContainerAccount {
        let at = match self
            .containers
            .iter()
            .position(|c| &*c.container_id == id && &*c.pod_uid == pod_uid)
        {
            Some(i) => i,
            None => {
                self.containers
                    .push(ContainerAccount::new(Arc::from(id), Arc::from(pod_uid)));
                self.containers.len() - 1
            }
        };
        &mut self.containers[at]
    }

    /// Puts the accounts of `shares` first, in their order; containers not seen before start at
    /// zero. Nothing moves when the containers are those of the last tick.
    fn align(&mut self, shares: &[Share]) {
        let in_step = self.containers.len() >= shares.len()
            && self.containers.iter().zip(shares).all(|(c, s)| c.is(s));
        if in_step {
            return;
        }
        let mut old: FastMap<(Arc<str>, Arc<str>), ContainerAccount> = self
            .containers
            .drain(..)
            .map(|c| ((c.container_id.clone(), c.pod_uid.clone()), c))
            .collect();
        let mut aligned: Vec<ContainerAccount> = shares
            .iter()
            .map(|s| {
                let key = (s.container_id.clone(), s.pod_uid.clone());
                old.remove(&key)
                    .unwrap_or_else(|| ContainerAccount::new(key.0, key.1))
            })
            .collect();
        aligned.extend(old.into_values());
        self.containers = aligned;
    }
}

impl ContainerAccount {
    fn new(container_id: Arc<str>, pod_uid: Arc<str>) -> ContainerAccount {
        ContainerAccount {
            container_id,
            pod_uid,
            last_ms: i64::MIN,
            joules: [0.0; 2],
        }
    }

    /// Whether this is the account of `share`'s container.
    fn is(&self, share: &Share) -> bool {
        (Arc::ptr_eq(&self.container_id, &share.container_id)
            || self.container_id == share.container_id)
            && (Arc::ptr_eq(&self.pod_uid, &share.pod_uid) || self.pod_uid == share.pod_uid)
    }
}

impl Ledger {
    /// An empty ledger forgetting series unseen for `forget_after_ms`.
    pub fn new(forget_after_ms: i64) -> Ledger {
        Ledger {
            nodes: FastMap::default(),
            forget_after_ms,
            last_sweep_ms: i64::MIN,
        }
    }

    fn account(&mut self, node: &str, model: &str) -> &mut NodeAccount {
        if !self.nodes.contains_key(node) {
            self.nodes.insert(node.to_string(), Vec::with_capacity(1));
        }
        let accounts = self.nodes.get_mut(node).expect("inserted above");
        let at = match accounts.iter().position(|a| a.model == model) {
            Some(i) => i,
            None => {
                accounts.push(NodeAccount::new(model));
                accounts.len() - 1
            }
        };
        &mut accounts[at]
    }

    /// Adds one tick's estimates (each standing for the `step_ms` that end at the tick) and
    /// returns the totals to write with them.
    pub fn record(&mut self, estimates: &TickEstimates<'_>, step_ms: i64) -> TickEnergy {
        let t = estimates.timestamp_ms;
        let seconds = step_ms as f64 / 1000.0;
        let mut out = TickEnergy {
            nodes: Vec::with_capacity(estimates.nodes.len()),
        };
        for e in &estimates.nodes {
            // The versioned label the series carry: a recalibrated model starts new counters.
            let account = self.account(&e.node, &e.model.label());
            account.last_ms = t;
            account.joules += e.watts.max(0.0) * seconds;
            let gpu_joules = e.gpu_watts.map(|w| {
                let total = account.gpu_joules.get_or_insert(0.0);
                *total += w * seconds;
                *total
            });
            account.align(&e.shares);
            let shares = e
                .shares
                .iter()
                .zip(&mut account.containers)
                .map(|(s, c)| {
                    c.last_ms = t;
                    c.joules[0] += s.idle_watts.max(0.0) * seconds;
                    c.joules[1] += s.dynamic_watts.max(0.0) * seconds;
                    c.joules
                })
                .collect();
            out.nodes.push(NodeEnergy {
                joules: account.joules,
                gpu_joules,
                shares,
            });
        }
        // A sweep touches every account: often enough to bound memory, rarely enough to cost
        // nothing per tick.
        if t.saturating_sub(self.last_sweep_ms) >= self.forget_after_ms / 8 {
            self.forget_before(t - self.forget_after_ms);
            self.last_sweep_ms = t;
        }
        out
    }

    fn forget_before(&mut self, oldest_ms: i64) {
        self.nodes.retain(|_, accounts| {
            accounts.retain_mut(|a| {
                a.containers.retain(|c| c.last_ms >= oldest_ms);
                a.last_ms >= oldest_ms
            });
            !accounts.is_empty()
        });
    }

    /// Restores totals from the counters' last written values (instant-query answers of
    /// `last_over_time(...)` at `at_ms`), keeping only this shard's nodes. Returns how many
    /// series were restored.
    pub fn restore(
        &mut self,
        node_series: &[RangeSeries<'_>],
        container_series: &[RangeSeries<'_>],
        at_ms: i64,
        shard: Shard,
    ) -> usize {
        let mut restored = 0;
        let last_value = |s: &RangeSeries<'_>| {
            s.points
                .last()
                .map(|p| p.1)
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        for s in node_series {
            let node = s.label(label::NODE);
            let Some(v) = last_value(s).filter(|_| shard.owns(node)) else {
                continue;
            };
            let account = self.account(node, s.label(label::MODEL));
            account.joules = v;
            account.last_ms = at_ms;
            restored += 1;
        }
        for s in container_series {
            let node = s.label(label::NODE);
            let (Some(v), Some(part)) = (
                last_value(s).filter(|_| shard.owns(node)),
                component_index(s.label(label::COMPONENT)),
            ) else {
                continue;
            };
            let account = self.account(node, s.label(label::MODEL));
            // A node account restored only through its containers is not reported as seen.
            if account.last_ms == i64::MIN {
                account.last_ms = at_ms;
            }
            let c = account.container(s.label(label::CONTAINER_ID), s.label(label::POD_UID));
            c.joules[part] = v;
            c.last_ms = at_ms;
            restored += 1;
        }
        self.last_sweep_ms = at_ms;
        restored
    }

    /// Restores the GPU energy totals (`greenpipe_node_gpu_energy_joules_total`) as
    /// [`Ledger::restore`] does the node totals. Returns how many series were restored.
    pub fn restore_gpu(
        &mut self,
        gpu_series: &[RangeSeries<'_>],
        at_ms: i64,
        shard: Shard,
    ) -> usize {
        let mut restored = 0;
        for s in gpu_series {
            let node = s.label(label::NODE);
            let last = s.points.last().map(|p| p.1);
            let Some(v) = last.filter(|v| v.is_finite() && *v >= 0.0 && shard.owns(node)) else {
                continue;
            };
            let account = self.account(node, s.label(label::MODEL));
            if account.last_ms == i64::MIN {
                account.last_ms = at_ms;
            }
            account.gpu_joules = Some(v);
            restored += 1;
        }
        restored
    }

    /// Number of series held (nodes and container components).
    pub fn len(&self) -> usize {
        self.nodes
            .values()
            .flatten()
            .map(|a| 1 + 2 * a.containers.len())
            .sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::Share;
    use crate::estimate::NodeEstimate;
    use greenpipe_common::model::ModelFile;
    use std::borrow::Cow;

    fn estimates<'m>(models: &'m ModelFile, t: i64, watts: f64) -> TickEstimates<'m> {
        TickEstimates {
            timestamp_ms: t,
            nodes: vec![NodeEstimate {
                node: "n".into(),
                model: &models.models[0],
                watts,
                predicted_watts: watts,
                measured: false,
                idle_watts: 1.0,
                meter_watts: None,
                gpu_watts: None,
                shares: vec![Share {
                    container_id: "c".into(),
                    pod_uid: "p".into(),
                    idle_watts: 1.0,
                    dynamic_watts: watts - 1.0,
                }],
            }],
            skipped: vec![],
        }
    }

    fn models() -> ModelFile {
        ModelFile::from_json(include_str!("../models/default.json")).unwrap()
    }

    #[test]
    fn totals_are_the_integral_of_power_per_tick() {
        let models = models();
        let mut ledger = Ledger::new(3_600_000);
        let a = ledger.record(&estimates(&models, 15_000, 4.0), 15_000);
        assert_eq!(a.nodes[0].joules, 60.0);
        assert_eq!(a.nodes[0].shares[0], [15.0, 45.0]);
        let b = ledger.record(&estimates(&models, 30_000, 2.0), 15_000);
        assert_eq!(b.nodes[0].joules, 90.0);
        assert_eq!(b.nodes[0].shares[0], [30.0, 60.0]);
        assert_eq!(ledger.len(), 3);
    }

    #[test]
    fn restored_totals_continue_and_other_shards_are_ignored() {
        let models = models();
        let name = models.models[0].name.clone();
        let shard = Shard { index: 0, count: 2 };
        let pick = |owned: bool| {
            (0..)
                .map(|i| format!("node-{i}"))
                .find(|n| shard.owns(n) == owned)
                .unwrap()
        };
        let (mine, theirs) = (pick(true), pick(false));
        let series = |labels: Vec<(&'static str, &str)>, v: f64| RangeSeries {
            labels: labels
                .into_iter()
                .map(|(k, v)| (Cow::Borrowed(k), Cow::Owned(v.to_string())))
                .collect(),
            points: [(1000, v)].into(),
        };
        let node = vec![
            series(vec![("node", &mine), ("model", &name)], 100.0),
            series(vec![("node", &theirs), ("model", &name)], 7.0),
        ];
        let container = vec![
            series(
                vec![
                    ("node", &mine),
                    ("model", &name),
                    ("container_id", "c"),
                    ("pod_uid", "p"),
                    ("component", "dynamic"),
                ],
                40.0,
            ),
            series(vec![("node", &mine), ("component", "bogus")], 1.0),
        ];
        let mut ledger = Ledger::new(3_600_000);
        assert_eq!(ledger.restore(&node, &container, 1000, shard), 2);
        let mut tick = estimates(&models, 2000, 3.0);
        tick.nodes[0].node = mine;
        let e = ledger.record(&tick, 1000);
        assert_eq!(e.nodes[0].joules, 103.0);
        assert_eq!(e.nodes[0].shares[0], [1.0, 42.0]);
    }

    #[test]
    fn containers_keep_their_totals_when_others_come_go_or_move() {
        let models = models();
        let tick = |t: i64, ids: &[&str]| {
            let mut e = estimates(&models, t, 3.0);
            e.nodes[0].shares = ids
                .iter()
                .map(|id| Share {
                    container_id: (*id).into(),
                    pod_uid: "p".into(),
                    idle_watts: 1.0,
                    dynamic_watts: 2.0,
                })
                .collect();
            e
        };
        let mut ledger = Ledger::new(3_600_000);
        let shares = |ledger: &mut Ledger, t, ids: &[&str]| {
            ledger.record(&tick(t, ids), 1000).nodes[0].shares.clone()
        };
        assert_eq!(shares(&mut ledger, 1000, &["a", "b"]), [[1.0, 2.0]; 2]);
        assert_eq!(
            shares(&mut ledger, 2000, &["b", "c", "a"]),
            [[2.0, 4.0], [1.0, 2.0], [2.0, 4.0]]
        );
        assert_eq!(shares(&mut ledger, 3000, &["a"]), [[3.0, 6.0]]);
        assert_eq!(
            shares(&mut ledger, 4000, &["c", "b"]),
            [[2.0, 4.0], [3.0, 6.0]]
        );
        // The same pod UID under another id, and the same id in another pod, are other series.
        let mut moved = tick(5000, &["c"]);
        moved.nodes[0].shares[0].pod_uid = "q".into();
        assert_eq!(ledger.record(&moved, 1000).nodes[0].shares, [[1.0, 2.0]]);
        assert_eq!(ledger.len(), 1 + 2 * 4);
    }

    #[test]
    fn series_unseen_past_the_horizon_are_forgotten() {
        let models = models();
        let mut ledger = Ledger::new(10_000);
        ledger.record(&estimates(&models, 1000, 3.0), 1000);
        let mut other = estimates(&models, 20_000, 3.0);
        other.nodes[0].node = "m".into();
        ledger.record(&other, 1000);
        assert_eq!(ledger.len(), 3, "n was forgotten, m is held");
        let again = ledger.record(&estimates(&models, 21_000, 3.0), 1000);
        assert_eq!(again.nodes[0].joules, 3.0, "n starts again from zero");
    }

    /// A node's GPU energy adds up its GPU power like the node's, only from ticks with a GPU
    /// reading, and resumes from its restored value.
    #[test]
    fn gpu_energy_accumulates_from_gpu_ticks_and_resumes() {
        let models = models();
        let with_gpu = |t, gpu| {
            let mut e = estimates(&models, t, 5.0);
            e.nodes[0].gpu_watts = gpu;
            e
        };
        let mut ledger = Ledger::new(3_600_000);
        assert_eq!(
            ledger.record(&with_gpu(1000, None), 1000).nodes[0].gpu_joules,
            None
        );
        assert_eq!(
            ledger.record(&with_gpu(2000, Some(10.0)), 1000).nodes[0].gpu_joules,
            Some(10.0)
        );
        // A tick without a reading writes no GPU sample and keeps the total.
        assert_eq!(
            ledger.record(&with_gpu(3000, None), 1000).nodes[0].gpu_joules,
            None
        );
        assert_eq!(
            ledger.record(&with_gpu(4000, Some(20.0)), 2000).nodes[0].gpu_joules,
            Some(50.0)
        );
        let mut resumed = Ledger::new(3_600_000);
        let labels = [
            ("model", models.models[0].label()),
            ("node", "n".to_string()),
        ];
        let labels: Vec<(Cow<'_, str>, Cow<'_, str>)> = labels
            .iter()
            .map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(v.as_str())))
            .collect();
        let restored = RangeSeries {
            labels,
            points: vec![(4000, 50.0)].into(),
        };
        assert_eq!(resumed.restore_gpu(&[restored], 4000, Shard::ALL), 1);
        assert_eq!(
            resumed.record(&with_gpu(5000, Some(4.0)), 1000).nodes[0].gpu_joules,
            Some(54.0)
        );
    }
}
