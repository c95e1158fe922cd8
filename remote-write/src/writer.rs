//! Request bodies written series by series, straight from the caller's data: no `TimeSeries`
//! (two allocations and a reference-counted copy per label per series) is built first. At
//! 400,000 series per tick, building the series, batching them and encoding them cost more than
//! everything else the estimator does; this writes the same bytes in one pass.
//!
//! The output is exactly [`crate::batches`] followed by [`crate::wire::encode_request`] of the
//! same series (a test compares them): same request boundaries, same protobuf bytes.

use crate::wire::{field_len, label_body_len, put_label, put_sample, put_varint, sample_len};
use crate::{BatchLimits, Sample, TimeSeries};

/// One request body and the samples it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    /// `WriteRequest` protobuf bytes ([`BatchWriter::new`]), or their raw snappy
    /// ([`BatchWriter::compressing`]: ready to send).
    pub body: Vec<u8>,
    /// Samples in it.
    pub samples: usize,
}

/// Labels that end several series, encoded once (see [`BatchWriter::series_ending_with`]): the
/// four series of a container (power and energy of its idle and dynamic parts) share their
/// container id, model, node and pod UID, most of their bytes.
#[derive(Debug, Clone, Default)]
pub struct LabelTail {
    // The protobuf `Label` fields, as `BatchWriter::series` would write them.
    bytes: Vec<u8>,
    // Name of the first label: the labels written before the tail must sort below it.
    first: Option<Vec<u8>>,
}

impl LabelTail {
    /// Encodes `labels` (name, value), replacing what the tail held. As in
    /// [`BatchWriter::series`], labels with an empty value are left out and the rest sorted.
    pub fn set(&mut self, labels: &[(&[u8], &[u8])]) {
        let kept = |l: &&(&[u8], &[u8])| !l.1.is_empty();
        if labels.iter().filter(kept).is_sorted_by(|a, b| a.0 <= b.0) {
            self.encode(labels.iter().filter(kept));
        } else {
            let mut own: Vec<(&[u8], &[u8])> = labels.iter().filter(kept).copied().collect();
            own.sort_by(|a, b| a.0.cmp(b.0));
            self.encode(own.iter());
        }
    }

    fn encode<'l>(&mut self, labels: impl Iterator<Item = &'l (&'l [u8], &'l [u8])>) {
        self.bytes.clear();
        let mut first = true;
        for (name, value) in labels {
            if first {
                // Reuses the buffer: a tail is set once per container per tick.
                let buffer = self.first.get_or_insert_with(Vec::new);
                buffer.clear();
                buffer.extend_from_slice(name);
                first = false;
            }
            put_label(&mut self.bytes, name, value);
        }
        if first {
            self.first = None;
        }
    }
}

/// Lays out series into request bodies within [`BatchLimits`].
pub struct BatchWriter {
    // Compress each body as soon as it is full, while it is still in cache, and reuse its
    // buffer: a tick's protobuf (100 MB at fleet scale) is never all in memory.
    snappy: Option<(snap::raw::Encoder, Vec<u8>)>,
    max_samples: usize,
    max_bytes: usize,
    done: Vec<EncodedBatch>,
    current: Vec<u8>,
    samples: usize,
    // The byte budget as `batches` counts it (series length + 4 per series), not the exact size.
    bytes: usize,
}

impl BatchWriter {
    /// An empty writer of protobuf bodies.
    pub fn new(limits: BatchLimits) -> BatchWriter {
        BatchWriter {
            snappy: None,
            max_samples: limits.max_samples.max(1),
            max_bytes: limits.max_bytes,
            done: Vec::new(),
            current: Vec::new(),
            samples: 0,
            bytes: 0,
        }
    }

    /// An empty writer of raw-snappy bodies (what remote write sends).
    pub fn compressing(limits: BatchLimits) -> BatchWriter {
        BatchWriter {
            snappy: Some((snap::raw::Encoder::new(), Vec::new())),
            ..BatchWriter::new(limits)
        }
    }

    /// Appends a series with `labels` as (name, value), `__name__` included. Labels with an empty
    /// value are left out and the rest sorted by name, as [`TimeSeries::from_labels`] does; the
    /// caller that passes them sorted pays nothing for it. A series without samples is not
    /// written; one with more than fit in a request is cut into consecutive pieces, oldest first.
    pub fn series(&mut self, labels: &[(&[u8], &[u8])], samples: &[Sample]) {
        let kept = |l: &&(&[u8], &[u8])| !l.1.is_empty();
        let sorted = labels.iter().filter(kept).is_sorted_by(|a, b| a.0 <= b.0);
        if sorted && labels.iter().all(|l| !l.1.is_empty()) {
            self.write(labels, &[], samples);
        } else {
            let mut own: Vec<(&[u8], &[u8])> = labels.iter().filter(kept).copied().collect();
            if !sorted {
                own.sort_by(|a, b| a.0.cmp(b.0));
            }
            self.write(&own, &[], samples);
        }
    }

    /// [`BatchWriter::series`] of `head` followed by `tail`'s labels, without encoding the tail
    /// again. Every label of `head` must sort below the tail's first (checked: a caller's bug).
    pub fn series_ending_with(
        &mut self,
        head: &[(&[u8], &[u8])],
        tail: &LabelTail,
        samples: &[Sample],
    ) {
        let kept = |l: &&(&[u8], &[u8])| !l.1.is_empty();
        let mut own: Vec<(&[u8], &[u8])>;
        let mut head = head;
        if !head.iter().all(|l| kept(&l)) || !head.is_sorted_by(|a, b| a.0 <= b.0) {
            own = head.iter().filter(kept).copied().collect();
            own.sort_by(|a, b| a.0.cmp(b.0));
            head = &own;
        }
        if let (Some(last), Some(first)) = (head.last(), &tail.first) {
            assert!(
                last.0 < first.as_slice(),
                "series_ending_with: head label {:?} does not sort below the tail",
                String::from_utf8_lossy(last.0)
            );
        }
        self.write(head, &tail.bytes, samples);
    }

    /// Appends a series built already (its labels are sorted and without empty values).
    pub fn push(&mut self, ts: &TimeSeries) {
        let labels: Vec<(&[u8], &[u8])> = ts
            .labels
            .iter()
            .map(|l| (l.name.as_ref(), l.value.as_ref()))
            .collect();
        self.series(&labels, &ts.samples);
    }

    /// Writes a series: `labels` (sorted, no empty value), then `encoded` labels, then samples.
    fn write(&mut self, labels: &[(&[u8], &[u8])], encoded: &[u8], mut samples: &[Sample]) {
        let labels_len: usize = labels
            .iter()
            .map(|(n, v)| field_len(label_body_len(n, v)))
            .sum::<usize>()
            + encoded.len();
        while !samples.is_empty() {
            let room = self.max_samples - self.samples;
            let (piece, rest) = samples.split_at(samples.len().min(room));
            samples = rest;
            let len = labels_len
                + piece
                    .iter()
                    .map(|s| field_len(sample_len(s)))
                    .sum::<usize>();
            if !self.current.is_empty() && self.bytes + len + 4 > self.max_bytes {
                self.flush();
            }
            self.current.push(0x0a); // field 1 (timeseries), length-delimited
            put_varint(&mut self.current, len as u64);
            for (name, value) in labels {
                put_label(&mut self.current, name, value);
            }
            self.current.extend_from_slice(encoded);
            for s in piece {
                put_sample(&mut self.current, s);
            }
            self.samples += piece.len();
            self.bytes += len + 4;
            if self.samples >= self.max_samples {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        let body = match &mut self.snappy {
            Some((encoder, scratch)) => {
                scratch.resize(snap::raw::max_compress_len(self.current.len()), 0);
                let n = encoder
                    .compress(&self.current, scratch)
                    .expect("snappy accepts any input below 4 GiB");
                self.current.clear();
                scratch[..n].to_vec()
            }
            None => {
                // The next body is about as large as this one.
                let capacity = self.current.len();
                std::mem::replace(&mut self.current, Vec::with_capacity(capacity))
            }
        };
        self.done.push(EncodedBatch {
            body,
            samples: self.samples,
        });
        (self.samples, self.bytes) = (0, 0);
    }

    /// The request bodies, in order.
    pub fn finish(mut self) -> Vec<EncodedBatch> {
        if !self.current.is_empty() {
            self.flush();
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{batches, wire::encode_request};

    fn reference(series: &[TimeSeries], limits: BatchLimits) -> Vec<EncodedBatch> {
        batches(series.to_vec(), limits)
            .iter()
            .map(|b| EncodedBatch {
                body: encode_request(b),
                samples: crate::sample_count(b),
            })
            .collect()
    }

    fn written(series: &[TimeSeries], limits: BatchLimits) -> Vec<EncodedBatch> {
        let mut w = BatchWriter::new(limits);
        for ts in series {
            w.push(ts);
        }
        w.finish()
    }

    #[test]
    fn same_bodies_as_batching_then_encoding() {
        let mut series = Vec::new();
        for i in 0..50i64 {
            let node = format!("node-{i}");
            let long = "x".repeat(i as usize * 7);
            let mut ts = TimeSeries::new("m", &[("node", &node), ("z", &long), ("e", "")]);
            ts.samples = (0..(i % 9))
                .map(|k| Sample {
                    value: if k == 2 { 0.0 } else { k as f64 * 0.5 - 1.0 },
                    timestamp: if k == 3 {
                        0
                    } else {
                        1_790_000_000_000 + k * 1000
                    },
                })
                .collect();
            series.push(ts);
        }
        for (max_samples, max_bytes) in [
            (2000, 1 << 20),
            (4, 1 << 20),
            (1, 1 << 20),
            (7, 300),
            (1000, 1),
        ] {
            let limits = BatchLimits {
                max_samples,
                max_bytes,
            };
            assert_eq!(
                written(&series, limits),
                reference(&series, limits),
                "{limits:?}"
            );
        }
    }

    #[test]
    fn a_shared_tail_writes_the_bytes_of_the_whole_label_set() {
        let limits = BatchLimits {
            max_samples: 5,
            max_bytes: 400,
        };
        let (mut whole, mut split) = (BatchWriter::new(limits), BatchWriter::new(limits));
        let mut tail = LabelTail::default();
        for i in 0..40usize {
            let node = format!("node-{i}");
            let pod = if i % 3 == 0 {
                String::new()
            } else {
                "p".repeat(i)
            };
            // Unsorted, with an empty value now and then: left out and sorted as `series` does.
            let tail_labels: [(&[u8], &[u8]); 3] = [
                (b"pod", pod.as_bytes()),
                (b"node", node.as_bytes()),
                (b"empty", b""),
            ];
            tail.set(&tail_labels);
            for part in ["dynamic", "idle", ""] {
                let head: [(&[u8], &[u8]); 2] =
                    [(b"component", part.as_bytes()), (b"__name__", b"m")];
                let samples: Vec<Sample> = (0..(i % 4) as i64)
                    .map(|k| Sample {
                        value: k as f64,
                        timestamp: 1_790_000_000_000 + k,
                    })
                    .collect();
                let all: Vec<(&[u8], &[u8])> = head.iter().chain(&tail_labels).copied().collect();
                whole.series(&all, &samples);
                split.series_ending_with(&head, &tail, &samples);
            }
        }
        assert_eq!(split.finish(), whole.finish());
        let mut empty = LabelTail::default();
        empty.set(&[(b"x", b"")]);
        let (mut a, mut b) = (BatchWriter::new(limits), BatchWriter::new(limits));
        let one = [Sample {
            value: 1.0,
            timestamp: 1,
        }];
        a.series(&[(b"__name__", b"m")], &one);
        b.series_ending_with(&[(b"__name__", b"m")], &empty, &one);
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    #[should_panic(expected = "does not sort below the tail")]
    fn a_head_sorting_after_the_tail_is_refused() {
        let mut tail = LabelTail::default();
        tail.set(&[(b"a", b"1")]);
        let mut w = BatchWriter::new(BatchLimits::default());
        w.series_ending_with(&[(b"b", b"2")], &tail, &[]);
    }

    #[test]
    fn compressing_writes_the_snappy_of_the_same_bodies() {
        let mut series = Vec::new();
        for i in 0..300i64 {
            let mut ts = TimeSeries::new("m", &[("node", &format!("n{i}"))]);
            ts.samples.push(Sample {
                value: i as f64,
                timestamp: 1_790_000_000_000,
            });
            series.push(ts);
        }
        let limits = BatchLimits {
            max_samples: 100,
            max_bytes: 1 << 20,
        };
        let mut w = BatchWriter::compressing(limits);
        for ts in &series {
            w.push(ts);
        }
        let compressed = w.finish();
        let plain = reference(&series, limits);
        assert_eq!(compressed.len(), 3);
        for (c, p) in compressed.iter().zip(&plain) {
            assert_eq!(c.samples, p.samples);
            assert_eq!(c.body, crate::compress(&p.body));
        }
    }

    #[test]
    fn unsorted_labels_and_empty_values_as_from_labels() {
        let samples = [Sample {
            value: 1.0,
            timestamp: 5,
        }];
        let mut w = BatchWriter::new(BatchLimits::default());
        w.series(
            &[
                (b"__name__", b"m"),
                (b"pod", b""),
                (b"b", b"2"),
                (b"a", b"1"),
            ],
            &samples,
        );
        let mut ts = TimeSeries::new("m", &[("b", "2"), ("a", "1"), ("pod", "")]);
        ts.samples = samples.to_vec();
        assert_eq!(w.finish(), reference(&[ts], BatchLimits::default()));
    }
}
