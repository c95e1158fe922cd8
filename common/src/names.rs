//! Every label key and label value of GreenPipe, and the metric names: the names of the exporter's
//! and the estimator's families are declared once, with their type, unit and help, in the
//! `families!` table of [`crate::contract`] and re-exported here by group (`names::node::CPUS`).
//!
//! The exporter writes these names, the estimator queries them and writes its own, the
//! dashboards and rules use them. Renaming one is a breaking change of the metric contract
//! documented in `docs/architecture.md`.

/// Label keys.
pub mod label {
    /// Kubernetes node name; on every series.
    pub const NODE: &str = "node";
    /// Container id (64 hex chars for containerd/CRI-O/Docker) or `system` for host processes.
    pub const CONTAINER_ID: &str = "container_id";
    /// Pod UID with dashes, empty when the cgroup path carries none.
    pub const POD_UID: &str = "pod_uid";
    /// Where a value was measured: `bpf`, `perf`, `cgroup` or `procfs`.
    pub const SOURCE: &str = "source";
    /// `read`/`write` for disks, `receive`/`transmit` for networks.
    pub const DIRECTION: &str = "direction";
    /// CPU mode from `/proc/stat` (`user`, `system`, `idle`, ...).
    pub const MODE: &str = "mode";
    /// Block or network device name.
    pub const DEVICE: &str = "device";
    /// Logical CPU number.
    pub const CPU: &str = "cpu";
    /// Memory state (`total`, `available`, `used`, ...).
    pub const STATE: &str = "state";
    /// Event name (e.g. a `/proc/vmstat` counter).
    pub const EVENT: &str = "event";
    /// Collector name.
    pub const COLLECTOR: &str = "collector";
    /// Why something is unavailable or failed.
    pub const REASON: &str = "reason";
    /// Process id (per-process metrics only).
    pub const PID: &str = "pid";
    /// Process command name (per-process metrics only).
    pub const COMM: &str = "comm";
    /// Power meter instance name.
    pub const METER: &str = "meter";
    /// Power meter kind (`um25c`, `hwmon`, `rapl`, `shelly`, ...).
    pub const KIND: &str = "kind";
    /// Name of the model that produced a prediction.
    pub const MODEL: &str = "model";
    /// Program version.
    pub const VERSION: &str = "version";
    /// BPF program name (exporter self metrics).
    pub const PROGRAM: &str = "program";
    /// Part of attributed power: `idle` or `dynamic`.
    pub const COMPONENT: &str = "component";
    /// Estimator shard, `i/n` (e.g. `0/2`).
    pub const SHARD: &str = "shard";
    /// Estimator queries only: the model feature a query result carries (added by
    /// `label_replace`, never stored).
    pub const FEATURE: &str = "feature";
    /// Outcome of an operation (`ok`, `error`, an HTTP status code, ...).
    pub const OUTCOME: &str = "outcome";
    /// Name of an estimator query (`node_features`, `container_features`, ...).
    pub const QUERY: &str = "query";
    /// The board detected (`greenpipe-exporter board`), `unknown` when none is recognised.
    pub const BOARD: &str = "board";
    /// The hypervisor of a guest, `none` on bare metal.
    pub const HYPERVISOR: &str = "hypervisor";
    /// The processor family that has per-vCPU figures, `unknown` otherwise.
    pub const CPU_FAMILY: &str = "cpu_family";
    /// The bundled uncalibrated profile that fits the board.
    pub const PROFILE: &str = "profile";
    /// Workload name (`greenpipe-workload`'s subcommand or benchmark).
    pub const WORKLOAD: &str = "workload";
    /// Numeric precision of a DNN (`f32`, `int8`, ...).
    pub const PRECISION: &str = "precision";
    /// Inference engine.
    pub const ENGINE: &str = "engine";
    /// Threads an inference engine was given.
    pub const THREADS: &str = "threads";
    /// Benchmark group.
    pub const GROUP: &str = "group";
    /// The unit a benchmark counts its operations in.
    pub const UNIT: &str = "unit";
    /// gRPC status code name.
    pub const CODE: &str = "code";
    /// Grid zone.
    pub const ZONE: &str = "zone";
    /// Forecast horizon in whole hours.
    pub const HORIZON_HOURS: &str = "horizon_hours";
    /// A GPU: its NVML index (`0`), or `gpu` for a Jetson's integrated GPU.
    pub const GPU: &str = "gpu";
    /// A GPU's product name (`NVIDIA H100 80GB HBM3`, `ga10b`).
    pub const GPU_MODEL: &str = "gpu_model";
    /// A GPU's UUID (`GPU-…`), empty where the device has none.
    pub const UUID: &str = "uuid";
    /// A Jetson's nvpmodel power mode, as `ID:NAME` (`0:MAXN`).
    pub const POWER_MODE: &str = "power_mode";
}

/// Values of the `component` label on attributed power.
pub mod component {
    /// The share of the node's idle power.
    pub const IDLE: &str = "idle";
    /// The share of the node's dynamic (above idle) power.
    pub const DYNAMIC: &str = "dynamic";
}

/// Value of `container_id` for processes that run outside any container.
pub const SYSTEM_CONTAINER: &str = "system";

/// Values of the `source` label.
pub mod source {
    /// eBPF programs.
    pub const BPF: &str = "bpf";
    /// perf events (hardware counters).
    pub const PERF: &str = "perf";
    /// cgroup files.
    pub const CGROUP: &str = "cgroup";
    /// procfs files.
    pub const PROCFS: &str = "procfs";
    /// NVML's per-process accounting (a process's share of the GPU, measured).
    pub const NVML: &str = "nvml";
    /// The GPU's busy time split evenly over the containers that hold its device node open
    /// (Jetson, where no per-process figure exists).
    pub const DEVICE_HOLDERS: &str = "device_holders";
}

/// GPU metrics written by the exporter's `gpu` collector.
///
/// The names of the families declared in [`crate::contract::gpu`].
pub use crate::contract::gpu::names as gpu;

/// Node-level resource metrics written by the exporter.
///
/// The names of the families declared in [`crate::contract::node`].
pub use crate::contract::node::names as node;

/// Container-level (cgroup) resource metrics written by the exporter.
///
/// The names of the families declared in [`crate::contract::container`].
pub use crate::contract::container::names as container;

/// Per-process metrics (opt-in, top-N by CPU).
///
/// The names of the families declared in [`crate::contract::process`].
pub use crate::contract::process::names as process;

/// Power-meter readings written by the exporter.
///
/// The names of the families declared in [`crate::contract::meter`].
pub use crate::contract::meter::names as meter;

/// The exporter's metrics about itself.
///
/// The names of the families declared in [`crate::contract::exporter`].
pub use crate::contract::exporter::names as exporter;

/// Predictions written by the estimator through remote write.
///
/// The names of the families declared in [`crate::contract::estimate`], and these.
pub mod estimate {
    pub use crate::contract::estimate::names::*;

    /// Recording rule, `node`, `model`, `window` (`10m`|`1h`): mean of
    /// [`NODE_POWER_ABS_ERROR_RATIO`] over the window.
    pub const LIVE_MAPE_RATIO: &str = "greenpipe_estimator_live_mape_ratio";
    /// Label key of [`LIVE_MAPE_RATIO`]: the averaging window.
    pub const WINDOW: &str = "window";
}

/// The estimator's metrics about itself (its own `/metrics`).
///
/// The names of the families declared in [`crate::contract::estimator`].
pub use crate::contract::estimator::names as estimator;

/// The metrics of `greenpipe-estimator recalibrate` about itself (its own `/metrics`).
///
/// The names of the families declared in [`crate::contract::recalibrate`].
pub use crate::contract::recalibrate::names as recalibrate;

/// Grid carbon intensity and carbon-aware placement (written by `greenpipe-carbon`): the
/// families declared in [`crate::contract::carbon`], and the values of its labels.
pub mod carbon {
    pub use crate::contract::carbon::names::*;
    /// Label key: grid zone ([`super::label::ZONE`]).
    pub const ZONE: &str = super::label::ZONE;
    /// Label key: forecast horizon in whole hours ([`super::label::HORIZON_HOURS`]).
    pub const HORIZON_HOURS: &str = super::label::HORIZON_HOURS;
    /// Values of the `kind` label ([`super::label::KIND`]).
    pub const KIND_ACTUAL: &str = "actual";
    /// See [`KIND_ACTUAL`].
    pub const KIND_FORECAST: &str = "forecast";
}

/// The workloads' families, declared in [`crate::contract::workload`], and the values of their
/// `mode` label.
pub mod workload {
    pub use crate::contract::workload::names::*;
    /// `mode`: inference in the workload's own process.
    pub const MODE_LOCAL: &str = "local";
    /// `mode`: inference served over the Open Inference Protocol (the server's and the
    /// client's series).
    pub const MODE_SERVED: &str = "served";
}
