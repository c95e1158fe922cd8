//! What the single-pass encoder writes decodes with prost (and raw snappy) to exactly the series
//! it was given, for arbitrary label text, NaN payloads, signed zeros and extreme timestamps; and
//! no body, however mangled, panics the decoder.

use greenpipe_remote_write::{decode, encode, wire, Sample, TimeSeries};
use proptest::prelude::*;
use prost::Message;

fn series() -> impl Strategy<Value = TimeSeries> {
    let labels = proptest::collection::vec((".{0,12}", ".{0,40}"), 0..5);
    let samples = proptest::collection::vec((any::<u64>(), any::<i64>()), 0..20);
    (labels, samples).prop_map(|(labels, samples)| {
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut ts = TimeSeries::new("m", &labels);
        ts.samples = samples
            .into_iter()
            .map(|(bits, timestamp)| Sample {
                value: f64::from_bits(bits),
                timestamp,
            })
            .collect();
        ts
    })
}

/// A series as comparable bits: label byte pairs, then (value bits, timestamp) pairs.
type SeriesBits = (Vec<(Vec<u8>, Vec<u8>)>, Vec<(u64, i64)>);

fn bits(series: &[TimeSeries]) -> Vec<SeriesBits> {
    series
        .iter()
        .map(|ts| {
            (
                ts.labels
                    .iter()
                    .map(|l| (l.name.to_vec(), l.value.to_vec()))
                    .collect(),
                ts.samples
                    .iter()
                    .map(|s| (s.value.to_bits(), s.timestamp))
                    .collect(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn encoder_output_decodes_to_the_same_series(input in proptest::collection::vec(series(), 0..6)) {
        let raw = wire::encode_request(&input);
        let decoded = greenpipe_remote_write::WriteRequest::decode(raw.as_slice()).unwrap();
        prop_assert_eq!(bits(&decoded.timeseries), bits(&input));
        let body = encode(input.clone());
        prop_assert_eq!(bits(&decode(&body).unwrap().timeseries), bits(&input));
    }

    #[test]
    fn mangled_bodies_are_errors_not_panics(input in proptest::collection::vec(series(), 1..3), cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>()) {
        let mut body = encode(input);
        let _ = decode(&body[..cut.index(body.len())]);
        let i = flip.0.index(body.len());
        body[i] ^= flip.1 | 1;
        let _ = decode(&body);
    }
}
