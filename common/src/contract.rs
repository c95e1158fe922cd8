//! The metric contract: every family the exporter and the estimator emit, declared once — name,
//! type, unit, help, label keys — and the allowed values of the enumerated labels.
//!
//! Emitters refer to these declarations (the exporter's `MetricSet` takes a `&Family`, the
//! estimator registers its own metrics from them), so a help text or type lives in one place.
//! Adding a family = one entry in the `families!` table below: its name constant, its `Family`
//! and its place in [`FAMILIES`] all come from that entry. `check_series` is what debug builds of the
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
    /// The families on which the key has these values (`reason` means something else on each
    /// family that has it, `source` and `mode` something else on the workload's and carbon's).
    pub scope: Scope,
    /// Every value it may take.
    pub values: &'static [&'static str],
}

/// Where an enumerated label's values hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every family that has the key.
    Every,
    /// This one family.
    Family(&'static str),
    /// The families whose names start with this.
    Prefix(&'static str),
}

impl Scope {
    fn covers(self, family: &str) -> bool {
        match self {
            Scope::Every => true,
            Scope::Family(f) => f == family,
            Scope::Prefix(p) => family.starts_with(p),
        }
    }
}

/// The enumeration of label `key` on family `family`, if its values are a closed set. The
/// `reason` of `collector_available` and `bpf_program_attached` is not: it is the text of the
/// error that made the source unavailable.
pub fn enumeration(family: &str, key: &str) -> Option<&'static EnumeratedLabel> {
    ENUMERATED
        .iter()
        .find(|e| e.key == key && e.scope.covers(family))
}

/// The enumerated labels and their values.
pub static ENUMERATED: &[EnumeratedLabel] = &[
    EnumeratedLabel {
        key: label::DIRECTION,
        scope: Scope::Every,
        values: &[
            direction::READ,
            direction::WRITE,
            direction::RECEIVE,
            direction::TRANSMIT,
        ],
    },
    EnumeratedLabel {
        key: label::MODE,
        scope: Scope::Family(node::names::CPU_SECONDS_TOTAL),
        values: &cpu_mode::ALL,
    },
    EnumeratedLabel {
        key: label::SOURCE,
        scope: Scope::Prefix("greenpipe_container_"),
        values: &SOURCES,
    },
    EnumeratedLabel {
        key: label::SOURCE,
        scope: Scope::Prefix("greenpipe_process_"),
        values: &SOURCES,
    },
    EnumeratedLabel {
        key: label::COMPONENT,
        scope: Scope::Every,
        values: &[
            crate::names::component::IDLE,
            crate::names::component::DYNAMIC,
        ],
    },
    EnumeratedLabel {
        key: label::STATE,
        scope: Scope::Every,
        values: &memory_state::ALL,
    },
    EnumeratedLabel {
        key: label::REASON,
        scope: Scope::Family(meter::names::READ_ERRORS_TOTAL),
        values: reason::MeterRead::VALUES,
    },
    EnumeratedLabel {
        key: label::REASON,
        scope: Scope::Family(exporter::names::PUSH_SAMPLES_DROPPED_TOTAL),
        values: reason::PushDropped::VALUES,
    },
    EnumeratedLabel {
        key: label::REASON,
        scope: Scope::Family(estimator::names::NODES_SKIPPED_TOTAL),
        values: reason::NodeSkipped::VALUES,
    },
    EnumeratedLabel {
        key: label::OUTCOME,
        scope: Scope::Family(estimator::names::MODEL_RELOADS_TOTAL),
        values: &outcome::MODEL_RELOAD,
    },
    EnumeratedLabel {
        key: label::OUTCOME,
        scope: Scope::Family(recalibrate::names::REFITS_TOTAL),
        values: &outcome::REFIT,
    },
    EnumeratedLabel {
        key: label::OUTCOME,
        scope: Scope::Family(recalibrate::names::CHECKS_TOTAL),
        values: &outcome::CHECK,
    },
    EnumeratedLabel {
        key: label::KIND,
        scope: Scope::Family(carbon::names::GRID_CARBON_INTENSITY_GRAMS_PER_KWH),
        values: &[
            crate::names::carbon::KIND_ACTUAL,
            crate::names::carbon::KIND_FORECAST,
        ],
    },
    EnumeratedLabel {
        key: label::MODE,
        scope: Scope::Prefix("greenpipe_workload_inference"),
        values: &[
            crate::names::workload::MODE_LOCAL,
            crate::names::workload::MODE_SERVED,
        ],
    },
];

/// Where the exporter read a container's or a process's value (`source`).
const SOURCES: [&str; 6] = [
    crate::names::source::BPF,
    crate::names::source::PERF,
    crate::names::source::CGROUP,
    crate::names::source::PROCFS,
    crate::names::source::NVML,
    crate::names::source::DEVICE_HOLDERS,
];

/// Values of the `outcome` label. Where the set is closed its family's list is here; the
/// request counters' outcomes are open (`http_<status>`), and take [`outcome::OK`] and
/// [`outcome::ERROR`] from here beside the status.
pub mod outcome {
    /// A request or check that succeeded.
    pub const OK: &str = "ok";
    /// A request or check that failed in a way with no more specific outcome.
    pub const ERROR: &str = "error";
    /// A changed model set put in force.
    pub const APPLIED: &str = "applied";
    /// A changed model set refused (the set in force stays).
    pub const REFUSED: &str = "refused";
    /// A refit written as a new version.
    pub const ACCEPTED: &str = "accepted";
    /// A refit judged and refused.
    pub const REJECTED: &str = "rejected";
    /// A refit that could not be judged.
    pub const FAILED: &str = "failed";

    /// `estimator_model_reloads_total`.
    pub const MODEL_RELOAD: [&str; 2] = [APPLIED, REFUSED];
    /// `recalibrate_refits_total`.
    pub const REFIT: [&str; 3] = [ACCEPTED, REJECTED, FAILED];
    /// `recalibrate_checks_total`.
    pub const CHECK: [&str; 2] = [OK, ERROR];
}

/// Values of the `state` label of `node_memory_bytes`: `/proc/meminfo` fields by their
/// exported name, then `used` (total - available).
pub mod memory_state {
    /// Every state, in the order the exporter emits them.
    pub const ALL: [&str; 12] = [
        "total",
        "free",
        "available",
        "buffers",
        "cached",
        "shmem",
        "slab",
        "dirty",
        "anon",
        "swap_total",
        "swap_free",
        "used",
    ];
}

/// An enum whose variants are a label's closed set of values: each variant declares its value,
/// so the enum and the list the docs and checks read cannot drift apart.
macro_rules! label_values {
    ($(#[$m:meta])* pub enum $name:ident {
        $($(#[$vm:meta])* $variant:ident = $value:literal,)+
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vm])* $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
            /// Every label value, in declaration order.
            pub const VALUES: &'static [&'static str] = &[$($value,)+];

            /// The label value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $value,)+
                }
            }
        }
    };
}

/// Values of the `reason` label, on the families where it is a closed set.
pub mod reason {
    label_values! {
        /// Why a power meter read failed (`meter_read_errors_total`).
        pub enum MeterRead {
            /// Device absent, unplugged, or the link went away (open/read/write failed).
            Unplugged = "unplugged",
            /// No (complete) answer within the timeout.
            Timeout = "timeout",
            /// Fewer bytes than a whole frame.
            ShortFrame = "short_frame",
            /// A whole frame with a bad end marker or checksum.
            CorruptFrame = "corrupt_frame",
            /// A frame from another model than configured.
            WrongModel = "wrong_model",
            /// HTTP status other than 200.
            HttpStatus = "http_status",
            /// Answer that does not parse or lacks the expected fields.
            BadResponse = "bad_response",
            /// Other I/O error (sysfs read, permission).
            Io = "io",
        }
    }

    label_values! {
        /// Why pushed samples were dropped unsent (`exporter_push_samples_dropped_total`).
        pub enum PushDropped {
            /// Older than `--push.buffer.max-age`.
            MaxAge = "max_age",
            /// The buffer was over `--push.buffer.max-bytes`.
            MaxBytes = "max_bytes",
            /// The receiver refused the request with a status other than 429 or 5xx.
            Rejected = "rejected",
            /// The segment file did not decode.
            Corrupt = "corrupt",
            /// The writer was behind by more ticks than its queue holds.
            QueueFull = "queue_full",
            /// The segment file could not be written (disk full, I/O error).
            WriteError = "write_error",
        }
    }

    label_values! {
        /// Why the estimator skipped a node at a tick (`estimator_nodes_skipped_total`).
        pub enum NodeSkipped {
            /// No model matches the node and the file has no default.
            NoModel = "no_model",
            /// A feature the model needs was not read.
            MissingFeature = "missing_feature",
            /// A feature the model needs is NaN or infinite.
            NonFiniteFeature = "non_finite_feature",
            /// The model refused the input or predicted a non-finite value.
            ModelError = "model_error",
        }
    }
}

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
                .map(|l| match enumeration(f.name, l) {
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
/// be the declared one (same type, help and labels as its entry in the table), and every label
/// key declared, every enumerated label value allowed.
pub fn check_series(family: &Family, labels: &[(&str, &str)]) -> Option<String> {
    let Some(declared) = self::family(family.name) else {
        return Some(format!(
            "{} is not declared in common::contract",
            family.name
        ));
    };
    if declared != family {
        return Some(format!(
            "{} emitted with a type, help text or labels other than its declaration",
            family.name
        ));
    }
    for (key, value) in labels {
        if *key != label::NODE && !declared.labels.contains(key) {
            return Some(format!("{}: label {key:?} is not declared", family.name));
        }
        if let Some(e) = enumeration(family.name, key) {
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

/// Declares every family once: `CONST = "name", Type, unit "…", labels [..], help "…";` in
/// groups. From that one table come the `Family` constants (`contract::node::CPUS`), the name
/// constants (`contract::node::names::CPUS`, re-exported as `names::node::CPUS`) and
/// [`FAMILIES`], so a family cannot be named without being declared, or declared without being
/// listed.
macro_rules! families {
    ($(
        $(#[$group_doc:meta])*
        $group:ident {
            $(
                $(#[$doc:meta])*
                $konst:ident = $name:literal, $kind:ident, unit $unit:literal,
                    labels [$($label:expr),* $(,)?], help $help:literal;
            )*
        }
    )*) => {
        $(
            $(#[$group_doc])*
            pub mod $group {
                #[allow(unused_imports)]
                use super::{Family, Type};
                #[allow(unused_imports)]
                use crate::names::label;

                $(
                    $(#[$doc])*
                    pub const $konst: Family = Family {
                        name: names::$konst,
                        kind: Type::$kind,
                        unit: $unit,
                        help: $help,
                        labels: &[$($label),*],
                    };
                )*

                /// This group's families, in declaration order.
                pub static ALL: &[&Family] = &[$(&$konst),*];

                /// The metric names of this group's families.
                pub mod names {
                    $(
                        #[doc = concat!("`", $name, "`.")]
                        pub const $konst: &str = $name;
                    )*
                }
            }
        )*

        /// Every declared family, in declaration order.
        pub static FAMILIES: &[&Family] = &[$($(&$group::$konst,)*)*];
    };
}

families! {
    /// Node-level resource metrics written by the exporter.
    node {
        /// Counter, `mode`: CPU seconds by mode, summed over CPUs (`/proc/stat`).
        CPU_SECONDS_TOTAL = "greenpipe_node_cpu_seconds_total", Counter, unit "seconds", labels [label::MODE],
            help "CPU time spent in each mode, summed over CPUs (/proc/stat).";

        /// Gauge: number of online logical CPUs.
        CPUS = "greenpipe_node_cpus", Gauge, unit "", labels [],
            help "Online logical CPUs (/proc/stat).";

        /// Gauge, `cpu`: current frequency per logical CPU (cpufreq).
        CPU_FREQUENCY_HERTZ = "greenpipe_node_cpu_frequency_hertz", Gauge, unit "hertz", labels [label::CPU],
            help "Current frequency of the logical CPU (cpufreq scaling_cur_freq).";

        /// Gauge, `state`: memory from `/proc/meminfo`.
        MEMORY_BYTES = "greenpipe_node_memory_bytes", Gauge, unit "bytes", labels [label::STATE],
            help "Node memory by state (/proc/meminfo); used = total - available.";

        /// Counter, `event`: page-cache and paging activity from `/proc/vmstat`.
        PAGE_CACHE_EVENTS_TOTAL = "greenpipe_node_page_cache_events_total", Counter, unit "", labels [label::EVENT],
            help "Page-cache and paging events by kind (/proc/vmstat; pgpgin/pgpgout in KiB).";

        /// Counter, `device`, `direction`: bytes moved by whole disks.
        DISK_BYTES_TOTAL = "greenpipe_node_disk_bytes_total", Counter, unit "bytes", labels [label::DEVICE, label::DIRECTION],
            help "Bytes read or written by whole disks (/proc/diskstats).";

        /// Counter, `device`, `direction`: completed disk operations.
        DISK_OPERATIONS_TOTAL = "greenpipe_node_disk_operations_total", Counter, unit "", labels [label::DEVICE, label::DIRECTION],
            help "Completed reads or writes of whole disks (/proc/diskstats).";

        /// Counter, `device`, `direction`: network bytes.
        NETWORK_BYTES_TOTAL = "greenpipe_node_network_bytes_total", Counter, unit "bytes", labels [label::DEVICE, label::DIRECTION],
            help "Bytes received or transmitted per interface (/proc/net/dev).";

        /// Counter, `device`, `direction`: network packets.
        NETWORK_PACKETS_TOTAL = "greenpipe_node_network_packets_total", Counter, unit "", labels [label::DEVICE, label::DIRECTION],
            help "Packets received or transmitted per interface (/proc/net/dev).";

        /// Counter: context switches.
        CONTEXT_SWITCHES_TOTAL = "greenpipe_node_context_switches_total", Counter, unit "", labels [],
            help "Context switches since boot (/proc/stat).";

        /// Gauge: runnable processes.
        PROCS_RUNNING = "greenpipe_node_procs_running", Gauge, unit "", labels [],
            help "Runnable processes (/proc/stat).";

        /// Gauge, `board`, `hypervisor`, `cpu_family`, `profile`: always 1.
        BOARD_INFO = "greenpipe_node_board_info", Gauge, unit "", labels [label::BOARD, label::HYPERVISOR, label::CPU_FAMILY, label::PROFILE],
            help "What greenpipe-exporter board detected: the board (unknown if none), the hypervisor of a guest (none on bare metal), the processor family with per-vCPU figures (unknown if none) and the bundled uncalibrated profile that fits; always 1.";
    }

    /// Container-level resource metrics written by the exporter.
    container {
        /// Counter, `source`: CPU seconds used by the container's cgroup.
        CPU_SECONDS_TOTAL = "greenpipe_container_cpu_seconds_total", Counter, unit "seconds", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "CPU time used by the container (source=\"cgroup\": cpu.stat usage_usec / cpuacct.usage; source=\"bpf\": on-CPU time from sched_switch); system = node busy time not used by containers.";

        /// Gauge: memory charged to the cgroup.
        MEMORY_BYTES = "greenpipe_container_memory_bytes", Gauge, unit "bytes", labels [label::CONTAINER_ID, label::POD_UID],
            help "Memory charged to the container's cgroup, page cache included (memory.current / memory.usage_in_bytes).";

        /// Counter, `direction`, `source`: block I/O bytes.
        DISK_BYTES_TOTAL = "greenpipe_container_disk_bytes_total", Counter, unit "bytes", labels [label::CONTAINER_ID, label::POD_UID, label::DIRECTION, label::SOURCE],
            help "Bytes read or written by the container on whole disks (source=\"cgroup\": io.stat / blkio; source=\"bpf\": block I/O submitted by its tasks).";

        /// Counter, `direction`, `source`: network bytes.
        NETWORK_BYTES_TOTAL = "greenpipe_container_network_bytes_total", Counter, unit "bytes", labels [label::CONTAINER_ID, label::POD_UID, label::DIRECTION, label::SOURCE],
            help "Bytes received or transmitted by the container (source=\"procfs\": its own network namespace, /proc/<pid>/net/dev; source=\"bpf\": socket payload of its tasks).";

        /// Gauge: processes (thread-group leaders) in the cgroup.
        PROCESSES = "greenpipe_container_processes", Gauge, unit "", labels [label::CONTAINER_ID, label::POD_UID],
            help "Processes in the container's cgroup and its descendants (cgroup.procs).";

        /// Counter, `source`: CPU cycles.
        CPU_CYCLES_TOTAL = "greenpipe_container_cpu_cycles_total", Counter, unit "", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "CPU cycles of the container's tasks (scaled for multiplexing).";

        /// Counter, `source`: retired instructions.
        CPU_INSTRUCTIONS_TOTAL = "greenpipe_container_cpu_instructions_total", Counter, unit "", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "Instructions retired by the container's tasks (scaled for multiplexing).";

        /// Counter, `source`: cache misses.
        CACHE_MISSES_TOTAL = "greenpipe_container_cache_misses_total", Counter, unit "", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "Cache misses of the container's tasks (scaled for multiplexing).";

        /// Counter, `source`: page-cache hits.
        PAGE_CACHE_HITS_TOTAL = "greenpipe_container_page_cache_hits_total", Counter, unit "", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "Pages the container's read() calls found in the page cache.";

        /// Counter, `source`: pages added to the page cache (misses filled and newly written pages).
        PAGE_CACHE_ADDITIONS_TOTAL = "greenpipe_container_page_cache_additions_total", Counter, unit "", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "Pages the container added to the page cache (misses filled, new pages written).";

        /// Counter, `source`: GPU-busy seconds of the container, summed over GPUs.
        GPU_SECONDS_TOTAL = "greenpipe_container_gpu_seconds_total", Counter, unit "seconds", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "GPU-busy time of the container, summed over GPUs (source=\"nvml\": its processes' GPU utilisation from NVML; source=\"device_holders\": the GPU's busy time split evenly over the containers holding the GPU device open); system = GPU time no container was given.";

        /// Gauge, `source`: GPU memory used by the container's processes.
        GPU_MEMORY_BYTES = "greenpipe_container_gpu_memory_bytes", Gauge, unit "bytes", labels [label::CONTAINER_ID, label::POD_UID, label::SOURCE],
            help "GPU memory used by the container's processes, summed over GPUs (NVML).";
    }

    /// Per-process metrics (opt-in, top-N by CPU).
    process {
        /// Counter, `pid`, `comm`, `container_id`: CPU seconds of the process.
        CPU_SECONDS_TOTAL = "greenpipe_process_cpu_seconds_total", Counter, unit "seconds", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
            help "CPU time of the process, for the top-N by recent CPU (source=\"procfs\": /proc/<pid>/stat utime + stime; source=\"bpf\": sched_switch).";

        /// Gauge: resident memory of the process.
        RESIDENT_MEMORY_BYTES = "greenpipe_process_resident_memory_bytes", Gauge, unit "bytes", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
            help "Resident memory of the process, for the top-N by recent CPU (/proc/<pid>/stat).";

        /// Counter, `source`: pages the process's read() calls found in the page cache (eBPF
        /// per-process accounting).
        PAGE_CACHE_HITS_TOTAL = "greenpipe_process_page_cache_hits_total", Counter, unit "", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
            help "Pages the process's read() calls found in the page cache.";

        /// Counter, `source`: pages the process added to the page cache.
        PAGE_CACHE_ADDITIONS_TOTAL = "greenpipe_process_page_cache_additions_total", Counter, unit "", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE],
            help "Pages the process added to the page cache (misses filled, new pages written).";

        /// Counter, `direction`, `source`: block I/O bytes the process submitted.
        DISK_BYTES_TOTAL = "greenpipe_process_disk_bytes_total", Counter, unit "bytes", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE, label::DIRECTION],
            help "Block I/O bytes submitted by the process.";

        /// Counter, `direction`, `source`: socket payload bytes the process sent or received.
        NETWORK_BYTES_TOTAL = "greenpipe_process_network_bytes_total", Counter, unit "bytes", labels [label::PID, label::COMM, label::CONTAINER_ID, label::SOURCE, label::DIRECTION],
            help "Socket payload bytes moved by the process.";
    }

    /// Power-meter readings written by the exporter.
    meter {
        /// Gauge, `meter`, `kind`: measured power.
        POWER_WATTS = "greenpipe_meter_power_watts", Gauge, unit "watts", labels [label::METER, label::KIND],
            help "Power measured by the meter.";

        /// Counter: energy, from the device's counter or integrated from power.
        ENERGY_JOULES_TOTAL = "greenpipe_meter_energy_joules_total", Counter, unit "joules", labels [label::METER, label::KIND],
            help "Energy measured by the meter since the exporter started: the device's counter where it has one, else power integrated by the exporter. Never decreases.";

        /// Gauge: bus voltage.
        VOLTAGE_VOLTS = "greenpipe_meter_voltage_volts", Gauge, unit "volts", labels [label::METER, label::KIND],
            help "Bus voltage measured by the meter.";

        /// Gauge: current.
        CURRENT_AMPERES = "greenpipe_meter_current_amperes", Gauge, unit "amperes", labels [label::METER, label::KIND],
            help "Current measured by the meter.";

        /// Gauge: 1 when the last read succeeded.
        UP = "greenpipe_meter_up", Gauge, unit "", labels [label::METER, label::KIND],
            help "1 if the meter's last read succeeded.";

        /// Counter, `reason`: failed reads.
        READ_ERRORS_TOTAL = "greenpipe_meter_read_errors_total", Counter, unit "", labels [label::METER, label::KIND, label::REASON],
            help "Failed meter reads by reason.";

        /// Gauge: unix time of the last good reading.
        LAST_READING_TIMESTAMP_SECONDS = "greenpipe_meter_last_reading_timestamp_seconds", Gauge, unit "seconds", labels [label::METER, label::KIND],
            help "Unix time of the meter's last good reading.";

        /// Gauge: temperature of the meter itself (RDTech UM series, Shelly).
        TEMPERATURE_CELSIUS = "greenpipe_meter_temperature_celsius", Gauge, unit "celsius", labels [label::METER, label::KIND],
            help "Temperature of the meter itself.";

        /// Gauge: 1 when the energy total is power integrated by the exporter (the device keeps
        /// no energy counter, e.g. a GPU that NVML gives power but no total energy for).
        ENERGY_INTEGRATED = "greenpipe_meter_energy_integrated", Gauge, unit "", labels [label::METER, label::KIND],
            help "1 if greenpipe_meter_energy_joules_total is power integrated over time by the exporter because the device keeps no energy counter, 0 if it follows the device's counter.";
    }

    /// GPU metrics written by the exporter's `gpu` collector (NVML, or a Jetson's sysfs).
    gpu {
        /// Counter, `gpu`: the device's utilisation integrated over time.
        BUSY_SECONDS_TOTAL = "greenpipe_gpu_busy_seconds_total", Counter, unit "seconds", labels [label::GPU],
            help "GPU-busy time: the device's utilisation (NVML utilization.gpu, a Jetson's gpu load) integrated over time by the exporter.";

        /// Gauge, `gpu`: utilisation now.
        UTILIZATION_RATIO = "greenpipe_gpu_utilization_ratio", Gauge, unit "ratio", labels [label::GPU],
            help "Fraction of the last sample period in which the GPU ran a kernel (NVML utilization.gpu, a Jetson's gpu load).";

        /// Gauge, `gpu`: memory-controller utilisation.
        MEMORY_UTILIZATION_RATIO = "greenpipe_gpu_memory_utilization_ratio", Gauge, unit "ratio", labels [label::GPU],
            help "Fraction of the last sample period in which GPU memory was read or written (NVML utilization.memory).";

        /// Gauge, `gpu`: memory in use.
        MEMORY_USED_BYTES = "greenpipe_gpu_memory_used_bytes", Gauge, unit "bytes", labels [label::GPU],
            help "GPU memory in use (NVML memory info).";

        /// Gauge, `gpu`: the clock the GPU runs at.
        FREQUENCY_HERTZ = "greenpipe_gpu_frequency_hertz", Gauge, unit "hertz", labels [label::GPU],
            help "GPU clock: the SM clock (NVML), a Jetson GPU's devfreq cur_freq.";

        /// Gauge, `gpu`, `gpu_model`, `uuid`: always 1.
        INFO = "greenpipe_gpu_info", Gauge, unit "", labels [label::GPU, label::GPU_MODEL, label::UUID],
            help "The GPUs the gpu collector reads; always 1.";

        /// Gauge, `power_mode`: always 1 (Jetson).
        POWER_MODE_INFO = "greenpipe_gpu_power_mode_info", Gauge, unit "", labels [label::POWER_MODE],
            help "A Jetson's nvpmodel power mode as ID:NAME, which sets the GPU and CPU clocks; always 1.";
    }

    /// The exporter's metrics about itself.
    exporter {
        /// Gauge, `version`: always 1.
        BUILD_INFO = "greenpipe_exporter_build_info", Gauge, unit "", labels [label::VERSION],
            help "Build information of the exporter; always 1.";

        /// Gauge, `collector`: 1 if the collector's last run succeeded.
        COLLECTOR_SUCCESS = "greenpipe_exporter_collector_success", Gauge, unit "", labels [label::COLLECTOR],
            help "1 if the collector's last run succeeded.";

        /// Gauge, `collector`: wall time of the collector's last run.
        COLLECTOR_DURATION_SECONDS = "greenpipe_exporter_collector_duration_seconds", Gauge, unit "seconds", labels [label::COLLECTOR],
            help "Wall time of the collector's last run.";

        /// Gauge, `collector`, `reason`: 1 if the collector's sources exist on this host.
        COLLECTOR_AVAILABLE = "greenpipe_exporter_collector_available", Gauge, unit "", labels [label::COLLECTOR, label::REASON],
            help "1 if the collector's source exists on this host; reason says why not.";

        /// Counter, `collector`: malformed input lines skipped.
        MALFORMED_LINES_TOTAL = "greenpipe_exporter_malformed_lines_total", Counter, unit "", labels [label::COLLECTOR],
            help "Malformed source lines skipped by the collector.";

        /// Gauge: wall time of the last whole collection cycle.
        COLLECTION_DURATION_SECONDS = "greenpipe_exporter_collection_duration_seconds", Gauge, unit "seconds", labels [],
            help "Wall time of the previous whole collection cycle.";

        /// Counter: collection cycles run.
        COLLECTIONS_TOTAL = "greenpipe_exporter_collections_total", Counter, unit "", labels [],
            help "Collection cycles run.";

        /// Gauge: unix time of the sample being served.
        LAST_COLLECTION_TIMESTAMP_SECONDS = "greenpipe_exporter_last_collection_timestamp_seconds", Gauge, unit "seconds", labels [],
            help "Unix time at which the served sample was taken.";

        /// Counter: CPU seconds (user + system) used by the exporter process.
        CPU_SECONDS_TOTAL = "greenpipe_exporter_cpu_seconds_total", Counter, unit "seconds", labels [],
            help "User and system CPU time used by the exporter process.";

        /// Gauge: resident memory of the exporter process.
        RESIDENT_MEMORY_BYTES = "greenpipe_exporter_resident_memory_bytes", Gauge, unit "bytes", labels [],
            help "Resident memory of the exporter process.";

        /// Gauge, `program`, `reason`: 1 if the BPF program is attached, 0 with the reason if not.
        BPF_PROGRAM_ATTACHED = "greenpipe_exporter_bpf_program_attached", Gauge, unit "", labels [label::PROGRAM, label::REASON],
            help "1 if the BPF program is attached; reason says why not.";

        /// Gauge: cgroups held in the BPF counters map (bounded; removed cgroups are deleted).
        BPF_CGROUPS_TRACKED = "greenpipe_exporter_bpf_cgroups_tracked", Gauge, unit "", labels [],
            help "cgroups held in the BPF counters map.";

        /// Gauge: processes held in the BPF per-process map (0 with per-process accounting off;
        /// bounded; exited processes are deleted).
        BPF_PROCESSES_TRACKED = "greenpipe_exporter_bpf_processes_tracked", Gauge, unit "", labels [],
            help "Processes held in the BPF per-process map.";

        /// Gauge: perf-event file descriptors the hardware-counter collector holds open.
        PERF_EVENTS_OPEN = "greenpipe_exporter_perf_events_open", Gauge, unit "", labels [],
            help "perf-event descriptors held by the hardware-counter collector.";

        /// Counter: samples pushed by remote write and acknowledged (`--push.remote-write-url`).
        PUSH_SAMPLES_SENT_TOTAL = "greenpipe_exporter_push_samples_sent_total", Counter, unit "", labels [],
            help "Samples pushed by remote write and acknowledged by the receiver.";

        /// Counter, `reason`: pushed samples dropped unsent ([`super::reason::PushDropped`]).
        PUSH_SAMPLES_DROPPED_TOTAL = "greenpipe_exporter_push_samples_dropped_total", Counter, unit "", labels [label::REASON],
            help "Samples that will not be pushed: older than --push.buffer.max-age, over --push.buffer.max-bytes, refused by the receiver (4xx but 429), in a corrupt segment, behind a full queue, or not written to disk.";

        /// Counter: push requests that failed and are retried.
        PUSH_FAILURES_TOTAL = "greenpipe_exporter_push_failures_total", Counter, unit "", labels [],
            help "Push requests that failed and are retried (network errors, HTTP 5xx and 429).";

        /// Gauge: 1 if the last push request got the receiver's answer, 0 if it is retried.
        PUSH_RECEIVER_UP = "greenpipe_exporter_push_receiver_up", Gauge, unit "", labels [],
            help "1 if the last push request got an answer from the receiver (2xx or a refusal), 0 if it failed and is retried.";

        /// Gauge: bytes of the push buffer's segment files.
        PUSH_BUFFER_BYTES = "greenpipe_exporter_push_buffer_bytes", Gauge, unit "bytes", labels [],
            help "Size of the on-disk push buffer (samples not yet acknowledged).";

        /// Gauge: segment files in the push buffer.
        PUSH_BUFFER_SEGMENTS = "greenpipe_exporter_push_buffer_segments", Gauge, unit "", labels [],
            help "Segment files in the on-disk push buffer.";

        /// Gauge: unix time of the oldest sample not yet acknowledged.
        PUSH_OLDEST_UNSENT_TIMESTAMP_SECONDS = "greenpipe_exporter_push_oldest_unsent_timestamp_seconds", Gauge, unit "seconds", labels [],
            help "Unix time of the oldest sample not yet acknowledged by the receiver; the newest sample pushed when none is waiting.";
    }

    /// Predictions written by the estimator through remote write (`node` is on every series).
    estimate {
        /// Gauge, `node`, `model`: predicted node power.
        NODE_POWER_WATTS = "greenpipe_node_power_watts", Gauge, unit "watts", labels [label::MODEL],
            help "Predicted node power.";

        /// Gauge, `node`, `model`: the idle part of the node prediction.
        NODE_IDLE_POWER_WATTS = "greenpipe_node_idle_power_watts", Gauge, unit "watts", labels [label::MODEL],
            help "The idle part of the node power prediction.";

        /// Gauge, `node`, `model`: prediction minus the node's power-meter reading, where a meter
        /// exists (positive: the model over-estimates).
        NODE_POWER_ERROR_WATTS = "greenpipe_node_power_error_watts", Gauge, unit "watts", labels [label::MODEL],
            help "Prediction minus the node's power-meter reading, where a meter exists (positive: the model over-estimates).";

        /// Gauge, `node`, `model`: `|prediction - meter| / meter` at each tick, where a meter reads
        /// more than 0 W. Averaged over time it is the model's live MAPE (as a ratio); the recording
        /// rules keep it as [`LIVE_MAPE_RATIO`] over 10 minutes and 1 hour, `recalibrate` reads it.
        NODE_POWER_ABS_ERROR_RATIO = "greenpipe_node_power_abs_error_ratio", Gauge, unit "ratio", labels [label::MODEL],
            help "|prediction - meter| / meter at each tick where the node's meter reads more than 0 W; its mean over time is the model's live MAPE.";

        /// Gauge, `node`, `container_id`, `pod_uid`, `model`, `component`: power attributed to a
        /// container (`container_id="system"` for host processes); summed over containers and
        /// components it equals the node's prediction.
        CONTAINER_POWER_WATTS = "greenpipe_container_power_watts", Gauge, unit "watts", labels [label::CONTAINER_ID, label::POD_UID, label::MODEL, label::COMPONENT],
            help "Power attributed to a container (container_id=\"system\" for host processes); summed over containers and components it equals the node's prediction.";

        /// Counter, labels of [`NODE_POWER_WATTS`]: predicted node energy, the sum of power x tick
        /// length over every tick written; resumed from its last written value after a restart, so
        /// `increase()` over a range is the energy of that range.
        NODE_ENERGY_JOULES_TOTAL = "greenpipe_node_energy_joules_total", Counter, unit "joules", labels [label::MODEL],
            help "Predicted node energy: power times tick length summed over every tick written, resumed from its last written value after a restart.";

        /// Counter, labels of [`CONTAINER_POWER_WATTS`]: energy attributed to a container, per
        /// component, accumulated like [`NODE_ENERGY_JOULES_TOTAL`].
        CONTAINER_ENERGY_JOULES_TOTAL = "greenpipe_container_energy_joules_total", Counter, unit "joules", labels [label::CONTAINER_ID, label::POD_UID, label::MODEL, label::COMPONENT],
            help "Energy attributed to a container, per component, accumulated like greenpipe_node_energy_joules_total.";

        /// Gauge, `node`, `model`: the node's GPUs' power as their `nvml` meters read it.
        NODE_GPU_POWER_WATTS = "greenpipe_node_gpu_power_watts", Gauge, unit "watts", labels [label::MODEL],
            help "Power of the node's GPUs, measured by their nvml meters and summed; a part of the node's power (model: the node's model, which splits it over containers by GPU-busy time).";

        /// Counter, labels of [`NODE_GPU_POWER_WATTS`]: its energy.
        NODE_GPU_ENERGY_JOULES_TOTAL = "greenpipe_node_gpu_energy_joules_total", Counter, unit "joules", labels [label::MODEL],
            help "Energy of the node's GPUs: greenpipe_node_gpu_power_watts times tick length summed, resumed from its last written value after a restart.";

        /// Gauge, `shard`: value = the tick's own unix time. Written last for every tick, so the
        /// estimator finds where it left off after a restart from its own output.
        TICK_TIMESTAMP_SECONDS = "greenpipe_estimator_tick_timestamp_seconds", Gauge, unit "seconds", labels [label::SHARD],
            help "Unix time of the tick, written last for every tick: where the estimator resumes after a restart.";
    }

    /// The estimator's metrics about itself (its own `/metrics`).
    estimator {
        /// Counter: ticks estimated and written (live and backfilled).
        TICKS_TOTAL = "greenpipe_estimator_ticks_total", Counter, unit "", labels [],
            help "Ticks estimated and written.";

        /// Counter: ticks estimated during catch-up after an outage.
        TICKS_BACKFILLED_TOTAL = "greenpipe_estimator_ticks_backfilled_total", Counter, unit "", labels [],
            help "Ticks estimated while catching up after an outage.";

        /// Counter: ticks given up because they were older than `--backfill.max-age`.
        TICKS_ABANDONED_TOTAL = "greenpipe_estimator_ticks_abandoned_total", Counter, unit "", labels [],
            help "Ticks older than --backfill.max-age, given up.";

        /// Gauge: seconds between now and the last tick written.
        LAG_SECONDS = "greenpipe_estimator_lag_seconds", Gauge, unit "seconds", labels [],
            help "Seconds between now and the last tick written.";

        /// Gauge: unix time of the last tick written.
        LAST_TICK_TIMESTAMP_SECONDS = "greenpipe_estimator_last_tick_timestamp_seconds", Gauge, unit "seconds", labels [],
            help "Unix time of the last tick written.";

        /// Counter, `query`, `outcome`: PromQL requests.
        QUERIES_TOTAL = "greenpipe_estimator_queries_total", Counter, unit "", labels [label::QUERY, label::OUTCOME],
            help "PromQL requests by query and outcome (ok, http_<status>, timeout, network_error, partial, error).";

        /// Counter, `query`: warnings attached to otherwise successful PromQL answers.
        QUERY_WARNINGS_TOTAL = "greenpipe_estimator_query_warnings_total", Counter, unit "", labels [label::QUERY],
            help "Warnings attached to successful PromQL answers, by query.";

        /// Histogram, `query`: PromQL request wall time.
        QUERY_DURATION_SECONDS = "greenpipe_estimator_query_duration_seconds", Histogram, unit "seconds", labels [label::QUERY],
            help "PromQL request wall time.";

        /// Counter: samples accepted by the remote-write receiver.
        SAMPLES_WRITTEN_TOTAL = "greenpipe_estimator_samples_written_total", Counter, unit "", labels [],
            help "Samples accepted by the remote-write receiver.";

        /// Counter: samples sent again after a retryable failure.
        SAMPLES_RETRIED_TOTAL = "greenpipe_estimator_samples_retried_total", Counter, unit "", labels [],
            help "Samples sent again after a retryable failure.";

        /// Counter, `reason`: samples given up (e.g. `http_400`).
        SAMPLES_DROPPED_TOTAL = "greenpipe_estimator_samples_dropped_total", Counter, unit "", labels [label::REASON],
            help "Samples given up, by reason.";

        /// Counter, `outcome`: remote-write requests by HTTP status (or `network_error`).
        REMOTE_WRITE_REQUESTS_TOTAL = "greenpipe_estimator_remote_write_requests_total", Counter, unit "", labels [label::OUTCOME],
            help "Remote-write requests by HTTP status or network_error.";

        /// Counter, `reason`: node estimates skipped (missing or non-finite features, no model).
        NODES_SKIPPED_TOTAL = "greenpipe_estimator_nodes_skipped_total", Counter, unit "", labels [label::REASON],
            help "Node estimates skipped, by reason.";

        /// Gauge: node estimates written by the last tick.
        NODES_ESTIMATED = "greenpipe_estimator_nodes_estimated", Gauge, unit "", labels [],
            help "Node estimates written by the last tick.";

        /// Gauge, `model`: 1 for every model loaded from the model file.
        MODELS_LOADED = "greenpipe_estimator_models_loaded", Gauge, unit "", labels [label::MODEL],
            help "1 for every model in force (versioned label: name@vN after recalibrations).";

        /// Counter, `outcome` (`applied`|`refused`): model sets read again after a change of the
        /// `--models` file or directory, or a SIGHUP.
        MODEL_RELOADS_TOTAL = "greenpipe_estimator_model_reloads_total", Counter, unit "", labels [label::OUTCOME],
            help "Model sets read again after a file change or SIGHUP, by outcome (applied or refused).";

        /// Gauge: 1 when the last model file read was loaded, 0 when it was refused (the previous
        /// models stay in use).
        MODEL_RELOAD_SUCCESS = "greenpipe_estimator_model_reload_success", Gauge, unit "", labels [],
            help "1 if the last model files read were loaded, 0 if refused (the previous models stay).";

        /// Counter, `outcome`: OTLP export requests by HTTP status (or `network_error`).
        OTLP_REQUESTS_TOTAL = "greenpipe_estimator_otlp_requests_total", Counter, unit "", labels [label::OUTCOME],
            help "OTLP export requests by HTTP status or network_error.";

        /// Counter: OTLP data points accepted by the receiver.
        OTLP_POINTS_WRITTEN_TOTAL = "greenpipe_estimator_otlp_points_written_total", Counter, unit "", labels [],
            help "OTLP data points accepted by the receiver.";

        /// Counter, `reason`: OTLP data points given up (`queue_full`, `http_400`, `partial_success`).
        OTLP_POINTS_DROPPED_TOTAL = "greenpipe_estimator_otlp_points_dropped_total", Counter, unit "", labels [label::REASON],
            help "OTLP data points given up, by reason.";
    }

    /// The metrics of `greenpipe-estimator recalibrate` about itself (its own `/metrics`).
    recalibrate {
        /// Gauge, `node`, `model`: live MAPE (ratio) over `--error-window`, as last checked.
        LIVE_ERROR_RATIO = "greenpipe_recalibrate_live_error_ratio", Gauge, unit "ratio", labels [label::MODEL],
            help "Live MAPE (ratio) over --error-window, by node and model, at the last check.";

        /// Counter, `model`, `outcome` (`accepted`|`rejected`|`failed`): refits attempted.
        REFITS_TOTAL = "greenpipe_recalibrate_refits_total", Counter, unit "", labels [label::MODEL, label::OUTCOME],
            help "Refits attempted, by model and outcome (accepted, rejected or failed).";

        /// Histogram: CPU time of one refit (fit and both scorings), seconds.
        REFIT_CPU_SECONDS = "greenpipe_recalibrate_refit_cpu_seconds", Histogram, unit "seconds", labels [],
            help "CPU time of one refit (fit and scoring).";

        /// Counter, `outcome` (`ok`|`error`): error checks against Prometheus.
        CHECKS_TOTAL = "greenpipe_recalibrate_checks_total", Counter, unit "", labels [label::OUTCOME],
            help "Live-error checks against Prometheus, by outcome (ok or error).";
    }

    /// The DNN inference and benchmark workloads' own `/metrics` (`greenpipe-workload`), read by
    /// the campaign and by joules-per-inference queries.
    workload {
        /// Counter: inferences completed, with the configuration as labels.
        INFERENCES_TOTAL = "greenpipe_workload_inferences_total", Counter, unit "", labels [label::WORKLOAD, label::MODEL, label::PRECISION, label::ENGINE, label::THREADS, label::MODE],
            help "Inferences completed (one per image: a batch of B counts B).";

        /// Histogram: latency of one inference call.
        INFERENCE_DURATION_SECONDS = "greenpipe_workload_inference_duration_seconds", Histogram, unit "seconds", labels [label::WORKLOAD, label::MODEL, label::PRECISION, label::ENGINE, label::THREADS, label::MODE],
            help "Latency of one inference call (a whole batch); for the client, request to answer.";

        /// Counter: benchmark operations, in the unit the label names.
        OPERATIONS_TOTAL = "greenpipe_workload_operations_total", Counter, unit "", labels [label::WORKLOAD, label::GROUP, label::UNIT],
            help "Benchmark operations completed, in the unit the label names (bytes, flops, requests, ...).";

        /// Counter: failed inference requests by gRPC status code name.
        REQUEST_ERRORS_TOTAL = "greenpipe_workload_request_errors_total", Counter, unit "", labels [label::WORKLOAD, label::CODE],
            help "Inference requests that failed, by gRPC status code name.";

        /// Gauge: 1 while a run window is open.
        RUNNING = "greenpipe_workload_running", Gauge, unit "", labels [label::WORKLOAD, label::GROUP],
            help "1 while a run window of this workload is open.";
    }

    /// Grid carbon intensity and carbon-aware placement (written by `greenpipe-carbon` through
    /// remote write).
    carbon {
        /// Gauge: grid carbon intensity, gCO2(eq)/kWh; `horizon_hours` on forecasts only.
        GRID_CARBON_INTENSITY_GRAMS_PER_KWH = "greenpipe_grid_carbon_intensity_grams_per_kwh", Gauge, unit "", labels [label::ZONE, label::SOURCE, label::KIND, label::HORIZON_HOURS],
            help "Grid carbon intensity in grams of CO2(eq) per kWh, actual or forecast (horizon_hours ahead).";

        /// Gauge, with `node`: always 1, maps nodes to grid zones for the emissions rules.
        NODE_GRID_ZONE_INFO = "greenpipe_node_grid_zone_info", Gauge, unit "", labels [label::ZONE],
            help "Always 1: the grid zone of a node (with node), for the emissions rules.";
    }
}

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

    #[test]
    fn a_series_that_differs_from_its_declaration_is_refused() {
        let cpus = &node::CPUS;
        assert_eq!(check_series(cpus, &[]), None);
        let as_counter = Family {
            kind: Type::Counter,
            ..node::CPUS
        };
        assert!(check_series(&as_counter, &[]).is_some());
        let other_help = Family {
            help: "Something else.",
            ..node::CPUS
        };
        assert!(check_series(&other_help, &[]).is_some());
        let disk = &node::DISK_BYTES_TOTAL;
        let ok = [(label::DEVICE, "sda"), (label::DIRECTION, "read")];
        assert_eq!(check_series(disk, &ok), None);
        let bad_value = [(label::DEVICE, "sda"), (label::DIRECTION, "in")];
        assert!(check_series(disk, &bad_value).is_some());
        let bad_key = [(label::DEVICE, "sda"), (label::MODE, "user")];
        assert!(check_series(disk, &bad_key).is_some());
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

    /// The README and the exporter's reference spell the busy-CPU rule out in words; both must
    /// say exactly what `cpu_mode` computes.
    #[test]
    fn prose_busy_cpu_sentences_are_the_definition() {
        let want = format!(
            "every mode but {}, i.e. `{}`",
            cpu_mode::NOT_BUSY.join(", "),
            cpu_mode::busy_matcher()
        );
        for (file, text) in [
            ("README.md", include_str!("../../README.md")),
            ("docs/exporter.md", include_str!("../../docs/exporter.md")),
        ] {
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                flat.contains(&want),
                "{file} does not say busy CPU is {want:?}"
            );
        }
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
                if name.contains("_emissions_") {
                    continue; // the emissions recording rules, not families anyone emits
                }
                let f = family(name)
                    .unwrap_or_else(|| panic!("README documents undeclared family {name}"));
                assert_eq!(kind, f.kind.as_str(), "README type of {name}");
            }
        }
    }
}
