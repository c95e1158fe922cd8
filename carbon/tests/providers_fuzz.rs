//! Carbon provider bodies under arbitrary input: no body panics a parser, and a series a parser
//! accepts holds only finite, non-negative intensities (an absurd value is refused, naming the
//! interval). Mutations of the documented fixture bodies reach the deep fields.

use greenpipe_carbon::series::{Kind, Series};
use greenpipe_carbon::sources::watttime::Signal;
use greenpipe_carbon::sources::{csv, electricity_maps, uk, watttime};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn all_parsers(body: &str) -> Vec<Result<Series, greenpipe_carbon::Error>> {
    let mut out = vec![
        electricity_maps::parse_latest("DE", body),
        electricity_maps::parse_history("DE", body),
        electricity_maps::parse_forecast("DE", body),
        uk::parse_regional("GB-13", body),
        watttime::parse("CAISO", Kind::Actual, Signal::Marginal, body),
        watttime::parse("CAISO", Kind::Forecast, Signal::Average, body),
        csv::parse(body),
    ];
    match uk::parse_national("GB", body) {
        Ok((a, f)) => out.extend([Ok(a), Ok(f)]),
        Err(e) => out.push(Err(e)),
    }
    out
}

fn check(results: Vec<Result<Series, greenpipe_carbon::Error>>) -> Result<(), TestCaseError> {
    for series in results.into_iter().flatten() {
        for p in &series.points {
            if let Some(v) = p.value {
                prop_assert!(v.is_finite() && v >= 0.0, "{} accepted", v);
            }
        }
    }
    Ok(())
}

/// A fixture with one number (or digit run) replaced by `replacement`.
fn mutate(body: &str, at: prop::sample::Index, replacement: &str) -> String {
    let digits: Vec<usize> = body
        .match_indices(|c: char| c.is_ascii_digit())
        .map(|(i, _)| i)
        .collect();
    if digits.is_empty() {
        return body.to_string();
    }
    let i = digits[at.index(digits.len())];
    let end = body[i..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(body.len(), |e| i + e);
    format!("{}{replacement}{}", &body[..i], &body[end..])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bodies_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), text in "[\\[\\]{}\",:0-9a-zA-Z.T +-]{0,160}") {
        check(all_parsers(&String::from_utf8_lossy(&bytes)))?;
        check(all_parsers(&text))?;
    }

    #[test]
    fn mutated_fixtures_are_parsed_or_refused(which in 0usize..64, at in any::<prop::sample::Index>(), replacement in prop_oneof![
        Just("-1".to_string()), Just("1e400".to_string()), Just("-0".to_string()), Just("null".to_string()),
        Just("\"x\"".to_string()), Just("99999999999999999999".to_string()), "[0-9]{1,12}",
    ]) {
        let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
        let mut names: Vec<String> = std::fs::read_dir(dir).unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let body = fixture(&names[which % names.len()]);
        check(all_parsers(&mutate(&body, at, &replacement)))?;
    }
}

#[test]
fn a_negative_intensity_is_refused_naming_the_interval() {
    let body =
        r#"{"zone":"DE","history":[{"datetime":"2024-01-01T00:00:00.000Z","carbonIntensity":-5}]}"#;
    let err = electricity_maps::parse_history("DE", body)
        .unwrap_err()
        .to_string();
    assert!(err.contains("-5") && err.contains("2024-01-01"), "{err}");
}
