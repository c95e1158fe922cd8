//! Helpers shared by the meter tests: a sampler running only the meter collector, and lookups
//! of one meter's series in a sample.

#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

use greenpipe_common::names::{label, meter as names};
use greenpipe_exporter::config::Config;
use greenpipe_exporter::meter::Reason;
use greenpipe_exporter::metrics::MetricSet;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

/// A sampler with only the meter collector, reading `meters` (`KIND:TARGET`).
pub fn sampler(paths: Paths, meters: &[String], interval: Duration, timeout: Duration) -> Sampler {
    let mut c = Config::for_paths(paths, "pi-1");
    c.collectors = vec!["meter"];
    c.interval = interval;
    c.meter.timeout = timeout;
    c.meter.specs = meters.iter().map(|m| m.parse().unwrap()).collect();
    Sampler::new(c).unwrap()
}

/// The value of `name` for the channel labelled `meter`, if the sample has it.
pub fn value(set: &MetricSet, name: &str, meter: &str) -> Option<f64> {
    set.family(name)?
        .series
        .iter()
        .find(|s| s.labels.contains(&(label::METER, meter.to_string())))
        .map(|s| s.value)
}

/// `greenpipe_meter_read_errors_total{meter, reason}`; panics when the series is missing,
/// since every reason a kind can produce is exported from the start.
pub fn errors(set: &MetricSet, meter: &str, reason: Reason) -> f64 {
    set.family(names::READ_ERRORS_TOTAL)
        .expect("read error counters are always exported")
        .series
        .iter()
        .find(|s| {
            s.labels.contains(&(label::METER, meter.to_string()))
                && s.labels
                    .contains(&(label::REASON, reason.as_str().to_string()))
        })
        .map(|s| s.value)
        .unwrap_or_else(|| panic!("no {reason:?} error series for {meter}"))
}

/// Runs ticks `pause` apart until `done` holds (a meter that backs off after a failure
/// needs a few ticks before it is tried again); panics after 150 ticks.
pub fn tick_until(
    s: &mut Sampler,
    pause: Duration,
    what: &str,
    done: impl Fn(&MetricSet) -> bool,
) -> MetricSet {
    for _ in 0..150 {
        let set = s.collect_once();
        if done(&set) {
            return set;
        }
        std::thread::sleep(pause);
    }
    panic!("never reached: {what}");
}
