//! What remote write 2.0 carries besides labels and samples: each series' type, help text and
//! unit, for every metric the estimator writes (`greenpipe_common::names::estimate`). Units are
//! the base units the names end in, spelled as OpenMetrics does (`watts`, `joules`, `ratio`,
//! `seconds`).
//!
//! No start ("created") timestamp is sent: the energy counters are restored from their last
//! written values after a restart (`crate::energy`), so the time they started counting from zero
//! is not known to the process that writes them, and a wrong one would make a receiver that
//! stores start timestamps insert a false zero.

use greenpipe_common::contract::{self, Type};
use greenpipe_remote_write::v2::{Description, MetricType};
use greenpipe_remote_write::TimeSeries;

/// Type, help and unit of the metric `name`, if the estimator writes it: its declaration in
/// `greenpipe_common::contract::estimate`, the one place they are written.
pub fn of_metric(name: &str) -> Option<Description> {
    let family = contract::estimate::ALL.iter().find(|f| f.name == name)?;
    Some(Description {
        kind: match family.kind {
            Type::Counter => MetricType::Counter,
            Type::Gauge => MetricType::Gauge,
            Type::Histogram => MetricType::Histogram,
        },
        help: family.help,
        unit: family.unit,
        start_timestamp: 0,
    })
}

/// [`of_metric`] of a series' `__name__`.
pub fn describe(ts: &TimeSeries) -> Option<Description> {
    of_metric(ts.label("__name__")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::names::estimate as e;

    #[test]
    fn every_written_metric_is_described_with_the_unit_its_name_ends_in() {
        for name in [
            e::NODE_POWER_WATTS,
            e::NODE_IDLE_POWER_WATTS,
            e::NODE_POWER_ERROR_WATTS,
            e::NODE_POWER_ABS_ERROR_RATIO,
            e::CONTAINER_POWER_WATTS,
            e::NODE_ENERGY_JOULES_TOTAL,
            e::CONTAINER_ENERGY_JOULES_TOTAL,
            e::NODE_GPU_POWER_WATTS,
            e::NODE_GPU_ENERGY_JOULES_TOTAL,
            e::TICK_TIMESTAMP_SECONDS,
        ] {
            let d = of_metric(name).unwrap_or_else(|| panic!("{name} not described"));
            let base = name.strip_suffix("_total").unwrap_or(name);
            assert!(
                base.ends_with(&format!("_{}", d.unit)),
                "{name}: {}",
                d.unit
            );
            assert_eq!(
                d.kind == MetricType::Counter,
                name.ends_with("_total"),
                "{name}"
            );
            assert!(!d.help.is_empty());
        }
        assert_eq!(of_metric("something_else"), None);
    }
}
