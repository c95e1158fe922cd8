//! Parsing of each provider's documented response shape, with the gaps and nulls they document
//! (fixture bodies in tests/fixtures follow the examples in the providers' API references).

use greenpipe_carbon::series::{Gap, Kind};
use greenpipe_carbon::sources::{electricity_maps, uk, watttime};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

const T0_UK: i64 = 1_516_449_600; // 2018-01-20T12:00Z

#[test]
fn uk_national_actual_nulls_and_missing_period_are_gaps() {
    let (actual, forecast) = uk::parse_national("GB", &fixture("uk_national_fw48h.json")).unwrap();
    assert_eq!((actual.kind, forecast.kind), (Kind::Actual, Kind::Forecast));
    assert_eq!(actual.step_seconds, 1800);
    assert_eq!(actual.points[0].timestamp, T0_UK);
    assert_eq!(actual.points[0].value, Some(263.0));
    assert_eq!(
        forecast.points.iter().map(|p| p.value).collect::<Vec<_>>(),
        vec![Some(266.0), Some(261.0), Some(255.0)]
    );
    // actual: two nulls plus the missing 13:00 period, merged into one gap of 3 half hours.
    assert_eq!(
        actual.gaps(),
        vec![Gap {
            start: T0_UK + 1800,
            end: T0_UK + 3 * 1800 + 1800,
            intervals: 3
        }]
    );
    // forecast: only the absent 13:00 period.
    assert_eq!(
        forecast.gaps(),
        vec![Gap {
            start: T0_UK + 3600,
            end: T0_UK + 5400,
            intervals: 1
        }]
    );
    // Hourly mean of the 12:00 hour uses both half hours; the 13:00 hour has only 13:30.
    let h = forecast.hourly();
    assert_eq!(h.values, vec![Some(263.5), Some(255.0)]);
}

#[test]
fn uk_regional_object_and_array_forms() {
    let s = uk::parse_regional("LDN", &fixture("uk_regional_fw48h.json")).unwrap();
    assert_eq!(s.kind, Kind::Forecast);
    assert_eq!(s.points.len(), 3);
    assert_eq!(s.points[1].value, None);
    assert_eq!(s.gaps().len(), 1);
    let s = uk::parse_regional("NW", &fixture("uk_regional_regionid.json")).unwrap();
    assert_eq!(s.points.len(), 1);
    assert_eq!(s.points[0].value, Some(266.0));
}

#[test]
fn electricity_maps_latest_history_forecast() {
    let latest =
        electricity_maps::parse_latest("DE", &fixture("electricitymaps_latest.json")).unwrap();
    assert_eq!(latest.points.len(), 1);
    assert_eq!(latest.points[0].value, Some(302.0));
    assert_eq!(latest.points[0].timestamp, 1_558_396_800);

    let history =
        electricity_maps::parse_history("DE", &fixture("electricitymaps_history.json")).unwrap();
    assert_eq!(history.present(), 3);
    // 22:00 is null, 00:00 and 01:00 are absent.
    let gaps = history.gaps();
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert_eq!((gaps[0].start, gaps[0].intervals), (1_558_389_600, 1));
    assert_eq!((gaps[1].start, gaps[1].intervals), (1_558_396_800, 2));

    let forecast =
        electricity_maps::parse_forecast("DE", &fixture("electricitymaps_forecast.json")).unwrap();
    assert_eq!(forecast.kind, Kind::Forecast);
    assert_eq!(forecast.points[2].value, None);
    assert_eq!(forecast.value_at(1_558_404_000 + 1800), Some(320.0));
}

#[test]
fn watttime_units_signal_and_nulls() {
    let f = watttime::parse(
        "CAISO_NORTH",
        Kind::Forecast,
        watttime::Signal::Marginal,
        &fixture("watttime_forecast.json"),
    )
    .unwrap();
    assert_eq!(f.step_seconds, 300);
    assert_eq!(f.source, "watttime_co2_moer");
    // 870 lbs/MWh = 870 * 0.45359237 g/kWh
    assert!((f.points[0].value.unwrap() - 394.625_362).abs() < 1e-3);
    assert_eq!(
        f.gaps(),
        vec![Gap {
            start: 1_657_843_200 + 600,
            end: 1_657_843_200 + 900,
            intervals: 1
        }]
    );

    let h = watttime::parse(
        "CAISO_NORTH",
        Kind::Actual,
        watttime::Signal::Average,
        &fixture("watttime_historical.json"),
    )
    .unwrap();
    assert_eq!(h.source, "watttime_co2_aoer");
    assert_eq!(h.points[1].value, None);
    // Asking for marginal but receiving average is refused.
    let err = watttime::parse(
        "CAISO_NORTH",
        Kind::Actual,
        watttime::Signal::Marginal,
        &fixture("watttime_historical.json"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("co2_aoer"), "{err}");
    // Unknown units are refused, not guessed.
    let body = fixture("watttime_forecast.json").replace("lbs_co2_per_mwh", "tons_per_fortnight");
    assert!(watttime::parse("R", Kind::Forecast, watttime::Signal::Marginal, &body).is_err());
}

#[test]
fn malformed_bodies_are_errors_naming_the_provider() {
    for (err, name) in [
        (uk::parse_national("GB", "{\"data\": 3}").unwrap_err(), "uk"),
        (
            electricity_maps::parse_history("DE", "{\"zone\":\"DE\"}").unwrap_err(),
            "electricitymaps",
        ),
        (
            watttime::parse("R", Kind::Actual, watttime::Signal::Average, "[]").unwrap_err(),
            "watttime",
        ),
    ] {
        assert!(err.to_string().starts_with(name), "{err}");
    }
    // A duplicated period is ambiguous.
    let dup = r#"{"data":[{"from":"2018-01-20T12:00Z","to":"x","intensity":{"forecast":1,"actual":1,"index":"low"}},
                          {"from":"2018-01-20T12:00Z","to":"x","intensity":{"forecast":2,"actual":2,"index":"low"}}]}"#;
    assert!(uk::parse_national("GB", dup).is_err());
}
