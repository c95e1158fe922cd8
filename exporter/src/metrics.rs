//! An in-memory sample: metric families built by the collectors during one tick.
//!
//! Collectors push values with their own labels; the `node` label is added once at encoding.
//! The text is written straight from the set, byte for byte what the `prometheus` crate's
//! `TextEncoder` writes (a unit test holds the two equal, escapes and odd values included):
//! going through its protobuf structs cost two more string copies per label and a third of a
//! collection cycle's instructions (docs/benchmarks.md).

use std::collections::BTreeMap;
use std::io::Write as _;

use greenpipe_common::contract::{self, Type};
use greenpipe_common::names::label;

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
#[derive(Debug, Default, Clone)]
pub struct MetricSet {
    families: BTreeMap<&'static str, Family>,
    /// Series of an earlier sample, kept for their label vectors and strings: [`MetricSet::push`]
    /// overwrites one instead of allocating a vector and a string per label. A sample of ~1,000
    /// series otherwise made ~3,000 allocations per tick, and freeing them again at the end was a
    /// tenth of the tick's instructions (docs/benchmarks.md).
    spare: Vec<Series>,
}

/// Two sets are equal when their series are; spare allocations do not count.
impl PartialEq for MetricSet {
    fn eq(&self, other: &MetricSet) -> bool {
        self.families == other.families
    }
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
        let mut series = self.spare.pop().unwrap_or(Series {
            labels: Vec::new(),
            value: 0.0,
        });
        series.labels.truncate(labels.len());
        for (i, (k, v)) in labels.iter().enumerate() {
            match series.labels.get_mut(i) {
                Some((key, value)) => {
                    *key = k;
                    value.clear();
                    value.push_str(v);
                }
                None => series.labels.push((k, (*v).to_string())),
            }
        }
        series.value = value;
        entry.series.push(series);
    }

    /// A set that takes its series' allocations from `spare` (see [`MetricSet::into_spare`]).
    pub fn with_spare(spare: Vec<Series>) -> MetricSet {
        MetricSet {
            families: BTreeMap::new(),
            spare,
        }
    }

    /// The spare series this set did not use, leaving it none.
    pub fn take_spare(&mut self) -> Vec<Series> {
        std::mem::take(&mut self.spare)
    }

    /// Every series of the set, and its unused spares, for the next sample's
    /// [`MetricSet::with_spare`].
    pub fn into_spare(self) -> Vec<Series> {
        let mut spare = self.spare;
        for (_, family) in self.families {
            spare.extend(family.series);
        }
        spare
    }

    /// Moves every family of `other` into `self` (used to merge per-collector sets); `other`'s
    /// spare series become `self`'s.
    pub fn merge(&mut self, other: MetricSet) {
        self.spare.extend(other.spare);
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
        // Room for every line, so the buffer is not grown and copied while writing (values
        // longer than 24 bytes and escapes still may).
        let room: usize = self
            .families
            .iter()
            .map(|(name, fam)| {
                let labels = |s: &Series| -> usize {
                    s.labels.iter().map(|(k, v)| k.len() + v.len() + 4).sum()
                };
                fam.declared.help.len()
                    + 2 * name.len()
                    + 32
                    + fam
                        .series
                        .iter()
                        .map(|s| name.len() + node.len() + labels(s) + 40)
                        .sum::<usize>()
            })
            .sum();
        let mut buf = Vec::with_capacity(room);
        let mut node_label = Vec::with_capacity(node.len() + 16);
        node_label.extend_from_slice(b"{");
        node_label.extend_from_slice(label::NODE.as_bytes());
        node_label.extend_from_slice(b"=\"");
        escape_into(&mut node_label, node, true);
        node_label.extend_from_slice(b"\"");
        for (name, fam) in &self.families {
            if !fam.declared.help.is_empty() {
                buf.extend_from_slice(b"# HELP ");
                buf.extend_from_slice(name.as_bytes());
                buf.push(b' ');
                escape_into(&mut buf, fam.declared.help, false);
                buf.push(b'\n');
            }
            buf.extend_from_slice(b"# TYPE ");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(match fam.declared.kind {
                Type::Counter => b" counter\n",
                Type::Gauge | Type::Histogram => b" gauge\n",
            });
            for s in &fam.series {
                buf.extend_from_slice(name.as_bytes());
                buf.extend_from_slice(&node_label);
                for (k, v) in &s.labels {
                    buf.push(b',');
                    buf.extend_from_slice(k.as_bytes());
                    buf.extend_from_slice(b"=\"");
                    escape_into(&mut buf, v, true);
                    buf.push(b'"');
                }
                buf.extend_from_slice(b"} ");
                write_value(&mut buf, s.value);
                buf.push(b'\n');
            }
        }
        buf
    }
}

/// Appends `v` as f64's Display writes it (the crate's `value.to_string()`), without a String.
/// Most values of a sample are integers (bytes, counts, processes): those go through `itoa`,
/// which writes the same digits without the float formatting machinery.
fn write_value(buf: &mut Vec<u8>, v: f64) {
    // Below 2^53 every integer is exact; -0.0 prints as "-0".
    if v.fract() == 0.0 && v.abs() < 9e15 && !(v == 0.0 && v.is_sign_negative()) {
        buf.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
    } else {
        write!(buf, "{v}").expect("writing into a Vec cannot fail");
    }
}

/// Appends `v` escaped as the exposition format (and the `prometheus` crate) escapes it:
/// backslash and newline always, the double quote in label values.
fn escape_into(buf: &mut Vec<u8>, v: &str, label_value: bool) {
    let bytes = v.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'"' if label_value => b"\\\"",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[plain..i]);
        buf.extend_from_slice(escaped);
        plain = i + 1;
    }
    buf.extend_from_slice(&bytes[plain..]);
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

    /// The set as the `prometheus` crate's protobuf structs, for its `TextEncoder`.
    fn reference_text(set: &MetricSet, node: &str) -> Vec<u8> {
        use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
        use prometheus::Encoder as _;
        let pair = |name: &str, value: &str| {
            let mut p = LabelPair::default();
            p.set_name(name.to_string());
            p.set_value(value.to_string());
            p
        };
        let families: Vec<MetricFamily> = set
            .families()
            .map(|(name, fam)| {
                let mut mf = MetricFamily::default();
                mf.set_name(name.to_string());
                mf.set_help(fam.declared.help.to_string());
                let counter = fam.declared.kind == Type::Counter;
                mf.set_field_type(if counter {
                    MetricType::COUNTER
                } else {
                    MetricType::GAUGE
                });
                let metrics = fam.series.iter().map(|s| {
                    let mut m = Metric::default();
                    let mut labels = vec![pair(label::NODE, node)];
                    labels.extend(s.labels.iter().map(|(k, v)| pair(k, v)));
                    m.set_label(labels);
                    if counter {
                        let mut c = Counter::default();
                        c.set_value(s.value);
                        m.set_counter(c);
                    } else {
                        let mut g = Gauge::default();
                        g.set_value(s.value);
                        m.set_gauge(g);
                    }
                    m
                });
                mf.set_metric(metrics.collect());
                mf
            })
            .collect();
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&families, &mut buf)
            .unwrap();
        buf
    }

    /// The exposition is the reference encoder's, byte for byte: escapes in label values and
    /// in the node name, values that are integers, tiny, huge, negative, NaN and infinite.
    #[test]
    fn the_text_is_the_prometheus_crates_byte_for_byte() {
        let mut set = MetricSet::new();
        let values = [
            0.0,
            -0.0,
            3.0,
            -42.0,
            4096.0,
            8_999_999_999_999_999.0,
            9_000_000_000_000_000.0,
            1.5,
            -2.25,
            1e-9,
            123456789012345680000.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.1 + 0.2,
        ];
        for (i, v) in values.into_iter().enumerate() {
            let device = ["sda", "a\"b", "back\\slash", "new\nline", "", "ü-ß"][i % 6];
            let direction = if i % 2 == 0 { "read" } else { "write" };
            set.push(
                &node::DISK_BYTES_TOTAL,
                &[(label::DEVICE, device), (label::DIRECTION, direction)],
                v,
            );
            set.push(
                &exporter::COLLECTOR_SUCCESS,
                &[(label::COLLECTOR, device)],
                v,
            );
        }
        set.push(&node::CPUS, &[], 4.0);
        for node in ["pi-1", "odd \"node\"\\\n"] {
            assert_eq!(
                String::from_utf8(set.encode_text(node)).unwrap(),
                String::from_utf8(reference_text(&set, node)).unwrap()
            );
        }
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

    /// Series taken from an earlier sample (longer or shorter label lists, other families)
    /// give the same set, and so the same text, as fresh ones.
    #[test]
    fn a_set_built_on_spare_series_equals_a_fresh_one() {
        let fill = |set: &mut MetricSet, round: u32| {
            for i in 0..5 {
                let device = format!("dev{i}-{round}");
                set.push(
                    &node::DISK_BYTES_TOTAL,
                    &[(label::DEVICE, &device), (label::DIRECTION, "read")],
                    f64::from(i * round),
                );
                set.push(&node::CPUS, &[], f64::from(round));
                set.push(
                    &exporter::COLLECTOR_SUCCESS,
                    &[(label::COLLECTOR, "a-much-longer-collector-name-than-before")],
                    1.0,
                );
            }
        };
        let mut first = MetricSet::new();
        fill(&mut first, 1);
        let mut reused = MetricSet::with_spare(first.into_spare());
        fill(&mut reused, 2);
        let mut fresh = MetricSet::new();
        fill(&mut fresh, 2);
        assert_eq!(reused, fresh);
        assert_eq!(reused.encode_text("n"), fresh.encode_text("n"));
        assert!(
            reused.take_spare().is_empty(),
            "every spare series was used"
        );
    }
}
