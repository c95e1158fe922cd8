//! NVIDIA GPUs through NVML (`libnvidia-ml.so.1`, loaded at run time: see [`crate::nvml`]).
//!
//! Per GPU: power from `nvmlDeviceGetPowerUsage` (mW) and the device's energy counter from
//! `nvmlDeviceGetTotalEnergyConsumption` (mJ since the driver was loaded; Volta and newer). A GPU
//! without the counter (`NOT_SUPPORTED`) gets its energy integrated from power by the meter
//! collector (`greenpipe_meter_energy_integrated 1`); one with neither cannot be metered and is
//! left out with that reason. Channels are named `gpu<index>`, the NVML index.

use std::sync::Arc;
use std::time::Instant;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use super::energy::CounterRate;
use super::{Detected, DeviceEnergy, KindDef, ReadError, Reading, Reason};
use crate::nvml::{device_count, handle, optional, warn_once};

const TARGET_HELP: &str =
    "`auto` (every GPU), an NVML index (0) or a GPU UUID (GPU-8f6a...), as nvidia-smi -L shows";

/// `nvml:auto`, `nvml:0`, `nvml:GPU-...`.
pub static KIND: KindDef = KindDef {
    name: "nvml",
    target_help: TARGET_HELP,
    about: "NVIDIA GPUs through NVML (libnvidia-ml.so.1): board power and energy counter",
    reasons: &[Reason::Unplugged, Reason::BadResponse, Reason::Io],
    check_target,
    build: |spec, _, _| Ok(super::prefixed(spec, build(&spec.target)?)),
    detect: |_, _| Detected::listed("nvml", build("auto")),
};

fn check_target(target: &str) -> Result<(), String> {
    if target == "auto" || target.parse::<u32>().is_ok() || target.starts_with("GPU-") {
        Ok(())
    } else {
        Err(format!("not a GPU: give {TARGET_HELP}"))
    }
}

/// One GPU.
#[derive(Debug)]
pub struct NvmlMeter {
    nvml: Arc<Nvml>,
    index: u32,
    has_power: bool,
    has_energy: bool,
    rate: CounterRate,
}

/// The channels of `nvml:<target>`, or why there are none.
pub fn build(target: &str) -> Result<Vec<(String, NvmlMeter)>, String> {
    let nvml = handle()?;
    let count = device_count(&nvml)?;
    let indices: Vec<u32> = if target == "auto" {
        (0..count).collect()
    } else if let Ok(i) = target.parse::<u32>() {
        if i >= count {
            return Err(format!("no GPU {i}: NVML sees {count} (0..{})", count - 1));
        }
        vec![i]
    } else {
        let device = nvml
            .device_by_uuid(target)
            .map_err(|e| format!("no GPU {target}: {e}"))?;
        vec![device
            .index()
            .map_err(|e| format!("GPU {target}: index: {e}"))?]
    };
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for index in indices {
        match probe(&nvml, index) {
            Ok((has_power, has_energy)) => {
                if !has_energy {
                    warn_once(format!(
                        "NVML GPU {index} has no energy counter (total energy consumption \
                         not supported): its energy is integrated from power"
                    ));
                }
                out.push((
                    format!("gpu{index}"),
                    NvmlMeter {
                        nvml: nvml.clone(),
                        index,
                        has_power,
                        has_energy,
                        rate: CounterRate::default(),
                    },
                ));
            }
            Err(why) => missing.push(format!("GPU {index}: {why}")),
        }
    }
    if out.is_empty() {
        return Err(missing.join("; "));
    }
    for why in missing {
        warn_once(format!("nvml meter: {why}; left out"));
    }
    Ok(out)
}

/// Which of power and the energy counter a GPU answers; `Err` when neither.
fn probe(nvml: &Nvml, index: u32) -> Result<(bool, bool), String> {
    let device = nvml.device_by_index(index).map_err(|e| e.to_string())?;
    let supported = |r: Result<(), NvmlError>| match r {
        Ok(()) => Ok(true),
        Err(NvmlError::NotSupported) => Ok(false),
        Err(e) => Err(e.to_string()),
    };
    let power = supported(device.power_usage().map(drop))?;
    let energy = supported(device.total_energy_consumption().map(drop))?;
    if !power && !energy {
        return Err("NVML supports neither power usage nor total energy consumption".into());
    }
    Ok((power, energy))
}

fn read_error(index: u32, what: &str, e: NvmlError) -> ReadError {
    let reason = match e {
        NvmlError::GpuLost | NvmlError::InvalidArg | NvmlError::NotFound => Reason::Unplugged,
        NvmlError::Utf8Error(_) | NvmlError::UnexpectedVariant(_) => Reason::BadResponse,
        _ => Reason::Io,
    };
    ReadError::new(reason, format!("NVML GPU {index}: {what}: {e}"))
}

impl super::Meter for NvmlMeter {
    fn read(&mut self) -> Result<Reading, ReadError> {
        let now = Instant::now();
        let index = self.index;
        let device = self
            .nvml
            .device_by_index(index)
            .map_err(|e| read_error(index, "handle", e))?;
        let joules = if self.has_energy {
            optional(index, "total energy", device.total_energy_consumption())
                .map_err(|e| read_error(index, "total energy", e))?
                .map(|mj| mj as f64 / 1e3)
        } else {
            None
        };
        let power = if self.has_power {
            optional(index, "power usage", device.power_usage())
                .map_err(|e| read_error(index, "power usage", e))?
                .map(|mw| mw as f64 / 1e3)
        } else {
            joules.and_then(|j| self.rate.watts(j, None, now))
        };
        Ok(Reading {
            power_watts: power,
            energy: joules.map(|joules| DeviceEnergy {
                joules,
                epoch: 0,
                wraps_at_joules: None,
            }),
            ..Reading::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for good in [
            "auto",
            "0",
            "12",
            "GPU-8f6a3c1e-0000-1111-2222-333344445555",
        ] {
            assert!(check_target(good).is_ok(), "{good}");
        }
        for bad in ["gpu0", "-1", "/dev/nvidia0", "MIG-x"] {
            let err = check_target(bad).unwrap_err();
            assert!(err.contains("NVML index"), "{bad}: {err}");
        }
    }
}
