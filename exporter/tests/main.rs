//! The exporter's integration tests: one binary, so that the dependencies are linked once,
//! with a module per area named as the file it was
//! (`cargo test -p greenpipe-exporter --test integration <module>::`).

mod kernel_support;
mod support;

mod board_detection;
mod bpf_accounting;
mod bpf_churn;
mod bpf_fallback;
mod bpf_process;
mod bpf_process_churn;
mod cgroup_watch;
mod golden;
mod gpu_nvml;
mod meter_smart_plug;
mod meter_sysfs;
mod meter_usb_pty;
mod packaging;
mod parsers_fuzz;
