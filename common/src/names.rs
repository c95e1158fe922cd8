//! Every metric name and label key of GreenPipe: the only place they are spelled.
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
}

/// Node-level resource metrics written by the exporter.
pub mod node {
    /// Counter, `mode`: CPU seconds by mode, summed over CPUs (`/proc/stat`).
    pub const CPU_SECONDS_TOTAL: &str = "greenpipe_node_cpu_seconds_total";
    /// Gauge: number of online logical CPUs.
    pub const CPUS: &str = "greenpipe_node_cpus";
    /// Gauge, `cpu`: current frequency per logical CPU (cpufreq).
    pub const CPU_FREQUENCY_HERTZ: &str = "greenpipe_node_cpu_frequency_hertz";
    /// Gauge, `state`: memory from `/proc/meminfo`.
    pub const MEMORY_BYTES: &str = "greenpipe_node_memory_bytes";
    /// Counter, `event`: page-cache and paging activity from `/proc/vmstat`.
    pub const PAGE_CACHE_EVENTS_TOTAL: &str = "greenpipe_node_page_cache_events_total";
    /// Counter, `device`, `direction`: bytes moved by whole disks.
    pub const DISK_BYTES_TOTAL: &str = "greenpipe_node_disk_bytes_total";
    /// Counter, `device`, `direction`: completed disk operations.
    pub const DISK_OPERATIONS_TOTAL: &str = "greenpipe_node_disk_operations_total";
    /// Counter, `device`, `direction`: network bytes.
    pub const NETWORK_BYTES_TOTAL: &str = "greenpipe_node_network_bytes_total";
    /// Counter, `device`, `direction`: network packets.
    pub const NETWORK_PACKETS_TOTAL: &str = "greenpipe_node_network_packets_total";
    /// Counter: context switches.
    pub const CONTEXT_SWITCHES_TOTAL: &str = "greenpipe_node_context_switches_total";
    /// Gauge: runnable processes.
    pub const PROCS_RUNNING: &str = "greenpipe_node_procs_running";
}

/// Container-level (cgroup) resource metrics written by the exporter.
pub mod container {
    /// Counter, `source`: CPU seconds used by the container's cgroup.
    pub const CPU_SECONDS_TOTAL: &str = "greenpipe_container_cpu_seconds_total";
    /// Gauge: memory charged to the cgroup.
    pub const MEMORY_BYTES: &str = "greenpipe_container_memory_bytes";
    /// Counter, `direction`, `source`: block I/O bytes.
    pub const DISK_BYTES_TOTAL: &str = "greenpipe_container_disk_bytes_total";
    /// Counter, `direction`, `source`: network bytes.
    pub const NETWORK_BYTES_TOTAL: &str = "greenpipe_container_network_bytes_total";
    /// Gauge: processes (thread-group leaders) in the cgroup.
    pub const PROCESSES: &str = "greenpipe_container_processes";
    /// Counter, `source`: CPU cycles.
    pub const CPU_CYCLES_TOTAL: &str = "greenpipe_container_cpu_cycles_total";
    /// Counter, `source`: retired instructions.
    pub const CPU_INSTRUCTIONS_TOTAL: &str = "greenpipe_container_cpu_instructions_total";
    /// Counter, `source`: cache misses.
    pub const CACHE_MISSES_TOTAL: &str = "greenpipe_container_cache_misses_total";
    /// Counter, `source`: page-cache hits.
    pub const PAGE_CACHE_HITS_TOTAL: &str = "greenpipe_container_page_cache_hits_total";
    /// Counter, `source`: pages added to the page cache (misses filled and newly written pages).
    pub const PAGE_CACHE_ADDITIONS_TOTAL: &str = "greenpipe_container_page_cache_additions_total";
}

/// Per-process metrics (opt-in, top-N by CPU).
pub mod process {
    /// Counter, `pid`, `comm`, `container_id`: CPU seconds of the process.
    pub const CPU_SECONDS_TOTAL: &str = "greenpipe_process_cpu_seconds_total";
    /// Gauge: resident memory of the process.
    pub const RESIDENT_MEMORY_BYTES: &str = "greenpipe_process_resident_memory_bytes";
    /// Counter, `source`: pages the process's read() calls found in the page cache (eBPF
    /// per-process accounting).
    pub const PAGE_CACHE_HITS_TOTAL: &str = "greenpipe_process_page_cache_hits_total";
    /// Counter, `source`: pages the process added to the page cache.
    pub const PAGE_CACHE_ADDITIONS_TOTAL: &str = "greenpipe_process_page_cache_additions_total";
    /// Counter, `direction`, `source`: block I/O bytes the process submitted.
    pub const DISK_BYTES_TOTAL: &str = "greenpipe_process_disk_bytes_total";
    /// Counter, `direction`, `source`: socket payload bytes the process sent or received.
    pub const NETWORK_BYTES_TOTAL: &str = "greenpipe_process_network_bytes_total";
}

/// Power-meter readings written by the exporter.
pub mod meter {
    /// Gauge, `meter`, `kind`: measured power.
    pub const POWER_WATTS: &str = "greenpipe_meter_power_watts";
    /// Counter: energy, from the device's counter or integrated from power.
    pub const ENERGY_JOULES_TOTAL: &str = "greenpipe_meter_energy_joules_total";
    /// Gauge: bus voltage.
    pub const VOLTAGE_VOLTS: &str = "greenpipe_meter_voltage_volts";
    /// Gauge: current.
    pub const CURRENT_AMPERES: &str = "greenpipe_meter_current_amperes";
    /// Gauge: 1 when the last read succeeded.
    pub const UP: &str = "greenpipe_meter_up";
    /// Counter, `reason`: failed reads.
    pub const READ_ERRORS_TOTAL: &str = "greenpipe_meter_read_errors_total";
    /// Gauge: unix time of the last good reading.
    pub const LAST_READING_TIMESTAMP_SECONDS: &str =
        "greenpipe_meter_last_reading_timestamp_seconds";
    /// Gauge: temperature of the meter itself (RDTech UM series, Shelly).
    pub const TEMPERATURE_CELSIUS: &str = "greenpipe_meter_temperature_celsius";
}

/// The exporter's metrics about itself.
pub mod exporter {
    /// Gauge, `version`: always 1.
    pub const BUILD_INFO: &str = "greenpipe_exporter_build_info";
    /// Gauge, `collector`: 1 if the collector's last run succeeded.
    pub const COLLECTOR_SUCCESS: &str = "greenpipe_exporter_collector_success";
    /// Gauge, `collector`: wall time of the collector's last run.
    pub const COLLECTOR_DURATION_SECONDS: &str = "greenpipe_exporter_collector_duration_seconds";
    /// Gauge, `collector`, `reason`: 1 if the collector's sources exist on this host.
    pub const COLLECTOR_AVAILABLE: &str = "greenpipe_exporter_collector_available";
    /// Counter, `collector`: malformed input lines skipped.
    pub const MALFORMED_LINES_TOTAL: &str = "greenpipe_exporter_malformed_lines_total";
    /// Gauge: wall time of the last whole collection cycle.
    pub const COLLECTION_DURATION_SECONDS: &str = "greenpipe_exporter_collection_duration_seconds";
    /// Counter: collection cycles run.
    pub const COLLECTIONS_TOTAL: &str = "greenpipe_exporter_collections_total";
    /// Gauge: unix time of the sample being served.
    pub const LAST_COLLECTION_TIMESTAMP_SECONDS: &str =
        "greenpipe_exporter_last_collection_timestamp_seconds";
    /// Counter: CPU seconds (user + system) used by the exporter process.
    pub const CPU_SECONDS_TOTAL: &str = "greenpipe_exporter_cpu_seconds_total";
    /// Gauge: resident memory of the exporter process.
    pub const RESIDENT_MEMORY_BYTES: &str = "greenpipe_exporter_resident_memory_bytes";
    /// Gauge, `program`, `reason`: 1 if the BPF program is attached, 0 with the reason if not.
    pub const BPF_PROGRAM_ATTACHED: &str = "greenpipe_exporter_bpf_program_attached";
    /// Gauge: cgroups held in the BPF counters map (bounded; removed cgroups are deleted).
    pub const BPF_CGROUPS_TRACKED: &str = "greenpipe_exporter_bpf_cgroups_tracked";
    /// Gauge: processes held in the BPF per-process map (0 with per-process accounting off;
    /// bounded; exited processes are deleted).
    pub const BPF_PROCESSES_TRACKED: &str = "greenpipe_exporter_bpf_processes_tracked";
    /// Gauge: perf-event file descriptors the hardware-counter collector holds open.
    pub const PERF_EVENTS_OPEN: &str = "greenpipe_exporter_perf_events_open";
}

/// Predictions written by the estimator through remote write.
pub mod estimate {
    /// Gauge, `node`, `model`: predicted node power.
    pub const NODE_POWER_WATTS: &str = "greenpipe_node_power_watts";
    /// Gauge, `node`, `model`: the idle part of the node prediction.
    pub const NODE_IDLE_POWER_WATTS: &str = "greenpipe_node_idle_power_watts";
    /// Gauge, `node`, `model`: prediction minus the node's power-meter reading, where a meter
    /// exists (positive: the model over-estimates).
    pub const NODE_POWER_ERROR_WATTS: &str = "greenpipe_node_power_error_watts";
    /// Gauge, `node`, `model`: `|prediction - meter| / meter` at each tick, where a meter reads
    /// more than 0 W. Averaged over time it is the model's live MAPE (as a ratio); the recording
    /// rules keep it as [`LIVE_MAPE_RATIO`] over 10 minutes and 1 hour, `recalibrate` reads it.
    pub const NODE_POWER_ABS_ERROR_RATIO: &str = "greenpipe_node_power_abs_error_ratio";
    /// Recording rule, `node`, `model`, `window` (`10m`|`1h`): mean of
    /// [`NODE_POWER_ABS_ERROR_RATIO`] over the window.
    pub const LIVE_MAPE_RATIO: &str = "greenpipe_estimator_live_mape_ratio";
    /// Label key of [`LIVE_MAPE_RATIO`]: the averaging window.
    pub const WINDOW: &str = "window";
    /// Gauge, `node`, `container_id`, `pod_uid`, `model`, `component`: power attributed to a
    /// container (`container_id="system"` for host processes); summed over containers and
    /// components it equals the node's prediction.
    pub const CONTAINER_POWER_WATTS: &str = "greenpipe_container_power_watts";
    /// Counter, labels of [`NODE_POWER_WATTS`]: predicted node energy, the sum of power x tick
    /// length over every tick written; resumed from its last written value after a restart, so
    /// `increase()` over a range is the energy of that range.
    pub const NODE_ENERGY_JOULES_TOTAL: &str = "greenpipe_node_energy_joules_total";
    /// Counter, labels of [`CONTAINER_POWER_WATTS`]: energy attributed to a container, per
    /// component, accumulated like [`NODE_ENERGY_JOULES_TOTAL`].
    pub const CONTAINER_ENERGY_JOULES_TOTAL: &str = "greenpipe_container_energy_joules_total";
    /// Gauge, `shard`: value = the tick's own unix time. Written last for every tick, so the
    /// estimator finds where it left off after a restart from its own output.
    pub const TICK_TIMESTAMP_SECONDS: &str = "greenpipe_estimator_tick_timestamp_seconds";
}

/// The estimator's metrics about itself (its own `/metrics`).
pub mod estimator {
    /// Counter: ticks estimated and written (live and backfilled).
    pub const TICKS_TOTAL: &str = "greenpipe_estimator_ticks_total";
    /// Counter: ticks estimated during catch-up after an outage.
    pub const TICKS_BACKFILLED_TOTAL: &str = "greenpipe_estimator_ticks_backfilled_total";
    /// Counter: ticks given up because they were older than `--backfill.max-age`.
    pub const TICKS_ABANDONED_TOTAL: &str = "greenpipe_estimator_ticks_abandoned_total";
    /// Gauge: seconds between now and the last tick written.
    pub const LAG_SECONDS: &str = "greenpipe_estimator_lag_seconds";
    /// Gauge: unix time of the last tick written.
    pub const LAST_TICK_TIMESTAMP_SECONDS: &str = "greenpipe_estimator_last_tick_timestamp_seconds";
    /// Counter, `query`, `outcome`: PromQL requests.
    pub const QUERIES_TOTAL: &str = "greenpipe_estimator_queries_total";
    /// Counter, `query`: warnings attached to otherwise successful PromQL answers.
    pub const QUERY_WARNINGS_TOTAL: &str = "greenpipe_estimator_query_warnings_total";
    /// Histogram, `query`: PromQL request wall time.
    pub const QUERY_DURATION_SECONDS: &str = "greenpipe_estimator_query_duration_seconds";
    /// Counter: samples accepted by the remote-write receiver.
    pub const SAMPLES_WRITTEN_TOTAL: &str = "greenpipe_estimator_samples_written_total";
    /// Counter: samples sent again after a retryable failure.
    pub const SAMPLES_RETRIED_TOTAL: &str = "greenpipe_estimator_samples_retried_total";
    /// Counter, `reason`: samples given up (e.g. `http_400`).
    pub const SAMPLES_DROPPED_TOTAL: &str = "greenpipe_estimator_samples_dropped_total";
    /// Counter, `outcome`: remote-write requests by HTTP status (or `network_error`).
    pub const REMOTE_WRITE_REQUESTS_TOTAL: &str = "greenpipe_estimator_remote_write_requests_total";
    /// Counter, `outcome`: OTLP export requests by HTTP status (or `network_error`).
    pub const OTLP_REQUESTS_TOTAL: &str = "greenpipe_estimator_otlp_requests_total";
    /// Counter: OTLP data points accepted by the receiver.
    pub const OTLP_POINTS_WRITTEN_TOTAL: &str = "greenpipe_estimator_otlp_points_written_total";
    /// Counter, `reason`: OTLP data points given up (`queue_full`, `http_400`, `partial_success`).
    pub const OTLP_POINTS_DROPPED_TOTAL: &str = "greenpipe_estimator_otlp_points_dropped_total";
    /// Counter, `reason`: node estimates skipped (missing or non-finite features, no model).
    pub const NODES_SKIPPED_TOTAL: &str = "greenpipe_estimator_nodes_skipped_total";
    /// Gauge: node estimates written by the last tick.
    pub const NODES_ESTIMATED: &str = "greenpipe_estimator_nodes_estimated";
    /// Gauge, `model`: 1 for every model loaded from the model file.
    pub const MODELS_LOADED: &str = "greenpipe_estimator_models_loaded";
    /// Counter, `outcome` (`applied`|`refused`): model sets read again after a change of the
    /// `--models` file or directory, or a SIGHUP.
    pub const MODEL_RELOADS_TOTAL: &str = "greenpipe_estimator_model_reloads_total";
    /// Gauge: 1 when the last model file read was loaded, 0 when it was refused (the previous
    /// models stay in use).
    pub const MODEL_RELOAD_SUCCESS: &str = "greenpipe_estimator_model_reload_success";
}

/// The metrics of `greenpipe-estimator recalibrate` about itself (its own `/metrics`).
pub mod recalibrate {
    /// Gauge, `node`, `model`: live MAPE (ratio) over `--error-window`, as last checked.
    pub const LIVE_ERROR_RATIO: &str = "greenpipe_recalibrate_live_error_ratio";
    /// Counter, `model`, `outcome` (`accepted`|`rejected`|`failed`): refits attempted.
    pub const REFITS_TOTAL: &str = "greenpipe_recalibrate_refits_total";
    /// Histogram: CPU time of one refit (fit and both scorings), seconds.
    pub const REFIT_CPU_SECONDS: &str = "greenpipe_recalibrate_refit_cpu_seconds";
    /// Counter, `outcome` (`ok`|`error`): error checks against Prometheus.
    pub const CHECKS_TOTAL: &str = "greenpipe_recalibrate_checks_total";
}

/// Grid carbon intensity and carbon-aware placement (written by `greenpipe-carbon`).
pub mod carbon {
    /// Gauge, `zone`, `source`, `kind` (`actual`|`forecast`), `horizon_hours` (forecasts only):
    /// grid carbon intensity in grams of CO2(eq) per kWh.
    pub const GRID_CARBON_INTENSITY_GRAMS_PER_KWH: &str =
        "greenpipe_grid_carbon_intensity_grams_per_kwh";
    /// Gauge, `node`, `zone`: always 1; maps nodes to grid zones for the emissions rules.
    pub const NODE_GRID_ZONE_INFO: &str = "greenpipe_node_grid_zone_info";
    /// Label key: grid zone.
    pub const ZONE: &str = "zone";
    /// Label key: forecast horizon in whole hours.
    pub const HORIZON_HOURS: &str = "horizon_hours";
    /// Values of the `kind` label ([`super::label::KIND`]).
    pub const KIND_ACTUAL: &str = "actual";
    /// See [`KIND_ACTUAL`].
    pub const KIND_FORECAST: &str = "forecast";
}
