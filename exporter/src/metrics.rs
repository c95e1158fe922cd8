//! An in-memory sample: metric families built by the collectors during one tick.
//!
//! Collectors push values with their own labels; the `node` label is added once at encoding.
//! Encoding uses the `prometheus` crate's text encoder so escaping and the exposition format are
//! the reference implementation's, not ours.

use std::collections::BTreeMap;

use greenpipe_common::contract::{self, Type};
use greenpipe_common::names::label;
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

/// One series: label pairs (without `node`) and a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Label pairs in the order given by the collector.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

/// One metric family: its declaration in `common::contract` and its series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Name, type, help and label keys.
    pub declared: &'static contract::Family,
    /// Series of the family.
    pub series: Vec<Series>,
}

/// All families of one sample, keyed by metric name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetricSet {
    families: BTreeMap<&'static str, Family>,
}

impl MetricSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one series to a declared family, creating the family on first use. Its type, help
    /// and label keys are the declaration's, so an emitter cannot pass a type of its own. Debug
    /// builds (and so every test) refuse a series that does not match the declaration: a family
    /// declared differently (another help text or type), an undeclared label key, an enumerated
    /// label value outside its set.
    pub fn push(
        &mut self,
        family: &'static contract::Family,
        labels: &[(&'static str, &str)],
        value: f64,
    ) {
        #[cfg(debug_assertions)]
        if let Some(why) = contract::check_series(family, labels) {
            panic!("metric contract: {why}");
        }
        let entry = self.families.entry(family.name).or_insert_with(|| Family {
            declared: family,
            series: Vec::new(),
        });
        entry.series.push(Series {
            labels: labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect(),
            value,
        });
    }

    /// Moves every family of `other` into `self` (used to merge per-collector sets).
    pub fn merge(&mut self, other: MetricSet) {
        for (name, fam) in other.families {
            match self.families.get_mut(name) {
                Some(existing) => {
                    // One declaration per name, so both sides carry the same help and type.
                    debug_assert_eq!(existing.declared, fam.declared, "{name}");
                    existing.series.extend(fam.series)
                }
                None => {
                    self.families.insert(name, fam);
                }
            }
        }
    }

    /// A family by name (tests and the estimator's fixtures read values back).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.get(name)
    }

    /// Iterates over all families by name.
    pub fn families(&self) -> impl Iterator<Item = (&'static str, &Family)> {
        self.families.iter().map(|(k, v)| (*k, v))
    }

    /// Consumes the set, yielding every family by name (the push encoder moves its labels).
    pub fn into_families(self) -> impl Iterator<Item = (&'static str, Family)> {
        self.families.into_iter()
    }

    /// Number of series in the set.
    pub fn len(&self) -> usize {
        self.families.values().map(|f| f.series.len()).sum()
    }

    /// True when no series was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Encodes the set in the Prometheus text format, adding `node="<node>"` to every series.
    pub fn encode_text(&self, node: &str) -> Vec<u8> {
        let families: Vec<MetricFamily> = self
            .families
            .iter()
            .map(|(name, fam)| to_proto(name, fam, node))
            .collect();
        let mut buf = Vec::with_capacity(64 * self.len() + 1024);
        TextEncoder::new()
            .encode(&families, &mut buf)
            .expect("encoding into a Vec cannot fail for well-formed families");
        buf
    }
}

fn to_proto(name: &str, fam: &Family, node: &str) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(name.to_string());
    mf.set_help(fam.declared.help.to_string());
    mf.set_field_type(match fam.declared.kind {
        Type::Counter => MetricType::COUNTER,
        Type::Gauge | Type::Histogram => MetricType::GAUGE,
    });
    let metrics = fam
        .series
        .iter()
        .map(|s| {
            let mut m = Metric::default();
            let mut labels = Vec::with_capacity(s.labels.len() + 1);
            labels.push(pair(label::NODE, node));
            labels.extend(s.labels.iter().map(|(k, v)| pair(k, v)));
            m.set_label(labels);
            match fam.declared.kind {
                Type::Counter => {
                    let mut c = Counter::default();
                    c.set_value(s.value);
                    m.set_counter(c);
                }
                Type::Gauge | Type::Histogram => {
                    let mut g = Gauge::default();
                    g.set_value(s.value);
                    m.set_gauge(g);
                }
            }
            m
        })
        .collect();
    mf.set_metric(metrics);
    mf
}

fn pair(name: &str, value: &str) -> LabelPair {
    let mut p = LabelPair::default();
    p.set_name(name.to_string());
    p.set_value(value.to_string());
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::contract::{exporter, node};

    #[test]
    fn encodes_node_label_help_type_and_escapes() {
        let mut set = MetricSet::new();
        set.push(
            &node::DISK_BYTES_TOTAL,
            &[(label::DEVICE, "a\"b"), (label::DIRECTION, "read")],
            3.0,
        );
        set.push(&node::CPUS, &[], 1.5);
        let text = String::from_utf8(set.encode_text("pi-1")).unwrap();
        assert!(
            text.contains("# TYPE greenpipe_node_disk_bytes_total counter"),
            "{text}"
        );
        assert!(
            text.contains(&format!("# HELP greenpipe_node_cpus {}", node::CPUS.help)),
            "{text}"
        );
        assert!(
            text.contains(
                "greenpipe_node_disk_bytes_total{node=\"pi-1\",device=\"a\\\"b\",direction=\"read\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains("greenpipe_node_cpus{node=\"pi-1\"} 1.5"),
            "{text}"
        );
    }

    #[test]
    fn merge_appends_series_of_same_family() {
        let mut a = MetricSet::new();
        a.push(
            &exporter::COLLECTOR_SUCCESS,
            &[(label::COLLECTOR, "1")],
            1.0,
        );
        let mut b = MetricSet::new();
        b.push(
            &exporter::COLLECTOR_SUCCESS,
            &[(label::COLLECTOR, "2")],
            2.0,
        );
        b.push(&node::CPUS, &[], 3.0);
        a.merge(b);
        assert_eq!(
            a.family(exporter::COLLECTOR_SUCCESS.name)
                .unwrap()
                .series
                .len(),
            2
        );
        assert_eq!(a.len(), 3);
    }

    /// The contract is enforced where series are made: a family declared otherwise than the
    /// table says, an undeclared label or an enumerated value outside its set is refused (debug
    /// builds, which tests are).
    #[test]
    #[cfg(debug_assertions)]
    fn a_series_against_the_contract_is_refused() {
        let refused =
            |f: fn(&mut MetricSet)| std::panic::catch_unwind(|| f(&mut MetricSet::new())).is_err();
        static CPUS_AS_COUNTER: contract::Family = contract::Family {
            kind: Type::Counter,
            ..node::CPUS
        };
        assert!(refused(|s| s.push(&CPUS_AS_COUNTER, &[], 1.0)));
        assert!(refused(|s| s.push(
            &node::CPUS,
            &[(label::MODE, "user")],
            1.0
        )));
        assert!(refused(|s| s.push(
            &node::DISK_BYTES_TOTAL,
            &[(label::DEVICE, "sda"), (label::DIRECTION, "sideways")],
            1.0
        )));
        assert!(!refused(|s| s.push(&node::CPUS, &[], 1.0)));
    }
}
