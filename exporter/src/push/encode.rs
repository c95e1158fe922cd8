//! Collection ticks → remote-write request bodies. Each series gets the labels a scrape would
//! have given it (`node` as on `/metrics`, plus `job` and `instance`, which Prometheus adds to
//! scraped series), and each sample the time its tick was taken, not the time it is sent.

use std::collections::BTreeMap;

use greenpipe_common::names::label;
use greenpipe_remote_write::{BatchLimits, BatchWriter, EncodedBatch, Sample};

use crate::metrics::MetricSet;

/// A series as the sampler made it: metric name, labels without node, job and instance.
type SeriesKey = (&'static str, Vec<(&'static str, String)>);

/// Ticks gathered for one push: every series' samples, oldest first.
#[derive(Debug, Default)]
pub struct Pending {
    series: BTreeMap<SeriesKey, Vec<Sample>>,
    ticks: u32,
    oldest_ms: Option<i64>,
    newest_ms: i64,
}

/// One request body with what the buffer records of it.
#[derive(Debug)]
pub struct Body {
    /// Raw snappy `WriteRequest`.
    pub body: Vec<u8>,
    /// Samples in it.
    pub samples: u64,
    /// Oldest tick of the push it belongs to.
    pub oldest_ms: i64,
    /// Newest tick of the push it belongs to.
    pub newest_ms: i64,
}

impl Pending {
    /// Adds one tick taken at `at_ms`.
    pub fn add(&mut self, at_ms: i64, set: MetricSet) {
        for (name, family) in set.into_families() {
            for s in family.series {
                self.series
                    .entry((name, s.labels))
                    .or_default()
                    .push(Sample {
                        value: s.value,
                        timestamp: at_ms,
                    });
            }
        }
        self.ticks += 1;
        self.oldest_ms.get_or_insert(at_ms);
        self.newest_ms = at_ms;
    }

    /// Ticks gathered.
    pub fn ticks(&self) -> u32 {
        self.ticks
    }

    /// Samples gathered.
    pub fn samples(&self) -> u64 {
        self.series.values().map(|s| s.len() as u64).sum()
    }

    /// The request bodies of everything gathered (empty when nothing was), leaving `self`
    /// empty. A series whose samples do not fit one request continues, in time order, in the
    /// next.
    pub fn take_bodies(&mut self, node: &str, job: &str, instance: &str) -> Vec<Body> {
        let Some(oldest_ms) = self.oldest_ms.take() else {
            return Vec::new();
        };
        let newest_ms = self.newest_ms;
        self.ticks = 0;
        let mut writer = BatchWriter::compressing(BatchLimits::default());
        for ((name, own), samples) in std::mem::take(&mut self.series) {
            let mut labels: Vec<(&[u8], &[u8])> = Vec::with_capacity(own.len() + 4);
            labels.push((b"__name__", name.as_bytes()));
            labels.push((label::NODE.as_bytes(), node.as_bytes()));
            labels.push((b"job", job.as_bytes()));
            labels.push((b"instance", instance.as_bytes()));
            labels.extend(own.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
            writer.series(&labels, &samples);
        }
        writer
            .finish()
            .into_iter()
            .map(|EncodedBatch { body, samples }| Body {
                body,
                samples: samples as u64,
                oldest_ms,
                newest_ms,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::contract::exporter;

    #[test]
    fn series_carry_scrape_labels_and_tick_times() {
        let mut pending = Pending::default();
        for (k, at) in [(1.0, 1_000), (2.0, 2_000)] {
            let mut set = MetricSet::new();
            set.push(&exporter::COLLECTIONS_TOTAL, &[], k);
            set.push(
                &exporter::COLLECTOR_SUCCESS,
                &[(label::COLLECTOR, "cpu")],
                1.0,
            );
            pending.add(at, set);
        }
        assert_eq!((pending.ticks(), pending.samples()), (2, 4));
        let bodies = pending.take_bodies("pi-1", "greenpipe-exporter", "pi-1:9910");
        assert_eq!(bodies.len(), 1);
        assert_eq!(
            (bodies[0].samples, bodies[0].oldest_ms, bodies[0].newest_ms),
            (4, 1_000, 2_000)
        );
        let request = greenpipe_remote_write::decode(&bodies[0].body).unwrap();
        let cycles = request
            .timeseries
            .iter()
            .find(|s| s.label("__name__") == Some(exporter::COLLECTIONS_TOTAL.name))
            .unwrap();
        assert_eq!(cycles.label("node"), Some("pi-1"));
        assert_eq!(cycles.label("job"), Some("greenpipe-exporter"));
        assert_eq!(cycles.label("instance"), Some("pi-1:9910"));
        let samples: Vec<(i64, f64)> = cycles
            .samples
            .iter()
            .map(|s| (s.timestamp, s.value))
            .collect();
        assert_eq!(samples, [(1_000, 1.0), (2_000, 2.0)]);
        assert!(pending.take_bodies("n", "j", "i").is_empty(), "emptied");
    }
}
