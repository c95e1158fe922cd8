//! The metric contract: every family the exporter and the estimator emit, declared once — name,
//! type, unit, help, label keys — and the allowed values of the enumerated labels.
//!
//! Emitters refer to these declarations (the exporter's `MetricSet` takes a `&Family`, the
//! estimator registers its own metrics from them), so a help text or type lives in one place.
//! Adding a family = one `Family` constant here plus its entry in [`FAMILIES`] (a test fails
//! until the README's metrics reference names it). `check_series` is what debug builds of the
//! exporter run on every series, and what tests run on the estimator's output.

use crate::names::label;

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Monotonic total; the name ends in `_total`.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

impl Type {
    /// The `# TYPE` word.
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// One metric family.
#[derive(Debug, PartialEq, Eq)]
pub struct Family {
    /// Full metric name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Type,
    /// Base unit (`seconds`, `bytes`, `watts`, ...) or empty for a count or ratio; the name
    /// carries it as a suffix.
    pub unit: &'static str,
    /// `# HELP` text.
    pub help: &'static str,
    /// Label keys besides `node` (which the exporter adds to every series).
    pub labels: &'static [&'static str],
}

/// A label whose values are a closed set.
#[derive(Debug)]
pub struct EnumeratedLabel {
    /// Label key.
    pub key: &'static str,
    /// Every value it may take.
    pub values: &'static [&'static str],
}

/// The enumerated labels and their values.
pub static ENUMERATED: &[EnumeratedLabel] = &[
    EnumeratedLabel {
        key: label::DIRECTION,
        values: &[
            direction::READ,
            direction::WRITE,
            direction::RECEIVE,
            direction::TRANSMIT,
        ],
    },
    EnumeratedLabel {
        key: label::MODE,
        values: &cpu_mode::ALL,
    },
    EnumeratedLabel {
        key: label::SOURCE,
        values: &[
            crate::names::source::BPF,
            crate::names::source::PERF,
            crate::names::source::CGROUP,
            crate::names::source::PROCFS,
        ],
    },
    EnumeratedLabel {
        key: label::COMPONENT,
        values: &[
            crate::names::component::IDLE,
            crate::names::component::DYNAMIC,
        ],
    },
];

/// Values of the `direction` label.
pub mod direction {
    /// Disk reads.
    pub const READ: &str = "read";
    /// Disk writes.
    pub const WRITE: &str = "write";
    /// Network bytes in.
    pub const RECEIVE: &str = "receive";
    /// Network bytes out.
    pub const TRANSMIT: &str = "transmit";
}

/// CPU modes and the one definition of busy CPU, used by the exporter's `system` remainder,
/// the estimator's readout, the dashboards and the docs.
pub mod cpu_mode {
    /// Modes of `/proc/stat`'s aggregate `cpu` line that the exporter exports, in kernel order.
    pub const ALL: [&str; 8] = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ];

    /// Modes that are not this machine's CPU doing work: idle, waiting for I/O, and `steal`
    /// (time the hypervisor gave to someone else, which no cgroup is charged for). `guest` and
    /// `guest_nice` are listed because the kernel already counts them inside `user` and `nice`:
    /// a source that exports them must not add them twice.
    pub const NOT_BUSY: [&str; 5] = ["idle", "iowait", "steal", "guest", "guest_nice"];

    /// Whether time in `mode` is busy CPU.
    pub fn is_busy(mode: &str) -> bool {
        !NOT_BUSY.contains(&mode)
    }

    /// The PromQL label matcher selecting busy modes: `mode!~"idle|iowait|steal|guest|guest_nice"`.
    pub fn busy_matcher() -> String {
        format!("mode!~\"{}\"", NOT_BUSY.join("|"))
    }
}

/// `docs/metrics.md`: every declared family, generated from [`FAMILIES`] (a test keeps the
/// file equal to this; `UPDATE_METRICS_DOC=1 cargo test -p greenpipe-common` rewrites it).
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         Generated from the declarations in `common/src/contract.rs` (do not edit by hand: run\n\
         `UPDATE_METRICS_DOC=1 cargo test -p greenpipe-common`). Every exporter series also carries\n\
         `node`; the estimator's predictions carry it as well.\n\n\
         | family | type | unit | labels | help |\n|---|---|---|---|---|\n",
    );
    for f in FAMILIES {
        let labels = if f.labels.is_empty() {
            "—".to_string()
        } else {
            f.labels
                .iter()
                .map(|l| match ENUMERATED.iter().find(|e| e.key == *l) {
                    Some(e) => format!("`{l}` ({})", e.values.join(", ")),
                    None => format!("`{l}`"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let unit = if f.unit.is_empty() { "—" } else { f.unit };
        out.push_str(&format!(
            "| `{}` | {} | {unit} | {labels} | {} |\n",
            f.name,
            f.kind.as_str(),
            f.help.replace('|', "\\|")
        ));
    }
    out.push_str(&format!(
        "\nBusy CPU, wherever it is computed (the exporter's `system` remainder, the estimator's \
         readout, the dashboards): every mode but {}, i.e. `{}`.\n",
        cpu_mode::NOT_BUSY.join(", "),
        cpu_mode::busy_matcher()
    ));
    out
}

/// The declaration of `name`, if it is one.
pub fn family(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.name == name)
}

/// Why a series does not match its family's declaration, or `None` if it does: the family must
/// be the declared one (same help and type), and every label key declared, every enumerated
/// label value allowed.
pub fn check_series(family: &Family, kind: Type, labels: &[(&str, &str)]) -> Option<String> {
    let Some(declared) = self::family(family.name) else {
        return Some(format!(
            "{} is not declared in common::contract",
            family.name
        ));
    };
    if declared != family {
        return Some(format!(
            "{} emitted with a help text or labels other than its declaration",
            family.name
        ));
    }
    if kind != declared.kind {
        return Some(format!(
            "{} emitted as a {} but declared a {}",
            family.name,
            kind.as_str(),
            declared.kind.as_str()
        ));
    }
    for (key, value) in labels {
        if *key != label::NODE && !declared.labels.contains(key) {
            return Some(format!("{}: label {key:?} is not declared", family.name));
        }
        if let Some(e) = ENUMERATED.iter().find(|e| e.key == *key) {
            if !e.values.contains(value) {
                return Some(format!(
                    "{}: {key}={value:?} is not one of {:?}",
                    family.name, e.values
                ));
            }
        }
    }
    None
}

/// Node-level resource metrics written by the exporter.
pub mod node {
    use super::{Family, Type};
    use crate::names::{label, node as n};

    /// `cpu_seconds_total`.
    pub const CPU_SECONDS_TOTAL: Family = Family {
        name: n::CPU_SECONDS_TOTAL,
        kind: Type::Counter,
        unit: "seconds",
        help: "CPU time spent in each mode, summed over CPUs (/proc/stat).",
        labels: &[label::MODE],
    };

    /// `cpus`.
    pub const CPUS: Family = Family {
        name: n::CPUS,
        kind: Type::Gauge,
        unit: "",
        help: "Online logical CPUs (/proc/stat).",
        labels: &[],
    };

    /// `cpu_frequency_hertz`.
    pub const CPU_FREQUENCY_HERTZ: Family = Family {
        name: n::CPU_FREQUENCY_HERTZ,
        kind: Type::Gauge,
        unit: "hertz",
        help: "Current frequency of the logical CPU (cpufreq scaling_cur_freq).",
        labels: &[label::CPU],
    };

    /// `memory_bytes`.
    pub const MEMORY_BYTES: Family = Family {
        name: n::MEMORY_BYTES,
        kind: Type::Gauge,
        unit: "bytes",
        help: "Node memory by state (/proc/meminfo); used = total - available.",
        labels: &[label::STATE],
    };

    /// `page_cache_events_total`.
    pub const PAGE_CACHE_EVENTS_TOTAL: Family = Family {
        name: n::PAGE_CACHE_EVENTS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Page-cache and paging events by kind (/proc/vmstat; pgpgin/pgpgout in KiB).",
        labels: &[label::EVENT],
    };

    /// `disk_bytes_total`.
    pub const DISK_BYTES_TOTAL: Family = Family {
        name: n::DISK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Bytes read or written by whole disks (/proc/diskstats).",
        labels: &[label::DEVICE, label::DIRECTION],
    };

    /// `disk_operations_total`.
    pub const DISK_OPERATIONS_TOTAL: Family = Family {
        name: n::DISK_OPERATIONS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Completed reads or writes of whole disks (/proc/diskstats).",
        labels: &[label::DEVICE, label::DIRECTION],
    };

    /// `network_bytes_total`.
    pub const NETWORK_BYTES_TOTAL: Family = Family {
        name: n::NETWORK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Bytes received or transmitted per interface (/proc/net/dev).",
        labels: &[label::DEVICE, label::DIRECTION],
    };

    /// `network_packets_total`.
    pub const NETWORK_PACKETS_TOTAL: Family = Family {
        name: n::NETWORK_PACKETS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Packets received or transmitted per interface (/proc/net/dev).",
        labels: &[label::DEVICE, label::DIRECTION],
    };

    /// `context_switches_total`.
    pub const CONTEXT_SWITCHES_TOTAL: Family = Family {
        name: n::CONTEXT_SWITCHES_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Context switches since boot (/proc/stat).",
        labels: &[],
    };

    /// `procs_running`.
    pub const PROCS_RUNNING: Family = Family {
        name: n::PROCS_RUNNING,
        kind: Type::Gauge,
        unit: "",
        help: "Runnable processes (/proc/stat).",
        labels: &[],
    };
}

/// Container-level resource metrics written by the exporter.
pub mod container {
    use super::{Family, Type};
    use crate::names::{container as n, label};

    /// `cpu_seconds_total`.
    pub const CPU_SECONDS_TOTAL: Family = Family {
        name: n::CPU_SECONDS_TOTAL,
        kind: Type::Counter,
        unit: "seconds",
        help: "CPU time used by the container (source=\"cgroup\": cpu.stat usage_usec / cpuacct.usage; source=\"bpf\": on-CPU time from sched_switch); system = node busy time not used by containers.",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };

    /// `memory_bytes`.
    pub const MEMORY_BYTES: Family = Family {
        name: n::MEMORY_BYTES,
        kind: Type::Gauge,
        unit: "bytes",
        help: "Memory charged to the container's cgroup, page cache included (memory.current / memory.usage_in_bytes).",
        labels: &[label::CONTAINER_ID, label::POD_UID],
    };

    /// `disk_bytes_total`.
    pub const DISK_BYTES_TOTAL: Family = Family {
        name: n::DISK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Bytes read or written by the container on whole disks (source=\"cgroup\": io.stat / blkio; source=\"bpf\": block I/O submitted by its tasks).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::DIRECTION, label::SOURCE],
    };

    /// `network_bytes_total`.
    pub const NETWORK_BYTES_TOTAL: Family = Family {
        name: n::NETWORK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Bytes received or transmitted by the container (source=\"procfs\": its own network namespace, /proc/<pid>/net/dev; source=\"bpf\": socket payload of its tasks).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::DIRECTION, label::SOURCE],
    };

    /// `processes`.
    pub const PROCESSES: Family = Family {
        name: n::PROCESSES,
        kind: Type::Gauge,
        unit: "",
        help: "Processes in the container's cgroup and its descendants (cgroup.procs).",
        labels: &[label::CONTAINER_ID, label::POD_UID],
    };

    /// `cpu_cycles_total`.
    pub const CPU_CYCLES_TOTAL: Family = Family {
        name: n::CPU_CYCLES_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "CPU cycles of the container's tasks (scaled for multiplexing).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };

    /// `cpu_instructions_total`.
    pub const CPU_INSTRUCTIONS_TOTAL: Family = Family {
        name: n::CPU_INSTRUCTIONS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Instructions retired by the container's tasks (scaled for multiplexing).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };

    /// `cache_misses_total`.
    pub const CACHE_MISSES_TOTAL: Family = Family {
        name: n::CACHE_MISSES_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Cache misses of the container's tasks (scaled for multiplexing).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };

    /// `page_cache_hits_total`.
    pub const PAGE_CACHE_HITS_TOTAL: Family = Family {
        name: n::PAGE_CACHE_HITS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Pages the container's read() calls found in the page cache.",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };

    /// `page_cache_additions_total`.
    pub const PAGE_CACHE_ADDITIONS_TOTAL: Family = Family {
        name: n::PAGE_CACHE_ADDITIONS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Pages the container added to the page cache (misses filled, new pages written).",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::SOURCE],
    };
}

/// Per-process metrics (opt-in, top-N by CPU).
pub mod process {
    use super::{Family, Type};
    use crate::names::{label, process as n};

    /// `cpu_seconds_total`.
    pub const CPU_SECONDS_TOTAL: Family = Family {
        name: n::CPU_SECONDS_TOTAL,
        kind: Type::Counter,
        unit: "seconds",
        help: "CPU time of the process, for the top-N by recent CPU (source=\"procfs\": /proc/<pid>/stat utime + stime; source=\"bpf\": sched_switch).",
        labels: &[label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
    };

    /// `resident_memory_bytes`.
    pub const RESIDENT_MEMORY_BYTES: Family = Family {
        name: n::RESIDENT_MEMORY_BYTES,
        kind: Type::Gauge,
        unit: "bytes",
        help: "Resident memory of the process, for the top-N by recent CPU (/proc/<pid>/stat).",
        labels: &[label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
    };

    /// `page_cache_hits_total`.
    pub const PAGE_CACHE_HITS_TOTAL: Family = Family {
        name: n::PAGE_CACHE_HITS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Pages the process's read() calls found in the page cache.",
        labels: &[label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
    };

    /// `page_cache_additions_total`.
    pub const PAGE_CACHE_ADDITIONS_TOTAL: Family = Family {
        name: n::PAGE_CACHE_ADDITIONS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Pages the process added to the page cache (misses filled, new pages written).",
        labels: &[label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
    };

    /// `disk_bytes_total`.
    pub const DISK_BYTES_TOTAL: Family = Family {
        name: n::DISK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Block I/O bytes submitted by the process.",
        labels: &[
            label::PID,
            label::COMM,
            label::CONTAINER_ID,
            label::SOURCE,
            label::DIRECTION,
        ],
    };

    /// `network_bytes_total`.
    pub const NETWORK_BYTES_TOTAL: Family = Family {
        name: n::NETWORK_BYTES_TOTAL,
        kind: Type::Counter,
        unit: "bytes",
        help: "Socket payload bytes moved by the process.",
        labels: &[
            label::PID,
            label::COMM,
            label::CONTAINER_ID,
            label::SOURCE,
            label::DIRECTION,
        ],
    };
}

/// Power-meter readings written by the exporter.
pub mod meter {
    use super::{Family, Type};
    use crate::names::{label, meter as n};

    /// `power_watts`.
    pub const POWER_WATTS: Family = Family {
        name: n::POWER_WATTS,
        kind: Type::Gauge,
        unit: "watts",
        help: "Power measured by the meter.",
        labels: &[label::METER, label::KIND],
    };

    /// `energy_joules_total`.
    pub const ENERGY_JOULES_TOTAL: Family = Family {
        name: n::ENERGY_JOULES_TOTAL,
        kind: Type::Counter,
        unit: "joules",
        help: "Energy measured by the meter since the exporter started: the device's counter where it has one, else power integrated by the exporter. Never decreases.",
        labels: &[label::METER, label::KIND],
    };

    /// `voltage_volts`.
    pub const VOLTAGE_VOLTS: Family = Family {
        name: n::VOLTAGE_VOLTS,
        kind: Type::Gauge,
        unit: "volts",
        help: "Bus voltage measured by the meter.",
        labels: &[label::METER, label::KIND],
    };

    /// `current_amperes`.
    pub const CURRENT_AMPERES: Family = Family {
        name: n::CURRENT_AMPERES,
        kind: Type::Gauge,
        unit: "amperes",
        help: "Current measured by the meter.",
        labels: &[label::METER, label::KIND],
    };

    /// `up`.
    pub const UP: Family = Family {
        name: n::UP,
        kind: Type::Gauge,
        unit: "",
        help: "1 if the meter's last read succeeded.",
        labels: &[label::METER, label::KIND],
    };

    /// `read_errors_total`.
    pub const READ_ERRORS_TOTAL: Family = Family {
        name: n::READ_ERRORS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Failed meter reads by reason.",
        labels: &[label::METER, label::KIND, label::REASON],
    };

    /// `last_reading_timestamp_seconds`.
    pub const LAST_READING_TIMESTAMP_SECONDS: Family = Family {
        name: n::LAST_READING_TIMESTAMP_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Unix time of the meter's last good reading.",
        labels: &[label::METER, label::KIND],
    };

    /// `temperature_celsius`.
    pub const TEMPERATURE_CELSIUS: Family = Family {
        name: n::TEMPERATURE_CELSIUS,
        kind: Type::Gauge,
        unit: "celsius",
        help: "Temperature of the meter itself.",
        labels: &[label::METER, label::KIND],
    };
}

/// The exporter's metrics about itself.
pub mod exporter {
    use super::{Family, Type};
    use crate::names::{exporter as n, label};

    /// `build_info`.
    pub const BUILD_INFO: Family = Family {
        name: n::BUILD_INFO,
        kind: Type::Gauge,
        unit: "",
        help: "Build information of the exporter; always 1.",
        labels: &[label::VERSION],
    };

    /// `collector_success`.
    pub const COLLECTOR_SUCCESS: Family = Family {
        name: n::COLLECTOR_SUCCESS,
        kind: Type::Gauge,
        unit: "",
        help: "1 if the collector's last run succeeded.",
        labels: &[label::COLLECTOR],
    };

    /// `collector_duration_seconds`.
    pub const COLLECTOR_DURATION_SECONDS: Family = Family {
        name: n::COLLECTOR_DURATION_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Wall time of the collector's last run.",
        labels: &[label::COLLECTOR],
    };

    /// `collector_available`.
    pub const COLLECTOR_AVAILABLE: Family = Family {
        name: n::COLLECTOR_AVAILABLE,
        kind: Type::Gauge,
        unit: "",
        help: "1 if the collector's source exists on this host; reason says why not.",
        labels: &[label::COLLECTOR, label::REASON],
    };

    /// `malformed_lines_total`.
    pub const MALFORMED_LINES_TOTAL: Family = Family {
        name: n::MALFORMED_LINES_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Malformed source lines skipped by the collector.",
        labels: &[label::COLLECTOR],
    };

    /// `collection_duration_seconds`.
    pub const COLLECTION_DURATION_SECONDS: Family = Family {
        name: n::COLLECTION_DURATION_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Wall time of the previous whole collection cycle.",
        labels: &[],
    };

    /// `collections_total`.
    pub const COLLECTIONS_TOTAL: Family = Family {
        name: n::COLLECTIONS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Collection cycles run.",
        labels: &[],
    };

    /// `last_collection_timestamp_seconds`.
    pub const LAST_COLLECTION_TIMESTAMP_SECONDS: Family = Family {
        name: n::LAST_COLLECTION_TIMESTAMP_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Unix time at which the served sample was taken.",
        labels: &[],
    };

    /// `cpu_seconds_total`.
    pub const CPU_SECONDS_TOTAL: Family = Family {
        name: n::CPU_SECONDS_TOTAL,
        kind: Type::Counter,
        unit: "seconds",
        help: "User and system CPU time used by the exporter process.",
        labels: &[],
    };

    /// `resident_memory_bytes`.
    pub const RESIDENT_MEMORY_BYTES: Family = Family {
        name: n::RESIDENT_MEMORY_BYTES,
        kind: Type::Gauge,
        unit: "bytes",
        help: "Resident memory of the exporter process.",
        labels: &[],
    };

    /// `bpf_program_attached`.
    pub const BPF_PROGRAM_ATTACHED: Family = Family {
        name: n::BPF_PROGRAM_ATTACHED,
        kind: Type::Gauge,
        unit: "",
        help: "1 if the BPF program is attached; reason says why not.",
        labels: &[label::PROGRAM, label::REASON],
    };

    /// `bpf_cgroups_tracked`.
    pub const BPF_CGROUPS_TRACKED: Family = Family {
        name: n::BPF_CGROUPS_TRACKED,
        kind: Type::Gauge,
        unit: "",
        help: "cgroups held in the BPF counters map.",
        labels: &[],
    };

    /// `bpf_processes_tracked`.
    pub const BPF_PROCESSES_TRACKED: Family = Family {
        name: n::BPF_PROCESSES_TRACKED,
        kind: Type::Gauge,
        unit: "",
        help: "Processes held in the BPF per-process map.",
        labels: &[],
    };

    /// `perf_events_open`.
    pub const PERF_EVENTS_OPEN: Family = Family {
        name: n::PERF_EVENTS_OPEN,
        kind: Type::Gauge,
        unit: "",
        help: "perf-event descriptors held by the hardware-counter collector.",
        labels: &[],
    };
}

/// Predictions written by the estimator through remote write (`node` is on every series).
pub mod estimate {
    use super::{Family, Type};
    use crate::names::{estimate as n, label};

    /// `node_power_watts`.
    pub const NODE_POWER_WATTS: Family = Family {
        name: n::NODE_POWER_WATTS,
        kind: Type::Gauge,
        unit: "watts",
        help: "Predicted node power.",
        labels: &[label::MODEL],
    };

    /// `node_idle_power_watts`.
    pub const NODE_IDLE_POWER_WATTS: Family = Family {
        name: n::NODE_IDLE_POWER_WATTS,
        kind: Type::Gauge,
        unit: "watts",
        help: "The idle part of the node power prediction.",
        labels: &[label::MODEL],
    };

    /// `node_power_error_watts`.
    pub const NODE_POWER_ERROR_WATTS: Family = Family {
        name: n::NODE_POWER_ERROR_WATTS,
        kind: Type::Gauge,
        unit: "watts",
        help: "Prediction minus the node's power-meter reading, where a meter exists (positive: the model over-estimates).",
        labels: &[label::MODEL],
    };

    /// `node_power_abs_error_ratio`.
    pub const NODE_POWER_ABS_ERROR_RATIO: Family = Family {
        name: n::NODE_POWER_ABS_ERROR_RATIO,
        kind: Type::Gauge,
        unit: "",
        help: "|prediction - meter| / meter at each tick where the node's meter reads more than 0 W; its mean over time is the model's live MAPE.",
        labels: &[label::MODEL],
    };

    /// `container_power_watts`.
    pub const CONTAINER_POWER_WATTS: Family = Family {
        name: n::CONTAINER_POWER_WATTS,
        kind: Type::Gauge,
        unit: "watts",
        help: "Power attributed to a container (container_id=\"system\" for host processes); summed over containers and components it equals the node's prediction.",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::MODEL, label::COMPONENT],
    };

    /// `node_energy_joules_total`.
    pub const NODE_ENERGY_JOULES_TOTAL: Family = Family {
        name: n::NODE_ENERGY_JOULES_TOTAL,
        kind: Type::Counter,
        unit: "joules",
        help: "Predicted node energy: power times tick length summed over every tick written, resumed from its last written value after a restart.",
        labels: &[label::MODEL],
    };

    /// `container_energy_joules_total`.
    pub const CONTAINER_ENERGY_JOULES_TOTAL: Family = Family {
        name: n::CONTAINER_ENERGY_JOULES_TOTAL,
        kind: Type::Counter,
        unit: "joules",
        help: "Energy attributed to a container, per component, accumulated like greenpipe_node_energy_joules_total.",
        labels: &[label::CONTAINER_ID, label::POD_UID, label::MODEL, label::COMPONENT],
    };

    /// `tick_timestamp_seconds`.
    pub const TICK_TIMESTAMP_SECONDS: Family = Family {
        name: n::TICK_TIMESTAMP_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Unix time of the tick, written last for every tick: where the estimator resumes after a restart.",
        labels: &[label::SHARD],
    };
}

/// The estimator's metrics about itself (its own `/metrics`).
pub mod estimator {
    use super::{Family, Type};
    use crate::names::{estimator as n, label};

    /// `ticks_total`.
    pub const TICKS_TOTAL: Family = Family {
        name: n::TICKS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Ticks estimated and written.",
        labels: &[],
    };

    /// `ticks_backfilled_total`.
    pub const TICKS_BACKFILLED_TOTAL: Family = Family {
        name: n::TICKS_BACKFILLED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Ticks estimated while catching up after an outage.",
        labels: &[],
    };

    /// `ticks_abandoned_total`.
    pub const TICKS_ABANDONED_TOTAL: Family = Family {
        name: n::TICKS_ABANDONED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Ticks older than --backfill.max-age, given up.",
        labels: &[],
    };

    /// `lag_seconds`.
    pub const LAG_SECONDS: Family = Family {
        name: n::LAG_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Seconds between now and the last tick written.",
        labels: &[],
    };

    /// `last_tick_timestamp_seconds`.
    pub const LAST_TICK_TIMESTAMP_SECONDS: Family = Family {
        name: n::LAST_TICK_TIMESTAMP_SECONDS,
        kind: Type::Gauge,
        unit: "seconds",
        help: "Unix time of the last tick written.",
        labels: &[],
    };

    /// `queries_total`.
    pub const QUERIES_TOTAL: Family = Family {
        name: n::QUERIES_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "PromQL requests by query and outcome (ok, http_<status>, timeout, network_error, partial, error).",
        labels: &[label::QUERY, label::OUTCOME],
    };

    /// `query_warnings_total`.
    pub const QUERY_WARNINGS_TOTAL: Family = Family {
        name: n::QUERY_WARNINGS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Warnings attached to successful PromQL answers, by query.",
        labels: &[label::QUERY],
    };

    /// `query_duration_seconds`.
    pub const QUERY_DURATION_SECONDS: Family = Family {
        name: n::QUERY_DURATION_SECONDS,
        kind: Type::Histogram,
        unit: "seconds",
        help: "PromQL request wall time.",
        labels: &[label::QUERY],
    };

    /// `samples_written_total`.
    pub const SAMPLES_WRITTEN_TOTAL: Family = Family {
        name: n::SAMPLES_WRITTEN_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Samples accepted by the remote-write receiver.",
        labels: &[],
    };

    /// `samples_retried_total`.
    pub const SAMPLES_RETRIED_TOTAL: Family = Family {
        name: n::SAMPLES_RETRIED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Samples sent again after a retryable failure.",
        labels: &[],
    };

    /// `samples_dropped_total`.
    pub const SAMPLES_DROPPED_TOTAL: Family = Family {
        name: n::SAMPLES_DROPPED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Samples given up, by reason.",
        labels: &[label::REASON],
    };

    /// `remote_write_requests_total`.
    pub const REMOTE_WRITE_REQUESTS_TOTAL: Family = Family {
        name: n::REMOTE_WRITE_REQUESTS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Remote-write requests by HTTP status or network_error.",
        labels: &[label::OUTCOME],
    };

    /// `otlp_requests_total`.
    pub const OTLP_REQUESTS_TOTAL: Family = Family {
        name: n::OTLP_REQUESTS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "OTLP export requests by HTTP status or network_error.",
        labels: &[label::OUTCOME],
    };

    /// `otlp_points_written_total`.
    pub const OTLP_POINTS_WRITTEN_TOTAL: Family = Family {
        name: n::OTLP_POINTS_WRITTEN_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "OTLP data points accepted by the receiver.",
        labels: &[],
    };

    /// `otlp_points_dropped_total`.
    pub const OTLP_POINTS_DROPPED_TOTAL: Family = Family {
        name: n::OTLP_POINTS_DROPPED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "OTLP data points given up, by reason.",
        labels: &[label::REASON],
    };

    /// `nodes_skipped_total`.
    pub const NODES_SKIPPED_TOTAL: Family = Family {
        name: n::NODES_SKIPPED_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Node estimates skipped, by reason.",
        labels: &[label::REASON],
    };

    /// `nodes_estimated`.
    pub const NODES_ESTIMATED: Family = Family {
        name: n::NODES_ESTIMATED,
        kind: Type::Gauge,
        unit: "",
        help: "Node estimates written by the last tick.",
        labels: &[],
    };

    /// `models_loaded`.
    pub const MODELS_LOADED: Family = Family {
        name: n::MODELS_LOADED,
        kind: Type::Gauge,
        unit: "",
        help: "1 for every model in force (versioned label: name@vN after recalibrations).",
        labels: &[label::MODEL],
    };

    /// `model_reloads_total`.
    pub const MODEL_RELOADS_TOTAL: Family = Family {
        name: n::MODEL_RELOADS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help:
            "Model sets read again after a file change or SIGHUP, by outcome (applied or refused).",
        labels: &[label::OUTCOME],
    };

    /// `model_reload_success`.
    pub const MODEL_RELOAD_SUCCESS: Family = Family {
        name: n::MODEL_RELOAD_SUCCESS,
        kind: Type::Gauge,
        unit: "",
        help:
            "1 if the last model files read were loaded, 0 if refused (the previous models stay).",
        labels: &[],
    };
}

/// The metrics of `greenpipe-estimator recalibrate` about itself (its own `/metrics`).
pub mod recalibrate {
    use super::{Family, Type};
    use crate::names::{label, recalibrate as n};

    /// `live_error_ratio` (also carries `node`).
    pub const LIVE_ERROR_RATIO: Family = Family {
        name: n::LIVE_ERROR_RATIO,
        kind: Type::Gauge,
        unit: "",
        help: "Live MAPE (ratio) over --error-window, by node and model, at the last check.",
        labels: &[label::MODEL],
    };

    /// `refits_total`.
    pub const REFITS_TOTAL: Family = Family {
        name: n::REFITS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Refits attempted, by model and outcome (accepted, rejected or failed).",
        labels: &[label::MODEL, label::OUTCOME],
    };

    /// `refit_cpu_seconds`.
    pub const REFIT_CPU_SECONDS: Family = Family {
        name: n::REFIT_CPU_SECONDS,
        kind: Type::Histogram,
        unit: "seconds",
        help: "CPU time of one refit (fit and scoring).",
        labels: &[],
    };

    /// `checks_total`.
    pub const CHECKS_TOTAL: Family = Family {
        name: n::CHECKS_TOTAL,
        kind: Type::Counter,
        unit: "",
        help: "Live-error checks against Prometheus, by outcome (ok or error).",
        labels: &[label::OUTCOME],
    };
}

/// Every declared family.
pub static FAMILIES: &[&Family] = &[
    &node::CPU_SECONDS_TOTAL,
    &node::CPUS,
    &node::CPU_FREQUENCY_HERTZ,
    &node::MEMORY_BYTES,
    &node::PAGE_CACHE_EVENTS_TOTAL,
    &node::DISK_BYTES_TOTAL,
    &node::DISK_OPERATIONS_TOTAL,
    &node::NETWORK_BYTES_TOTAL,
    &node::NETWORK_PACKETS_TOTAL,
    &node::CONTEXT_SWITCHES_TOTAL,
    &node::PROCS_RUNNING,
    &container::CPU_SECONDS_TOTAL,
    &container::MEMORY_BYTES,
    &container::DISK_BYTES_TOTAL,
    &container::NETWORK_BYTES_TOTAL,
    &container::PROCESSES,
    &container::CPU_CYCLES_TOTAL,
    &container::CPU_INSTRUCTIONS_TOTAL,
    &container::CACHE_MISSES_TOTAL,
    &container::PAGE_CACHE_HITS_TOTAL,
    &container::PAGE_CACHE_ADDITIONS_TOTAL,
    &process::CPU_SECONDS_TOTAL,
    &process::RESIDENT_MEMORY_BYTES,
    &process::PAGE_CACHE_HITS_TOTAL,
    &process::PAGE_CACHE_ADDITIONS_TOTAL,
    &process::DISK_BYTES_TOTAL,
    &process::NETWORK_BYTES_TOTAL,
    &meter::POWER_WATTS,
    &meter::ENERGY_JOULES_TOTAL,
    &meter::VOLTAGE_VOLTS,
    &meter::CURRENT_AMPERES,
    &meter::UP,
    &meter::READ_ERRORS_TOTAL,
    &meter::LAST_READING_TIMESTAMP_SECONDS,
    &meter::TEMPERATURE_CELSIUS,
    &exporter::BUILD_INFO,
    &exporter::COLLECTOR_SUCCESS,
    &exporter::COLLECTOR_DURATION_SECONDS,
    &exporter::COLLECTOR_AVAILABLE,
    &exporter::MALFORMED_LINES_TOTAL,
    &exporter::COLLECTION_DURATION_SECONDS,
    &exporter::COLLECTIONS_TOTAL,
    &exporter::LAST_COLLECTION_TIMESTAMP_SECONDS,
    &exporter::CPU_SECONDS_TOTAL,
    &exporter::RESIDENT_MEMORY_BYTES,
    &exporter::BPF_PROGRAM_ATTACHED,
    &exporter::BPF_CGROUPS_TRACKED,
    &exporter::BPF_PROCESSES_TRACKED,
    &exporter::PERF_EVENTS_OPEN,
    &estimate::NODE_POWER_WATTS,
    &estimate::NODE_IDLE_POWER_WATTS,
    &estimate::NODE_POWER_ERROR_WATTS,
    &estimate::NODE_POWER_ABS_ERROR_RATIO,
    &estimate::CONTAINER_POWER_WATTS,
    &estimate::NODE_ENERGY_JOULES_TOTAL,
    &estimate::CONTAINER_ENERGY_JOULES_TOTAL,
    &estimate::TICK_TIMESTAMP_SECONDS,
    &estimator::TICKS_TOTAL,
    &estimator::TICKS_BACKFILLED_TOTAL,
    &estimator::TICKS_ABANDONED_TOTAL,
    &estimator::LAG_SECONDS,
    &estimator::LAST_TICK_TIMESTAMP_SECONDS,
    &estimator::QUERIES_TOTAL,
    &estimator::QUERY_WARNINGS_TOTAL,
    &estimator::QUERY_DURATION_SECONDS,
    &estimator::SAMPLES_WRITTEN_TOTAL,
    &estimator::SAMPLES_RETRIED_TOTAL,
    &estimator::SAMPLES_DROPPED_TOTAL,
    &estimator::REMOTE_WRITE_REQUESTS_TOTAL,
    &estimator::OTLP_REQUESTS_TOTAL,
    &estimator::OTLP_POINTS_WRITTEN_TOTAL,
    &estimator::OTLP_POINTS_DROPPED_TOTAL,
    &estimator::NODES_SKIPPED_TOTAL,
    &estimator::NODES_ESTIMATED,
    &estimator::MODELS_LOADED,
    &estimator::MODEL_RELOADS_TOTAL,
    &estimator::MODEL_RELOAD_SUCCESS,
    &recalibrate::LIVE_ERROR_RATIO,
    &recalibrate::REFITS_TOTAL,
    &recalibrate::REFIT_CPU_SECONDS,
    &recalibrate::CHECKS_TOTAL,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_prometheus_conventions() {
        for (i, f) in FAMILIES.iter().enumerate() {
            assert!(f.name.starts_with("greenpipe_"), "{}", f.name);
            assert!(
                FAMILIES[..i].iter().all(|g| g.name != f.name),
                "{} declared twice",
                f.name
            );
            assert_eq!(
                f.kind == Type::Counter,
                f.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                f.name
            );
            if !f.unit.is_empty() {
                let stem = f.name.trim_end_matches("_total");
                assert!(
                    stem.ends_with(&format!("_{}", f.unit)),
                    "{}: unit {} is not its suffix",
                    f.name,
                    f.unit
                );
            }
            assert!(f.help.ends_with('.'), "{}: help is a sentence", f.name);
            assert!(!f.labels.contains(&label::NODE), "{}", f.name);
        }
    }

    /// A declared family left out of [`FAMILIES`] would be refused when emitted; this says so
    /// at once.
    #[test]
    fn every_declaration_is_listed() {
        let source = include_str!("contract.rs");
        let declared = source
            .lines()
            .filter(|l| {
                l.trim_start().starts_with("pub const ") && l.ends_with(": Family = Family {")
            })
            .count();
        assert_eq!(declared, FAMILIES.len());
    }

    #[test]
    fn a_series_that_differs_from_its_declaration_is_refused() {
        let cpus = &node::CPUS;
        assert_eq!(check_series(cpus, Type::Gauge, &[]), None);
        assert!(check_series(cpus, Type::Counter, &[]).is_some());
        let other_help = Family {
            help: "Something else.",
            ..node::CPUS
        };
        assert!(check_series(&other_help, Type::Gauge, &[]).is_some());
        let disk = &node::DISK_BYTES_TOTAL;
        let ok = [(label::DEVICE, "sda"), (label::DIRECTION, "read")];
        assert_eq!(check_series(disk, Type::Counter, &ok), None);
        let bad_value = [(label::DEVICE, "sda"), (label::DIRECTION, "in")];
        assert!(check_series(disk, Type::Counter, &bad_value).is_some());
        let bad_key = [(label::DEVICE, "sda"), (label::MODE, "user")];
        assert!(check_series(disk, Type::Counter, &bad_key).is_some());
    }

    #[test]
    fn busy_cpu_has_one_definition() {
        let busy: Vec<&str> = cpu_mode::ALL
            .into_iter()
            .filter(|m| cpu_mode::is_busy(m))
            .collect();
        assert_eq!(busy, ["user", "nice", "system", "irq", "softirq"]);
        assert_eq!(
            cpu_mode::busy_matcher(),
            r#"mode!~"idle|iowait|steal|guest|guest_nice""#
        );
    }

    #[test]
    fn docs_metrics_reference_is_generated_from_the_declarations() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let want = reference_markdown();
        if std::env::var_os("UPDATE_METRICS_DOC").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/metrics.md is not the generated reference; run UPDATE_METRICS_DOC=1 cargo test -p greenpipe-common"
        );
    }

    /// The README's metric tables are written by hand (with wiring and sources); this keeps
    /// them true: every table row `| `name` | type | …` names a declared family of that type.
    #[test]
    fn readme_metrics_reference_matches_the_declarations() {
        let readme = include_str!("../../README.md");
        for row in readme.lines().filter(|l| l.starts_with("| `greenpipe_")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let Some(kind) = cells.get(2).copied() else {
                continue;
            };
            if !matches!(kind, "counter" | "gauge" | "histogram") {
                continue;
            }
            for name in cells[1].split('`').skip(1).step_by(2) {
                let name = name.split('{').next().unwrap();
                if name.starts_with("greenpipe_grid_") || name.contains("_emissions_") {
                    continue; // carbon's families, not the exporter's or the estimator's
                }
                let f = family(name)
                    .unwrap_or_else(|| panic!("README documents undeclared family {name}"));
                assert_eq!(kind, f.kind.as_str(), "README type of {name}");
            }
        }
    }
}
