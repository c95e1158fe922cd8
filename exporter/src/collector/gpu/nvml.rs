//! The NVML source of the `gpu` collector: every GPU NVML sees, through the process's one
//! handle ([`crate::nvml`]).
//!
//! Per device and tick: `nvmlDeviceGetUtilizationRates` (gpu and memory, percent of the last
//! sample period), `nvmlDeviceGetMemoryInfo` (used bytes), `nvmlDeviceGetClockInfo(SM)` (MHz);
//! name and UUID once, at open. Per process: `nvmlDeviceGetProcessUtilization` with the
//! timestamp of the newest sample seen, so each call returns only new samples (their SM
//! utilisation is averaged per process; `NOT_FOUND` = no new sample = no user this tick), and
//! the used GPU memory of the running compute and graphics processes (a process in both lists
//! is counted once). A call a GPU answers `NOT_SUPPORTED` leaves its value out, logged once.

use std::sync::Arc;

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{DeviceSample, ProcessSample, Sample, Source, Users};
use crate::collector::{CollectError, Context, Failure};
use crate::nvml::{device_count, handle, optional};

/// One GPU as opened.
struct Gpu {
    index: u32,
    /// Its `gpu` label, name and UUID, copied into every sample.
    template: DeviceSample,
    /// Timestamp (µs) of the newest per-process sample seen.
    last_seen_us: u64,
}

struct NvmlSource {
    nvml: Arc<Nvml>,
    gpus: Vec<Gpu>,
    /// (pid, utilisation sum, samples, memory) of one device, reused across ticks.
    scratch: Vec<(u32, f64, u32, Option<f64>)>,
}

fn failure(index: u32, what: &str, e: NvmlError) -> CollectError {
    Failure::Nvml(format!("GPU {index}: {what}: {e}")).into()
}

/// Opens NVML and reads every GPU's name and UUID; unavailable without the library, the
/// driver or a GPU.
pub fn open(_ctx: &Context<'_>) -> Result<Box<dyn Source>, CollectError> {
    let nvml = handle().map_err(CollectError::Unavailable)?;
    let count = device_count(&nvml).map_err(CollectError::Unavailable)?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let device = nvml
            .device_by_index(index)
            .map_err(|e| failure(index, "handle", e))?;
        let model = optional(index, "name", device.name())
            .map_err(|e| failure(index, "name", e))?
            .unwrap_or_default();
        let uuid = optional(index, "UUID", device.uuid())
            .map_err(|e| failure(index, "UUID", e))?
            .unwrap_or_default();
        tracing::info!(gpu = index, %model, %uuid, "NVML GPU");
        gpus.push(Gpu {
            index,
            template: DeviceSample {
                gpu: index.to_string(),
                model,
                uuid,
                ..DeviceSample::default()
            },
            last_seen_us: 0,
        });
    }
    Ok(Box::new(NvmlSource {
        nvml,
        gpus,
        scratch: Vec::new(),
    }))
}

/// Accumulates one process's values in `scratch`.
fn entry(scratch: &mut Vec<(u32, f64, u32, Option<f64>)>, pid: u32) -> usize {
    match scratch.iter().position(|e| e.0 == pid) {
        Some(i) => i,
        None => {
            scratch.push((pid, 0.0, 0, None));
            scratch.len() - 1
        }
    }
}

impl NvmlSource {
    fn device_sample(gpu: &Gpu, device: &Device<'_>) -> Result<DeviceSample, CollectError> {
        let i = gpu.index;
        let util = optional(i, "utilization rates", device.utilization_rates())
            .map_err(|e| failure(i, "utilization rates", e))?;
        let memory = optional(i, "memory info", device.memory_info())
            .map_err(|e| failure(i, "memory info", e))?;
        let clock = optional(i, "SM clock", device.clock_info(Clock::SM))
            .map_err(|e| failure(i, "SM clock", e))?;
        Ok(DeviceSample {
            utilization_ratio: util.as_ref().map(|u| f64::from(u.gpu) / 100.0),
            memory_utilization_ratio: util.as_ref().map(|u| f64::from(u.memory) / 100.0),
            memory_used_bytes: memory.map(|m| m.used as f64),
            frequency_hertz: clock.map(|mhz| f64::from(mhz) * 1e6),
            ..gpu.template.clone()
        })
    }
}

impl Source for NvmlSource {
    fn sample(&mut self) -> Result<Sample, CollectError> {
        let mut devices = Vec::with_capacity(self.gpus.len());
        let mut processes = Vec::new();
        for gpu in &mut self.gpus {
            let i = gpu.index;
            let device = self
                .nvml
                .device_by_index(i)
                .map_err(|e| failure(i, "handle", e))?;
            devices.push(Self::device_sample(gpu, &device)?);
            let scratch = &mut self.scratch;
            scratch.clear();
            let samples = match device.process_utilization_stats(gpu.last_seen_us) {
                Err(NvmlError::NotFound) => Some(Vec::new()),
                other => optional(i, "process utilization", other)
                    .map_err(|e| failure(i, "process utilization", e))?,
            };
            for s in samples.iter().flatten() {
                gpu.last_seen_us = gpu.last_seen_us.max(s.timestamp);
                let e = entry(scratch, s.pid);
                scratch[e].1 += f64::from(s.sm_util) / 100.0;
                scratch[e].2 += 1;
            }
            for (what, list) in [
                ("compute processes", device.running_compute_processes()),
                ("graphics processes", device.running_graphics_processes()),
            ] {
                let list = optional(i, what, list).map_err(|e| failure(i, what, e))?;
                for p in list.iter().flatten() {
                    let UsedGpuMemory::Used(bytes) = p.used_gpu_memory else {
                        continue;
                    };
                    let e = entry(scratch, p.pid);
                    let m = scratch[e].3.get_or_insert(0.0);
                    *m = m.max(bytes as f64);
                }
            }
            processes.extend(scratch.iter().map(|&(pid, sum, n, memory)| ProcessSample {
                pid,
                gpu: gpu.template.gpu.clone(),
                utilization_ratio: if n == 0 { 0.0 } else { sum / f64::from(n) },
                memory_used_bytes: memory,
            }));
        }
        Ok(Sample {
            devices,
            users: Users::Processes(processes),
            power_mode: None,
        })
    }
}
