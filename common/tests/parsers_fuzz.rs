//! The model file and the trace CSV under arbitrary and mutated input: nothing panics, a trace
//! written by `write_trace` reads back to the same rows, and a cell that is not a number refuses
//! the file naming line and column (never a silent zero).

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::model::ModelFile;
use greenpipe_common::trace::{parse_trace, write_trace, TraceError, TraceRow};
use proptest::prelude::*;

fn bundled_model() -> String {
    std::fs::read_to_string(format!(
        "{}/../estimator/models/default.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn row() -> impl Strategy<Value = TraceRow> {
    let value = prop_oneof![Just(None), (-1e12f64..1e12).prop_map(Some)];
    (
        "[a-z][a-z0-9-]{0,8}",
        "[a-z][a-z0-9_]{0,8}",
        value.clone(),
        proptest::collection::vec(value, Feature::ALL.len()),
    )
        .prop_map(|(node, workload, power_watts, values)| {
            let mut features = FeatureValues::default();
            for (f, v) in Feature::ALL.into_iter().zip(values) {
                features.set(f, v);
            }
            TraceRow {
                timestamp: 0.0,
                node,
                workload,
                power_watts,
                features,
            }
        })
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => (a - b).abs() <= 1e-7 * a.abs().max(b.abs()).max(1e-300),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn model_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), at in any::<prop::sample::Index>(), junk in "[-0-9.e\"{}\\[\\],:a-z]{0,8}") {
        let _ = ModelFile::from_json(&String::from_utf8_lossy(&bytes));
        let text = bundled_model();
        let i = at.index(text.len());
        if text.is_char_boundary(i) {
            let mutated = format!("{}{junk}{}", &text[..i], &text[i..]);
            if let Ok(m) = ModelFile::from_json(&mutated) {
                // Whatever was accepted passed the checks: predictions are finite or errors.
                let x = FeatureValues::default();
                for model in &m.models {
                    if let Ok(w) = model.predict(&x) {
                        prop_assert!(w.is_finite());
                    }
                }
            }
        }
    }

    #[test]
    fn traces_round_trip(mut rows in proptest::collection::vec(row(), 3..12)) {
        for (k, r) in rows.iter_mut().enumerate() {
            r.timestamp = 1_700_000_000.0 + k as f64;
        }
        let text = write_trace(&rows).unwrap();
        let back = parse_trace("t.csv", &text).unwrap();
        prop_assert_eq!(back.len(), rows.len());
        for (a, b) in back.iter().zip(&rows) {
            prop_assert_eq!(&a.node, &b.node);
            prop_assert!(close(a.power_watts, b.power_watts));
            for f in Feature::ALL {
                prop_assert!(close(a.features.get(f), b.features.get(f)), "{:?}", f);
            }
        }
    }

    #[test]
    fn a_bad_cell_refuses_the_trace(mut rows in proptest::collection::vec(row(), 3..6), line in any::<prop::sample::Index>(), column in 4usize..13, bad in prop_oneof![Just("x"), Just("NaN"), Just("inf"), Just("1,5"), Just("--1")]) {
        for (k, r) in rows.iter_mut().enumerate() {
            r.timestamp = 1_700_000_000.0 + k as f64;
        }
        let text = write_trace(&rows).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let l = 1 + line.index(lines.len() - 1);
        let mut cells: Vec<String> = lines[l].split(',').map(str::to_string).collect();
        let column = column.min(cells.len() - 1);
        cells[column] = bad.to_string();
        lines[l] = cells.join(",");
        let err = parse_trace("t.csv", &(lines.join("\n") + "\n"));
        prop_assert!(
            matches!(err, Err(TraceError::NotNumeric { line, .. } | TraceError::CellCount { line, .. }) if line == l + 1),
            "{:?}", err
        );
    }

    #[test]
    fn arbitrary_traces_never_panic(text in "([0-9a-z.,_-]{0,60}\n){0,8}") {
        let header = greenpipe_common::features::trace_header();
        let _ = parse_trace("t.csv", &text);
        let _ = parse_trace("t.csv", &format!("{header}\n{text}"));
    }
}
