//! What remote write 2.0 carries besides labels and samples: each series' type, help text and
//! unit, for every metric the estimator writes (`greenpipe_common::names::estimate`). Units are
//! the base units the names end in, spelled as OpenMetrics does (`watts`, `joules`, `ratio`,
//! `seconds`).
//!
//! No start ("created") timestamp is sent: the energy counters are restored from their last
//! written values after a restart (`crate::energy`), so the time they started counting from zero
//! is not known to the process that writes them, and a wrong one would make a receiver that
//! stores start timestamps insert a false zero.

use greenpipe_common::names::estimate as e;
use greenpipe_remote_write::v2::{Description, MetricType};
use greenpipe_remote_write::TimeSeries;

const fn described(kind: MetricType, help: &'static str, unit: &'static str) -> Description {
    Description {
        kind,
        help,
        unit,
        start_timestamp: 0,
    }
}

/// Type, help and unit of the metric `name`, if the estimator writes it.
pub fn of_metric(name: &str) -> Option<Description> {
    use MetricType::{Counter, Gauge};
    Some(match name {
        e::NODE_POWER_WATTS => described(Gauge, "Predicted node power.", "watts"),
        e::NODE_IDLE_POWER_WATTS => {
            described(Gauge, "The idle part of the predicted node power.", "watts")
        }
        e::NODE_POWER_ERROR_WATTS => described(
            Gauge,
            "Predicted node power minus the node's power-meter reading.",
            "watts",
        ),
        e::NODE_POWER_ABS_ERROR_RATIO => described(
            Gauge,
            "|prediction - meter| / meter at each tick, where a meter reads more than 0 W.",
            "ratio",
        ),
        e::CONTAINER_POWER_WATTS => described(
            Gauge,
            "Power attributed to a container and component; summed over containers and components it equals the node's prediction.",
            "watts",
        ),
        e::NODE_ENERGY_JOULES_TOTAL => {
            described(Counter, "Predicted node energy, the sum of power x tick length.", "joules")
        }
        e::CONTAINER_ENERGY_JOULES_TOTAL => described(
            Counter,
            "Energy attributed to a container and component, the sum of power x tick length.",
            "joules",
        ),
        e::TICK_TIMESTAMP_SECONDS => described(
            Gauge,
            "Unix time of the tick, written last for every tick (the estimator's resume point).",
            "seconds",
        ),
        _ => return None,
    })
}

/// [`of_metric`] of a series' `__name__`.
pub fn describe(ts: &TimeSeries) -> Option<Description> {
    of_metric(ts.label("__name__")?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
