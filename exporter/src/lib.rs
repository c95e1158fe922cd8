//! GreenPipe exporter: samples procfs, sysfs, cgroups (and, where the kernel allows, eBPF,
//! perf events and power meters) once per interval and serves the latest sample on `/metrics`.
//!
//! Data flow: [`config`] turns flags and the optional TOML file into a [`config::Config`];
//! [`sampler`] builds the enabled collectors from [`collector::REGISTRY`], runs them once per
//! tick on its own thread and publishes an encoded [`metrics::MetricSet`]; [`http`] serves the
//! last published text. Scrapes never trigger collection work. With `--push.remote-write-url`,
//! [`push`] also sends every tick by remote write, through a bounded on-disk buffer.

pub mod board;
pub mod bpf;
pub mod cgroup_ids;
pub mod cgroup_watch;
pub mod collector;
pub mod config;
pub mod http;
pub mod meter;
pub mod metrics;
pub mod nvml;
pub mod paths;
pub mod push;
pub mod sampler;
pub mod selfstat;
