//! GPU sources. In this branch only the interface the `gpu` collector (issue 43, written beside
//! the NVML source) reads, and the Jetson source; the collector itself is not registered here.

use super::CollectError;

pub mod jetson;

/// One GPU's state at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceSample {
    /// `gpu` label: the NVML index ("0"), or "gpu" for a Jetson's integrated GPU.
    pub gpu: String,
    /// `gpu_model` label of greenpipe_gpu_info.
    pub model: String,
    /// `uuid` label of greenpipe_gpu_info; empty where the device has none.
    pub uuid: String,
    /// Fraction of the last period the GPU was busy, 0..=1.
    pub utilization_ratio: Option<f64>,
    /// Fraction of the last period memory was read or written.
    pub memory_utilization_ratio: Option<f64>,
    /// GPU memory in use, bytes.
    pub memory_used_bytes: Option<f64>,
    /// SM clock (NVML) or devfreq cur_freq (Jetson), hertz.
    pub frequency_hertz: Option<f64>,
}
/// One process's use of one GPU, measured (NVML).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    pub pid: u32,
    pub gpu: String,
    pub utilization_ratio: f64,
    pub memory_used_bytes: Option<f64>,
}
/// Who uses the GPUs.
#[derive(Debug, Clone, PartialEq)]
pub enum Users {
    /// Measured per process (NVML).
    Processes(Vec<ProcessSample>),
    /// Only which processes hold the GPU device open (Jetson): the device's busy time is split evenly over their containers.
    Holders(Vec<u32>),
}
/// One sample of every GPU source.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub devices: Vec<DeviceSample>,
    pub users: Users,
    pub power_mode: Option<String>,
}
/// A GPU source: NVML, or a Jetson's sysfs.
pub trait Source: Send {
    fn sample(&mut self) -> Result<Sample, CollectError>;
}
