//! The NVML source of the `gpu` collector: every GPU NVML sees, through the process's one
//! handle ([`crate::nvml`]).
//!
//! Per device and tick: `nvmlDeviceGetUtilizationRates` (gpu and memory, percent of the last
//! sample period), `nvmlDeviceGetMemoryInfo` (used bytes), `nvmlDeviceGetClockInfo(SM)` (MHz);
//! name and UUID once, at open. Per process: `nvmlDeviceGetProcessUtilization` with the
//! timestamp of the newest sample seen, so each call returns only new samples (their SM
//! utilisation is averaged per process; `NOT_FOUND` = no new sample = no user this tick), and
//! the used GPU memory of the running compute and graphics processes (a process in both lists
//! is counted once). A call a GPU answers `NOT_SUPPORTED` leaves its value out, logged once;
//! any other error (a GPU fallen off the bus) fails the tick with the GPU and call named.

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
    scratch: Usages,
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
        scratch: Usages::default(),
    }))
}

/// One process's values on one device while a sample is put together: SM utilisation summed
/// over its samples, how many, and its used memory.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Usage {
    pid: u32,
    utilization_sum: f64,
    samples: u32,
    memory: Option<f64>,
}

/// The processes of one device, reused across ticks.
#[derive(Debug, Default)]
struct Usages(Vec<Usage>);

impl Usages {
    fn entry(&mut self, pid: u32) -> &mut Usage {
        let i = match self.0.iter().position(|u| u.pid == pid) {
            Some(i) => i,
            None => {
                self.0.push(Usage {
                    pid,
                    utilization_sum: 0.0,
                    samples: 0,
                    memory: None,
                });
                self.0.len() - 1
            }
        };
        &mut self.0[i]
    }

    /// One `nvmlProcessUtilizationSample_t`: SM utilisation in percent.
    fn utilization(&mut self, pid: u32, sm_percent: u32) {
        let u = self.entry(pid);
        u.utilization_sum += f64::from(sm_percent) / 100.0;
        u.samples += 1;
    }

    /// One running process's used memory; a process listed twice (compute and graphics)
    /// counts once.
    fn memory(&mut self, pid: u32, bytes: u64) {
        let m = self.entry(pid).memory.get_or_insert(0.0);
        *m = m.max(bytes as f64);
    }

    /// The processes of device `gpu`: mean utilisation over their samples (0 for a process
    /// that only holds memory).
    fn samples<'a>(&'a self, gpu: &'a str) -> impl Iterator<Item = ProcessSample> + 'a {
        self.0.iter().map(move |u| ProcessSample {
            pid: u.pid,
            gpu: gpu.to_string(),
            utilization_ratio: if u.samples == 0 {
                0.0
            } else {
                u.utilization_sum / f64::from(u.samples)
            },
            memory_used_bytes: u.memory,
        })
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
            scratch.0.clear();
            let samples = match device.process_utilization_stats(gpu.last_seen_us) {
                Err(NvmlError::NotFound) => Some(Vec::new()),
                other => optional(i, "process utilization", other)
                    .map_err(|e| failure(i, "process utilization", e))?,
            };
            for s in samples.iter().flatten() {
                gpu.last_seen_us = gpu.last_seen_us.max(s.timestamp);
                scratch.utilization(s.pid, s.sm_util);
            }
            for (what, list) in [
                ("compute processes", device.running_compute_processes()),
                ("graphics processes", device.running_graphics_processes()),
            ] {
                let list = optional(i, what, list).map_err(|e| failure(i, what, e))?;
                for p in list.iter().flatten() {
                    if let UsedGpuMemory::Used(bytes) = p.used_gpu_memory {
                        scratch.memory(p.pid, bytes);
                    }
                }
            }
            processes.extend(scratch.samples(&gpu.template.gpu));
        }
        Ok(Sample {
            devices,
            users: Users::Processes(processes),
            power_mode: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_samples_are_averaged_and_memory_counted_once() {
        let mut u = Usages::default();
        u.utilization(7, 50);
        u.utilization(7, 70);
        u.memory(7, 100);
        u.memory(7, 300); // also a graphics process: the larger, not the sum
        u.memory(9, 42); // holds memory, no utilisation sample
        u.utilization(11, 5);
        let got: Vec<ProcessSample> = u.samples("0").collect();
        let want = |pid, utilization_ratio, memory_used_bytes| ProcessSample {
            pid,
            gpu: "0".into(),
            utilization_ratio,
            memory_used_bytes,
        };
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].pid, 7);
        assert!((got[0].utilization_ratio - 0.6).abs() < 1e-12);
        assert_eq!(got[0].memory_used_bytes, Some(300.0));
        assert_eq!(got[1], want(9, 0.0, Some(42.0)));
        assert_eq!(got[2], want(11, 0.05, None));
    }
}
