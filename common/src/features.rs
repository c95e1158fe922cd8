//! The canonical model features, in the order of the trace CSV format.
//!
//! The same names are the trace CSV column names (see `../shared/datasets/power/README.md`) and
//! the feature names inside a model file, so a public trace and one extracted from our own
//! Prometheus are interchangeable.

use serde::{Deserialize, Serialize};

/// One model input: a per-second rate (or a level for memory and frequency) of a node or container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// CPU time used, in CPU-seconds per second.
    CpuSecondsPerSecond,
    /// CPU cycles per second (hardware counter).
    CpuCyclesPerSecond,
    /// Retired instructions per second (hardware counter).
    CpuInstructionsPerSecond,
    /// Last-level cache misses per second (hardware counter).
    CacheMissesPerSecond,
    /// Page-cache hits per second.
    PageCacheHitsPerSecond,
    /// Network bytes (sent + received) per second.
    NetworkBytesPerSecond,
    /// Disk bytes (read + written) per second.
    DiskBytesPerSecond,
    /// Memory in use, bytes.
    MemoryUsedBytes,
    /// Mean CPU frequency, hertz (node level only).
    CpuFrequencyHertz,
    /// GPU-busy time, in GPU-seconds per second, summed over the node's GPUs (an optional
    /// trailing trace column).
    GpuSecondsPerSecond,
    /// Mean GPU clock, hertz (node level only; an optional trailing trace column).
    GpuFrequencyHertz,
}

impl Feature {
    /// How many features there are.
    pub const COUNT: usize = 11;

    /// Every feature, in trace-CSV column order.
    pub const ALL: [Feature; Feature::COUNT] = [
        Feature::CpuSecondsPerSecond,
        Feature::CpuCyclesPerSecond,
        Feature::CpuInstructionsPerSecond,
        Feature::CacheMissesPerSecond,
        Feature::PageCacheHitsPerSecond,
        Feature::NetworkBytesPerSecond,
        Feature::DiskBytesPerSecond,
        Feature::MemoryUsedBytes,
        Feature::CpuFrequencyHertz,
        Feature::GpuSecondsPerSecond,
        Feature::GpuFrequencyHertz,
    ];

    /// The features every trace has a column for, in column order.
    pub const BASE: [Feature; 9] = [
        Feature::CpuSecondsPerSecond,
        Feature::CpuCyclesPerSecond,
        Feature::CpuInstructionsPerSecond,
        Feature::CacheMissesPerSecond,
        Feature::PageCacheHitsPerSecond,
        Feature::NetworkBytesPerSecond,
        Feature::DiskBytesPerSecond,
        Feature::MemoryUsedBytes,
        Feature::CpuFrequencyHertz,
    ];

    /// The optional trailing columns of nodes with GPUs, in column order. A trace carries any of
    /// them, in this order, after [`Feature::BASE`]; old traces carry none.
    pub const GPU: [Feature; 2] = [Feature::GpuSecondsPerSecond, Feature::GpuFrequencyHertz];

    /// The trace CSV column and model-file name of this feature.
    pub fn column(self) -> &'static str {
        match self {
            Feature::CpuSecondsPerSecond => "cpu_seconds_per_second",
            Feature::CpuCyclesPerSecond => "cpu_cycles_per_second",
            Feature::CpuInstructionsPerSecond => "cpu_instructions_per_second",
            Feature::CacheMissesPerSecond => "cache_misses_per_second",
            Feature::PageCacheHitsPerSecond => "page_cache_hits_per_second",
            Feature::NetworkBytesPerSecond => "network_bytes_per_second",
            Feature::DiskBytesPerSecond => "disk_bytes_per_second",
            Feature::MemoryUsedBytes => "memory_used_bytes",
            Feature::CpuFrequencyHertz => "cpu_frequency_hertz",
            Feature::GpuSecondsPerSecond => "gpu_seconds_per_second",
            Feature::GpuFrequencyHertz => "gpu_frequency_hertz",
        }
    }

    /// Parses a column name back into a feature.
    pub fn from_column(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.column() == name)
    }

    /// Position of the feature in [`Feature::ALL`], for indexing [`FeatureValues`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The leading, non-feature columns of the trace CSV format.
pub const TRACE_KEY_COLUMNS: [&str; 4] = ["timestamp", "node", "workload", "power_watts"];

/// The exact trace CSV header line (without newline) of a trace without GPU columns.
pub fn trace_header() -> String {
    trace_header_with(&Feature::BASE)
}

/// The trace CSV header line with `features` as its feature columns.
pub fn trace_header_with(features: &[Feature]) -> String {
    let mut cols: Vec<&str> = TRACE_KEY_COLUMNS.to_vec();
    cols.extend(features.iter().map(|f| f.column()));
    cols.join(",")
}

/// Feature values of one node or container at one instant; `None` = not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FeatureValues(pub [Option<f64>; Feature::COUNT]);

impl FeatureValues {
    /// The value of one feature.
    pub fn get(&self, f: Feature) -> Option<f64> {
        self.0[f.index()]
    }

    /// Sets the value of one feature.
    pub fn set(&mut self, f: Feature, v: Option<f64>) {
        self.0[f.index()] = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_shared_dataset_format() {
        assert_eq!(
            trace_header(),
            "timestamp,node,workload,power_watts,cpu_seconds_per_second,cpu_cycles_per_second,\
             cpu_instructions_per_second,cache_misses_per_second,page_cache_hits_per_second,\
             network_bytes_per_second,disk_bytes_per_second,memory_used_bytes,cpu_frequency_hertz"
        );
    }

    #[test]
    fn gpu_columns_trail_the_base_ones() {
        assert_eq!(
            Feature::BASE
                .iter()
                .chain(&Feature::GPU)
                .copied()
                .collect::<Vec<_>>(),
            Feature::ALL
        );
        assert!(trace_header_with(&Feature::ALL)
            .ends_with(",cpu_frequency_hertz,gpu_seconds_per_second,gpu_frequency_hertz"));
    }

    #[test]
    fn column_round_trip() {
        for f in Feature::ALL {
            assert_eq!(Feature::from_column(f.column()), Some(f));
            assert_eq!(Feature::ALL[f.index()], f);
        }
        assert_eq!(Feature::from_column("watts"), None);
    }
}
