//! The PromQL of each model feature, per node and per container: what `serve` evaluates every
//! tick and what `dataset` extracts for training, in one place so the two cannot drift apart.
//!
//! Counters go through `rate(x[window])`; gauges through `last_over_time(x[window])` rather than
//! a bare selector, whose 5-minute lookback would keep a vanished node's last value alive.
//! Container series may come from several sources (`cgroup`, `bpf`, `perf`) measuring the same
//! quantity: `max by` over the source keeps one of them instead of adding them up.

use crate::features::Feature;
use crate::names::{container as c, gpu as g, label, meter, node as n};

/// Meter kinds that measure a part of a node, never the whole of it: `nvml` reads a GPU board.
/// The node's measured power leaves them out.
pub const PARTIAL_METER_KINDS: [&str; 1] = ["nvml"];

/// The label matcher that keeps the meters measuring a whole node: `kind!~"nvml"`.
pub fn whole_node_meter_matcher() -> String {
    format!("{}!~\"{}\"", label::KIND, PARTIAL_METER_KINDS.join("|"))
}

/// The node's measured power, from its whole-node meters (restricted by matcher `m`; empty =
/// none). A node with several such meters (a USB meter and a smart plug, or a Jetson's module
/// rail beside its CPU and GPU rails, which are parts of it) is measured by each: `max` keeps
/// the largest reading instead of adding them up.
pub fn node_meter_expr(w: &str, m: &str) -> String {
    format!(
        "max by (node) (last_over_time({}[{w}]))",
        selector(meter::POWER_WATTS, &[m, &whole_node_meter_matcher()])
    )
}

/// The power of the node's GPUs as their `nvml` meters read it, summed over GPUs (restricted by
/// matcher `m`; empty = none).
pub fn node_gpu_meter_expr(w: &str, m: &str) -> String {
    format!(
        "sum by (node) (last_over_time({}[{w}]))",
        selector(
            meter::POWER_WATTS,
            &[
                m,
                &format!("{}=\"{}\"", label::KIND, PARTIAL_METER_KINDS[0])
            ]
        )
    )
}

/// The labels one container series is keyed by.
pub const CONTAINER_KEYS: &str = "node, container_id, pod_uid";

/// `metric{m1,m2}`, leaving out empty matchers (and the braces when none is left).
pub fn selector(metric: &str, matchers: &[&str]) -> String {
    let kept: Vec<&str> = matchers.iter().copied().filter(|m| !m.is_empty()).collect();
    if kept.is_empty() {
        metric.to_string()
    } else {
        format!("{metric}{{{}}}", kept.join(","))
    }
}

fn container_rate(metric: &str, w: &str, m: &str) -> String {
    format!(
        "max by ({CONTAINER_KEYS}) (rate({}[{w}]))",
        selector(metric, &[m])
    )
}

fn container_directional_rate(metric: &str, w: &str, m: &str) -> String {
    format!(
        "sum by ({CONTAINER_KEYS}) (max by ({CONTAINER_KEYS}, {dir}) (rate({}[{w}])))",
        selector(metric, &[m]),
        dir = label::DIRECTION
    )
}

/// The container-level expression of a feature.
pub fn container_expr(f: Feature, w: &str) -> Option<String> {
    container_expr_matching(f, w, "")
}

/// [`container_expr`] restricted by one label matcher (e.g. `node="pi-1"`; empty = none).
pub fn container_expr_matching(f: Feature, w: &str, m: &str) -> Option<String> {
    Some(match f {
        Feature::CpuSecondsPerSecond => container_rate(c::CPU_SECONDS_TOTAL, w, m),
        Feature::CpuCyclesPerSecond => container_rate(c::CPU_CYCLES_TOTAL, w, m),
        Feature::CpuInstructionsPerSecond => container_rate(c::CPU_INSTRUCTIONS_TOTAL, w, m),
        Feature::CacheMissesPerSecond => container_rate(c::CACHE_MISSES_TOTAL, w, m),
        Feature::PageCacheHitsPerSecond => container_rate(c::PAGE_CACHE_HITS_TOTAL, w, m),
        Feature::NetworkBytesPerSecond => container_directional_rate(c::NETWORK_BYTES_TOTAL, w, m),
        Feature::DiskBytesPerSecond => container_directional_rate(c::DISK_BYTES_TOTAL, w, m),
        Feature::MemoryUsedBytes => {
            format!(
                "max by ({CONTAINER_KEYS}) (last_over_time({}[{w}]))",
                selector(c::MEMORY_BYTES, &[m])
            )
        }
        Feature::GpuSecondsPerSecond => container_rate(c::GPU_SECONDS_TOTAL, w, m),
        Feature::CpuFrequencyHertz | Feature::GpuFrequencyHertz => return None,
    })
}

/// The node-level expression of a feature. Hardware counters and page-cache hits exist per
/// container only (the exporter's `system` entry covers the host), so the node value is the sum
/// over its containers.
pub fn node_expr(f: Feature, w: &str) -> String {
    node_expr_matching(f, w, "")
}

/// [`node_expr`] restricted by one label matcher (e.g. `node="pi-1"`; empty = none). Training
/// (`dataset`) uses it, so a model is trained on exactly the features `serve` feeds it.
pub fn node_expr_matching(f: Feature, w: &str, m: &str) -> String {
    let sum_of_containers = |f| {
        format!(
            "sum by (node) ({})",
            container_expr_matching(f, w, m).expect("per-container feature")
        )
    };
    match f {
        Feature::CpuSecondsPerSecond => format!(
            "sum by (node) (rate({}[{w}]))",
            selector(
                n::CPU_SECONDS_TOTAL,
                &[m, &crate::contract::cpu_mode::busy_matcher()]
            )
        ),
        Feature::CpuCyclesPerSecond
        | Feature::CpuInstructionsPerSecond
        | Feature::CacheMissesPerSecond
        | Feature::PageCacheHitsPerSecond => sum_of_containers(f),
        Feature::NetworkBytesPerSecond => format!(
            "sum by (node) (rate({}[{w}]))",
            selector(n::NETWORK_BYTES_TOTAL, &[m, "device!=\"lo\""])
        ),
        Feature::DiskBytesPerSecond => {
            format!(
                "sum by (node) (rate({}[{w}]))",
                selector(n::DISK_BYTES_TOTAL, &[m])
            )
        }
        Feature::MemoryUsedBytes => format!(
            "sum by (node) (last_over_time({}[{w}]))",
            selector(n::MEMORY_BYTES, &[m, "state=\"used\""])
        ),
        Feature::CpuFrequencyHertz => format!(
            "avg by (node) (last_over_time({}[{w}]))",
            selector(n::CPU_FREQUENCY_HERTZ, &[m])
        ),
        // Busy time summed over the node's GPUs, as the trace column is defined.
        Feature::GpuSecondsPerSecond => format!(
            "sum by (node) (rate({}[{w}]))",
            selector(g::BUSY_SECONDS_TOTAL, &[m])
        ),
        Feature::GpuFrequencyHertz => format!(
            "avg by (node) (last_over_time({}[{w}]))",
            selector(g::FREQUENCY_HERTZ, &[m])
        ),
    }
}
