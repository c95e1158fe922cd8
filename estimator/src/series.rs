//! The series of estimated ticks as remote write carries them. One tick gives one sample per
//! series; several consecutive ticks (`serve --read.ticks-per-query N`) give one series per label
//! set with a sample per tick it was estimated at, so the labels, most of the bytes, are encoded
//! and compressed once per N samples instead of once per sample.

use std::slice;
use std::sync::Arc;

use bytes::Bytes;
use greenpipe_common::names::{component, estimate, label};

use crate::attribution::Share;
use crate::energy::{NodeEnergy, TickEnergy};
use crate::estimate::{NodeEstimate, TickEstimates};
use crate::remote_write::{BatchWriter, Label, LabelTail, Sample, TimeSeries};

type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The shard's marker series for `ticks_ms`: each tick's own time (seconds) as its value,
/// written after the tick's other series, so the last one found is where the shard resumes.
pub fn marker_series(shard: &str, ticks_ms: impl Iterator<Item = i64>) -> TimeSeries {
    let mut ts = TimeSeries::new(estimate::TICK_TIMESTAMP_SECONDS, &[(label::SHARD, shard)]);
    ts.samples.extend(ticks_ms.map(|t_ms| Sample {
        value: t_ms as f64 / 1000.0,
        timestamp: t_ms,
    }));
    ts
}

/// The series of one tick: per node its power and idle power (and error against its meter), per
/// container and `system` its idle and dynamic shares, and the energy counters of each of those
/// (`energy`, from [`crate::energy::Ledger::record`] for the same estimates); one sample each, at
/// the tick's time. The serve loop writes the same series with [`write_ticks`]; this builds them
/// (tests, tools).
pub fn tick_series(estimates: &TickEstimates<'_>, energy: &TickEnergy) -> Vec<TimeSeries> {
    ticks_series(slice::from_ref(estimates), slice::from_ref(energy))
}

/// The series of consecutive ticks (oldest first, `energy[i]` recorded for `estimates[i]`): every
/// label set once, with its samples in tick order.
pub fn ticks_series(estimates: &[TickEstimates<'_>], energy: &[TickEnergy]) -> Vec<TimeSeries> {
    let mut list = SeriesList {
        tail: Vec::new(),
        out: Vec::new(),
    };
    lay_out(estimates, energy, &mut list);
    list.out
}

/// [`tick_series`] written straight into request bodies.
pub fn write_tick(estimates: &TickEstimates<'_>, energy: &TickEnergy, writer: &mut BatchWriter) {
    write_ticks(slice::from_ref(estimates), slice::from_ref(energy), writer);
}

/// [`ticks_series`] written straight into request bodies: the same series, the same bytes, without
/// building a `TimeSeries` per series, and the labels a container's series share encoded once.
pub fn write_ticks(
    estimates: &[TickEstimates<'_>],
    energy: &[TickEnergy],
    writer: &mut BatchWriter,
) {
    lay_out(
        estimates,
        energy,
        &mut Writing {
            tail: LabelTail::default(),
            writer,
        },
    );
}

/// Where [`lay_out`] puts the series.
trait Layout {
    /// Labels ending every series that follows until the next call, in name order (after those of
    /// the series' heads).
    fn tail(&mut self, labels: &[(&[u8], &[u8])]);
    /// A series: `head` labels in name order, then the current tail; `samples` oldest first.
    fn series(&mut self, head: &[(&[u8], &[u8])], samples: &[Sample]);
}

/// The series built one by one (the reference for [`Writing`]).
struct SeriesList {
    tail: Vec<Label>,
    out: Vec<TimeSeries>,
}

fn owned_labels<'l>(labels: &'l [(&'l [u8], &'l [u8])]) -> impl Iterator<Item = Label> + 'l {
    labels.iter().map(|(n, v)| Label {
        name: Bytes::copy_from_slice(n),
        value: Bytes::copy_from_slice(v),
    })
}

impl Layout for SeriesList {
    fn tail(&mut self, labels: &[(&[u8], &[u8])]) {
        self.tail = owned_labels(labels).collect();
    }

    fn series(&mut self, head: &[(&[u8], &[u8])], samples: &[Sample]) {
        let labels = owned_labels(head).chain(self.tail.iter().cloned());
        let mut ts = TimeSeries::from_labels(labels.collect());
        ts.samples = samples.to_vec();
        self.out.push(ts);
    }
}

/// The series written straight into request bodies.
struct Writing<'w> {
    tail: LabelTail,
    writer: &'w mut BatchWriter,
}

impl Layout for Writing<'_> {
    fn tail(&mut self, labels: &[(&[u8], &[u8])]) {
        self.tail.set(labels);
    }

    fn series(&mut self, head: &[(&[u8], &[u8])], samples: &[Sample]) {
        self.writer.series_ending_with(head, &self.tail, samples);
    }
}

/// One node's estimates under one model, across the ticks: a label set of node series.
struct NodeSeries<'e, 'm> {
    node: &'e str,
    model: String,
    /// (tick time, estimate, counters), oldest first.
    at: Vec<(i64, &'e NodeEstimate<'m>, &'e NodeEnergy)>,
}

/// The nodes of all ticks, each (node, model) once, in the order they first appear.
fn node_series<'e, 'm>(
    estimates: &'e [TickEstimates<'m>],
    energy: &'e [TickEnergy],
) -> Vec<NodeSeries<'e, 'm>> {
    assert_eq!(estimates.len(), energy.len(), "energy recorded per tick");
    let mut out: Vec<NodeSeries> = Vec::new();
    let mut index: FastMap<(&str, String), usize> = FastMap::default();
    for (tick, joules) in estimates.iter().zip(energy) {
        assert_eq!(
            tick.nodes.len(),
            joules.nodes.len(),
            "energy recorded for these estimates"
        );
        for (e, j) in tick.nodes.iter().zip(&joules.nodes) {
            // The label carries the version, so a recalibrated model starts new series.
            let model = e.model.label();
            let point = (tick.timestamp_ms, e, j);
            if estimates.len() == 1 {
                out.push(NodeSeries {
                    node: &e.node,
                    model,
                    at: vec![point],
                });
                continue;
            }
            let slot = *index
                .entry((e.node.as_str(), model.clone()))
                .or_insert_with(|| {
                    out.push(NodeSeries {
                        node: &e.node,
                        model,
                        at: Vec::new(),
                    });
                    out.len() - 1
                });
            out[slot].at.push(point);
        }
    }
    out
}

/// A container's (or `system`'s) share at one tick: tick time, share, `[idle, dynamic]` joules.
type SharePoint<'e> = (i64, &'e Share, &'e [f64; 2]);

fn same_container(a: &Share, b: &Share) -> bool {
    // The ticks of one read share their ids: comparing pointers is the common case.
    (Arc::ptr_eq(&a.container_id, &b.container_id) || a.container_id == b.container_id)
        && (Arc::ptr_eq(&a.pod_uid, &b.pod_uid) || a.pod_uid == b.pod_uid)
}

/// Puts every series of the ticks into `out`.
fn lay_out(estimates: &[TickEstimates<'_>], energy: &[TickEnergy], out: &mut impl Layout) {
    let b = |s: &'static str| s.as_bytes();
    let (name, l_model, l_node) = (b("__name__"), b(label::MODEL), b(label::NODE));
    let (node_power, node_idle, node_error, node_error_ratio, node_energy) = (
        b(estimate::NODE_POWER_WATTS),
        b(estimate::NODE_IDLE_POWER_WATTS),
        b(estimate::NODE_POWER_ERROR_WATTS),
        b(estimate::NODE_POWER_ABS_ERROR_RATIO),
        b(estimate::NODE_ENERGY_JOULES_TOTAL),
    );
    let (gpu_power, gpu_energy) = (
        b(estimate::NODE_GPU_POWER_WATTS),
        b(estimate::NODE_GPU_ENERGY_JOULES_TOTAL),
    );
    let mut samples: Vec<Sample> = Vec::with_capacity(estimates.len());
    for n in node_series(estimates, energy) {
        let (node, model) = (n.node.as_bytes(), n.model.as_bytes());
        // Labels in name order: __name__, component, container_id, model, node, pod_uid.
        let node_labels =
            |metric: &'static [u8]| [(name, metric), (l_model, model), (l_node, node)];
        let mut series =
            |out: &mut dyn Layout,
             metric: &'static [u8],
             value: &dyn Fn(&NodeEstimate<'_>, &NodeEnergy) -> Option<f64>| {
                samples.clear();
                samples.extend(n.at.iter().filter_map(|&(t, e, j)| {
                    value(e, j).map(|value| Sample {
                        value,
                        timestamp: t,
                    })
                }));
                if !samples.is_empty() {
                    out.series(&node_labels(metric), &samples);
                }
            };
        out.tail(&[]);
        series(out, node_power, &|e, _| Some(e.watts));
        series(out, node_idle, &|e, _| Some(e.idle_watts));
        series(out, node_error, &|e, _| {
            e.meter_watts.map(|m| e.predicted_watts - m)
        });
        // A meter reading 0 W is unplugged or idle-blind: no relative error from it.
        series(out, node_error_ratio, &|e, _| {
            e.meter_watts
                .filter(|&m| m > 0.0)
                .map(|m| (e.predicted_watts - m).abs() / m)
        });
        series(out, node_energy, &|_, j| Some(j.joules));
        // Nodes without a GPU meter write no GPU series (no sample, not a zero).
        series(out, gpu_power, &|e, _| e.gpu_watts);
        series(out, gpu_energy, &|_, j| j.gpu_joules);

        let first = n.at[0].1;
        let same_everywhere = n.at[1..].iter().all(|(_, e, _)| {
            e.shares.len() == first.shares.len()
                && e.shares
                    .iter()
                    .zip(&first.shares)
                    .all(|(a, b)| same_container(a, b))
        });
        if same_everywhere {
            let mut points: Vec<SharePoint> = Vec::with_capacity(n.at.len());
            for k in 0..first.shares.len() {
                points.clear();
                points.extend(
                    n.at.iter()
                        .map(|&(t, e, j)| (t, &e.shares[k], &j.shares[k])),
                );
                container_series(out, &mut samples, model, node, &points);
            }
        } else {
            // Containers came or went within these ticks: group each one's shares by identity,
            // in the order they first appear.
            let mut index: FastMap<(&str, &str), usize> = FastMap::default();
            let mut grouped: Vec<Vec<SharePoint>> = Vec::new();
            for &(t, e, j) in &n.at {
                for (s, joules) in e.shares.iter().zip(&j.shares) {
                    let slot = *index
                        .entry((&s.container_id, &s.pod_uid))
                        .or_insert_with(|| {
                            grouped.push(Vec::new());
                            grouped.len() - 1
                        });
                    grouped[slot].push((t, s, joules));
                }
            }
            for points in &grouped {
                container_series(out, &mut samples, model, node, points);
            }
        }
    }
}

/// The four series of a container (or `system`) on a node: power and energy of its idle and
/// dynamic parts, one sample per point.
fn container_series(
    out: &mut dyn Layout,
    samples: &mut Vec<Sample>,
    model: &[u8],
    node: &[u8],
    points: &[SharePoint<'_>],
) {
    let Some(&(_, first, _)) = points.first() else {
        return;
    };
    let b = |s: &'static str| s.as_bytes();
    // The four series differ only in __name__ and component: the rest is the tail.
    out.tail(&[
        (b(label::CONTAINER_ID), first.container_id.as_bytes()),
        (b(label::MODEL), model),
        (b(label::NODE), node),
        (b(label::POD_UID), first.pod_uid.as_bytes()),
    ]);
    let parts = [(component::IDLE, 0), (component::DYNAMIC, 1)];
    for (part, k) in parts {
        let metrics = [
            (estimate::CONTAINER_POWER_WATTS, true),
            (estimate::CONTAINER_ENERGY_JOULES_TOTAL, false),
        ];
        for (metric, power) in metrics {
            samples.clear();
            samples.extend(points.iter().map(|&(t, s, joules)| Sample {
                value: match (power, k) {
                    (true, 0) => s.idle_watts,
                    (true, _) => s.dynamic_watts,
                    (false, _) => joules[k],
                },
                timestamp: t,
            }));
            out.series(
                &[(b("__name__"), b(metric)), (b(label::COMPONENT), b(part))],
                samples,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::Ledger;
    use crate::estimate::{estimate_tick, Policy};
    use crate::readout::{ContainerUsage, NodeUsage, Tick};
    use crate::remote_write::{batches, decode, encode, BatchLimits, EncodedBatch};
    use greenpipe_common::features::{Feature, FeatureValues};
    use greenpipe_common::model::ModelFile;
    use std::collections::BTreeMap;

    fn usage(node: &str, containers: &[&str], cpu: f64, meter: Option<f64>) -> NodeUsage {
        let mut features = FeatureValues::default();
        features.set(Feature::CpuSecondsPerSecond, Some(cpu));
        NodeUsage {
            node: node.to_string(),
            labels: BTreeMap::new(),
            features,
            meter_watts: meter,
            gpu_watts: None,
            cpus: Some(4.0),
            containers: containers
                .iter()
                .map(|id| {
                    let mut f = FeatureValues::default();
                    f.set(Feature::CpuSecondsPerSecond, Some(cpu / 4.0));
                    ContainerUsage {
                        container_id: Arc::from(*id),
                        pod_uid: Arc::from(format!("pod-{id}").as_str()),
                        features: f,
                        processes: Some(2.0),
                    }
                })
                .collect(),
        }
    }

    /// Every label set and its samples, from per-tick series (the one-tick layout).
    fn by_labels(
        series: impl IntoIterator<Item = TimeSeries>,
    ) -> BTreeMap<Vec<Label>, Vec<Sample>> {
        let mut all: BTreeMap<Vec<Label>, Vec<Sample>> = BTreeMap::new();
        for ts in series {
            all.entry(ts.labels).or_default().extend(ts.samples);
        }
        all
    }

    #[test]
    fn several_ticks_carry_each_label_set_once_with_every_sample_of_one_tick_at_a_time() {
        let models = ModelFile::from_json(include_str!("../models/default.json")).unwrap();
        // Container b leaves after tick 1, c arrives at tick 2, node n2 is skipped at tick 1
        // (no features), n1's meter reads at ticks 0 (0 W: no ratio) and 2 only.
        let mut skipped = usage("n2", &[], 1.0, None);
        skipped.features = FeatureValues::default();
        let ticks = [
            Tick {
                timestamp_ms: 1_000,
                nodes: vec![
                    usage("n1", &["a", "b"], 1.0, Some(0.0)),
                    usage("n2", &["x"], 2.0, None),
                ],
            },
            Tick {
                timestamp_ms: 2_000,
                nodes: vec![usage("n1", &["a", "b"], 1.5, None), skipped],
            },
            Tick {
                timestamp_ms: 3_000,
                nodes: vec![
                    usage("n1", &["a", "c"], 0.5, Some(6.0)),
                    usage("n2", &["x"], 2.0, None),
                ],
            },
        ];
        let mut ledger = Ledger::new(3_600_000);
        let estimates: Vec<_> = ticks
            .iter()
            .map(|t| estimate_tick(&models, t, Policy::default()))
            .collect();
        assert_eq!(
            estimates[1].skipped.len(),
            1,
            "n2 skipped at the second tick"
        );
        let energy: Vec<_> = estimates.iter().map(|e| ledger.record(e, 1000)).collect();

        let together = ticks_series(&estimates, &energy);
        let one_by_one = by_labels(
            estimates
                .iter()
                .zip(&energy)
                .flat_map(|(e, j)| tick_series(e, j)),
        );
        assert_eq!(
            together.len(),
            one_by_one.len(),
            "each label set exactly once"
        );
        assert_eq!(by_labels(together.clone()), one_by_one);
        for ts in &together {
            assert!(
                ts.samples.is_sorted_by_key(|s| s.timestamp),
                "samples oldest first: {ts:?}"
            );
        }
        let with = |metric: &str, container: &str| {
            together
                .iter()
                .filter(|ts| {
                    ts.labels.iter().any(|l| l.value == metric.as_bytes())
                        && (container.is_empty()
                            || ts.labels.iter().any(|l| l.value == container.as_bytes()))
                })
                .map(|ts| ts.samples.iter().map(|s| s.timestamp).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            with(estimate::CONTAINER_POWER_WATTS, "b"),
            vec![vec![1_000, 2_000]; 2]
        );
        assert_eq!(
            with(estimate::CONTAINER_POWER_WATTS, "c"),
            vec![vec![3_000]; 2]
        );
        assert_eq!(
            with(estimate::NODE_POWER_ERROR_WATTS, ""),
            vec![vec![1_000, 3_000]]
        );
        assert_eq!(
            with(estimate::NODE_POWER_ABS_ERROR_RATIO, ""),
            vec![vec![3_000]]
        );
        let n2_power: Vec<_> = together
            .iter()
            .filter(|ts| {
                ts.labels.iter().any(|l| l.value == "n2")
                    && ts
                        .labels
                        .iter()
                        .any(|l| l.value == estimate::NODE_POWER_WATTS)
            })
            .collect();
        assert_eq!(n2_power.len(), 1);
        assert_eq!(
            n2_power[0]
                .samples
                .iter()
                .map(|s| s.timestamp)
                .collect::<Vec<_>>(),
            [1_000, 3_000]
        );

        // Written straight into bodies: the same bytes as the series built, batched and encoded,
        // under limits tight enough to cut series into pieces across requests.
        let limits = BatchLimits {
            max_samples: 7,
            max_bytes: 600,
        };
        let mut writer = BatchWriter::compressing(limits);
        write_ticks(&estimates, &energy, &mut writer);
        let bodies = writer.finish();
        let reference: Vec<EncodedBatch> = batches(together.clone(), limits)
            .into_iter()
            .map(|b| EncodedBatch {
                samples: b.iter().map(|s| s.samples.len()).sum(),
                body: encode(b),
            })
            .collect();
        assert!(bodies.len() > 3, "cut into several requests");
        assert_eq!(bodies, reference);
        let decoded = bodies
            .iter()
            .flat_map(|b| decode(&b.body).unwrap().timeseries);
        assert_eq!(by_labels(decoded), one_by_one);
    }

    /// Every series the estimator writes is a declared family, with only declared label keys
    /// and enumerated values in their sets: the check the exporter's debug builds run on each
    /// of its own series.
    fn assert_in_contract(series: &[TimeSeries]) {
        use greenpipe_common::contract;
        for ts in series {
            let name = ts.label("__name__").expect("every series has a name");
            let family = contract::family(name).unwrap_or_else(|| panic!("{name} is not declared"));
            let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            let owned: Vec<(String, String)> = ts
                .labels
                .iter()
                .filter(|l| l.name != b"__name__"[..])
                .map(|l| (text(&l.name), text(&l.value)))
                .collect();
            let labels: Vec<(&str, &str)> = owned
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(contract::check_series(family, &labels), None, "{ts:?}");
        }
    }

    #[test]
    fn written_series_are_declared_in_the_contract() {
        let models = ModelFile::from_json(include_str!("../models/default.json")).unwrap();
        let tick = Tick {
            timestamp_ms: 5_000,
            nodes: vec![
                usage("n1", &["a", "b"], 1.0, Some(4.0)),
                usage("n2", &["c"], 2.0, None),
            ],
        };
        let estimates = estimate_tick(&models, &tick, Policy::default());
        let energy = Ledger::new(3_600_000).record(&estimates, 1000);
        let series = tick_series(&estimates, &energy);
        let names: std::collections::BTreeSet<_> = series
            .iter()
            .filter_map(|ts| ts.label("__name__"))
            .collect();
        // Every family of a tick but the shard's marker, with a meter.
        assert_eq!(names.len(), 7, "{names:?}");
        assert_in_contract(&series);
        assert_in_contract(&[marker_series("0/2", [5_000].into_iter())]);
    }

    #[test]
    fn one_tick_is_laid_out_as_before() {
        let models = ModelFile::from_json(include_str!("../models/default.json")).unwrap();
        let tick = Tick {
            timestamp_ms: 5_000,
            nodes: vec![usage("n1", &["a", "b"], 1.0, Some(4.0))],
        };
        let estimates = estimate_tick(&models, &tick, Policy::default());
        let energy = Ledger::new(3_600_000).record(&estimates, 1000);
        let series = tick_series(&estimates, &energy);
        // power, idle, error, ratio, energy; then 4 per container and system.
        assert_eq!(series.len(), 5 + 4 * 3);
        assert!(series.iter().all(|ts| ts.samples.len() == 1));
        let names: Vec<_> = series[..5]
            .iter()
            .map(|ts| String::from_utf8_lossy(&ts.labels[0].value).into_owned())
            .collect();
        assert_eq!(
            names,
            [
                estimate::NODE_POWER_WATTS,
                estimate::NODE_IDLE_POWER_WATTS,
                estimate::NODE_POWER_ERROR_WATTS,
                estimate::NODE_POWER_ABS_ERROR_RATIO,
                estimate::NODE_ENERGY_JOULES_TOTAL,
            ]
        );
    }
}
