//! The PromQL answer decoder and the resume-point check under arbitrary input: nothing panics, a
//! generated answer decodes to exactly its series, and a value that is not a number, or a body cut
//! anywhere, refuses the whole answer instead of yielding a zero or a shorter series.

use greenpipe_estimator::promql::decode_matrix;
use greenpipe_estimator::serve::resume_tick;
use proptest::prelude::*;

type Series = (Vec<(String, String)>, Vec<(i64, f64)>);

fn value_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v:?}")
    }
}

fn answer(series: &[Series]) -> String {
    answer_with(series, None)
}

/// The answer, with the first point's value text replaced by `poison` when given.
fn answer_with(series: &[Series], poison: Option<&str>) -> String {
    let mut poison = poison;
    let result: Vec<serde_json::Value> = series
        .iter()
        .map(|(labels, points)| {
            let metric: serde_json::Map<String, serde_json::Value> = labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            let values: Vec<serde_json::Value> = points
                .iter()
                .map(|(t, v)| {
                    let text = poison
                        .take()
                        .map(str::to_string)
                        .unwrap_or_else(|| value_text(*v));
                    serde_json::json!([*t as f64 / 1000.0, text])
                })
                .collect();
            serde_json::json!({"metric": metric, "values": values})
        })
        .collect();
    serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": result}})
        .to_string()
}

fn series() -> impl Strategy<Value = Series> {
    let labels = proptest::collection::btree_map("[a-z_]{1,8}", ".{0,16}", 0..4)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>());
    let value = prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -1e9f64..1e9
    ];
    let points = proptest::collection::vec((1_600_000_000_000i64..1_900_000_000_000, value), 0..8);
    (labels, points)
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bodies_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), text in "[\\[\\]{}\",:0-9a-zA-Z. +-]{0,120}") {
        let _ = decode_matrix(&bytes);
        let _ = decode_matrix(text.as_bytes());
        let wrapped = format!("{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{text}]}}}}");
        let _ = decode_matrix(wrapped.as_bytes());
    }

    #[test]
    fn generated_answers_decode_exactly(input in proptest::collection::vec(series(), 0..5)) {
        let body = answer(&input);
        let got = decode_matrix(body.as_bytes()).unwrap();
        prop_assert_eq!(got.len(), input.len());
        for (g, (labels, points)) in got.iter().zip(&input) {
            for (k, v) in labels {
                prop_assert_eq!(g.label(k), v.as_str());
            }
            prop_assert_eq!(g.points.len(), points.len());
            for ((gt, gv), (t, v)) in g.points.iter().zip(points) {
                prop_assert_eq!(gt, t);
                prop_assert!(same(*gv, *v), "{} vs {}", gv, v);
            }
        }
    }

    #[test]
    fn a_bad_value_or_a_cut_body_refuses_the_answer(input in proptest::collection::vec(series(), 1..4), bad in prop_oneof![Just(""), Just("1,5"), Just("one"), Just("0x10"), Just("1e")], cut in any::<prop::sample::Index>()) {
        let body = answer(&input);
        if input.iter().any(|(_, points)| !points.is_empty()) {
            let poisoned = answer_with(&input, Some(bad));
            prop_assert!(decode_matrix(poisoned.as_bytes()).is_err(), "{}", poisoned);
        }
        let at = cut.index(body.len());
        prop_assert!(decode_matrix(&body.as_bytes()[..at]).is_err());
    }

    #[test]
    fn a_resume_point_is_inside_the_window_or_refused(v in prop_oneof![any::<f64>(), 1.6e9f64..1.9e9], step in 1i64..60_000, window in 0i64..86_400_000) {
        let now = 1_700_000_000_000i64;
        if let Ok(Some(t)) = resume_tick(v, step, now, window) {
            prop_assert!(t >= now - window - 2 * step && t <= now + step, "{} from {}", t, v);
            prop_assert_eq!(t.rem_euclid(step), 0);
        }
    }
}
