//! **Emulated** closed-loop power meter — a test fixture, never a product default.
//!
//! A UM25C on a pty (the exporter's [`Emulator`], which speaks the meter's wire protocol byte for
//! byte) whose reported power follows a stated function of this machine's real load, read from
//! `/proc` every period:
//!
//! ```text
//! P = idle_watts + dynamic_scale · (watts_per_cpu · cpu_busy_seconds_per_second
//!                                   + watts_per_disk_byte · disk_bytes_per_second)
//!     + N(0, noise_watts²)          (seeded)
//! ```
//!
//! CPU busy time counts the `/proc/stat` modes the estimator counts (`cpu_mode::is_busy`); disk
//! bytes are the sectors read and written by whole disks in `/proc/diskstats`.
//! Rates are taken over a trailing `smoothing` window (like the 5 s `rate()` the estimator
//! reads), so the meter and the model see the same load. The data group's energy counter
//! integrates the reported power, as a real meter's does.
//!
//! The function can be changed mid-run, from the test ([`ClosedLoopMeter::set`]) or from outside
//! through the control file (`key=value` lines with the field names of [`PowerFunction`], read
//! every period), which is how a drift ("+15 % dynamic power") is injected. A campaign runner can
//! reuse it the same way.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use greenpipe_common::contract::cpu_mode;
use greenpipe_exporter::meter::um_emulator::Emulator;
use greenpipe_exporter::meter::usb_um::{DataGroup, Frame, Model};

/// The power function of the emulated meter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerFunction {
    /// Power with no load, watts.
    pub idle_watts: f64,
    /// Watts per CPU-second per second of busy time.
    pub watts_per_cpu: f64,
    /// Watts per disk byte per second.
    pub watts_per_disk_byte: f64,
    /// Factor on the dynamic part (1 = as stated; 1.15 = "+15 % dynamic power").
    pub dynamic_scale: f64,
    /// Standard deviation of the Gaussian noise added to every reading, watts.
    pub noise_watts: f64,
}

impl PowerFunction {
    /// Power at the given load, before noise.
    pub fn watts(&self, cpu_per_s: f64, disk_bytes_per_s: f64) -> f64 {
        self.idle_watts
            + self.dynamic_scale
                * (self.watts_per_cpu * cpu_per_s + self.watts_per_disk_byte * disk_bytes_per_s)
    }

    /// Applies `key=value` lines (unknown keys and bad numbers are errors).
    pub fn apply_control(&mut self, text: &str) -> Result<(), String> {
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("control line {line:?} is not key=value"))?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("control value {v:?} of {k} is not a number"))?;
            match k.trim() {
                "idle_watts" => self.idle_watts = v,
                "watts_per_cpu" => self.watts_per_cpu = v,
                "watts_per_disk_byte" => self.watts_per_disk_byte = v,
                "dynamic_scale" => self.dynamic_scale = v,
                "noise_watts" => self.noise_watts = v,
                other => return Err(format!("unknown control key {other:?}")),
            }
        }
        Ok(())
    }
}

/// One reading of the machine's load counters.
#[derive(Debug, Clone, Copy)]
struct Load {
    at: Instant,
    busy_seconds: f64,
    disk_bytes: f64,
}

fn read_load() -> Option<Load> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<f64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // The first fields are cpu_mode::ALL in kernel order (USER_HZ ticks); busy is the
    // contract's one definition, the one the estimator's readout uses.
    let busy: f64 = cpu_mode::ALL
        .iter()
        .zip(&cpu)
        .filter(|(mode, _)| cpu_mode::is_busy(mode))
        .map(|(_, ticks)| ticks)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let disks = std::fs::read_to_string("/proc/diskstats").ok()?;
    let mut sectors = 0.0;
    for line in disks.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let name = f[2];
        let virtual_dev = ["loop", "ram", "zram", "dm-"]
            .iter()
            .any(|p| name.starts_with(p));
        // Whole disks have a /sys/block entry; partitions do not.
        if virtual_dev || !Path::new("/sys/block").join(name).exists() {
            continue;
        }
        sectors += f[5].parse::<f64>().unwrap_or(0.0) + f[9].parse::<f64>().unwrap_or(0.0);
    }
    Some(Load {
        at: Instant::now(),
        busy_seconds: busy / hz,
        disk_bytes: sectors * 512.0,
    })
}

/// xorshift64* and Box–Muller: reproducible noise without a dependency.
struct Noise(u64);

impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn gaussian(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Settings of the fixture besides the function.
#[derive(Debug, Clone)]
pub struct LoopSettings {
    /// How often the load is read and the frame updated.
    pub period: Duration,
    /// Trailing window of the load rates.
    pub smoothing: Duration,
    /// Noise seed.
    pub seed: u64,
    /// Optional control file, read every period.
    pub control_file: Option<PathBuf>,
}

impl Default for LoopSettings {
    fn default() -> Self {
        LoopSettings {
            period: Duration::from_secs(1),
            smoothing: Duration::from_secs(5),
            seed: 0x5eed,
            control_file: None,
        }
    }
}

/// What the meter last reported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    /// Reported power, watts.
    pub watts: f64,
    /// CPU busy seconds per second it was computed from.
    pub cpu_per_s: f64,
    /// Disk bytes per second it was computed from.
    pub disk_bytes_per_s: f64,
}

/// The running fixture; stops (and unplugs the pty) when dropped.
pub struct ClosedLoopMeter {
    function: Arc<Mutex<PowerFunction>>,
    last: Arc<Mutex<Reading>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

const VOLTS: f64 = 5.08;

fn frame(watts: f64, milliwatt_hours: f64) -> Frame {
    let mut f = Frame::zero(Model::Um25c);
    f.voltage_volts = VOLTS;
    f.current_amperes = watts / VOLTS;
    f.power_watts = watts;
    f.temperature_celsius = 30.0;
    f.temperature_fahrenheit = 86.0;
    f.groups[0] = DataGroup {
        milliamp_hours: (milliwatt_hours / VOLTS) as u32,
        milliwatt_hours: milliwatt_hours as u32,
    };
    f
}

impl ClosedLoopMeter {
    /// Plugs an emulated UM25C in behind `link` and starts following the machine's load.
    pub fn start(
        link: &Path,
        function: PowerFunction,
        settings: LoopSettings,
    ) -> std::io::Result<ClosedLoopMeter> {
        let emulator = Emulator::start(link, frame(function.idle_watts, 0.0))?;
        let function = Arc::new(Mutex::new(function));
        let last = Arc::new(Mutex::new(Reading::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (function, last, stop) = (function.clone(), last.clone(), stop.clone());
            std::thread::Builder::new()
                .name("closed-loop-meter".into())
                .spawn(move || follow(emulator, function, last, stop, settings))?
        };
        Ok(ClosedLoopMeter {
            function,
            last,
            stop,
            thread: Some(thread),
        })
    }

    /// Changes the function from the next period on.
    pub fn set(&self, edit: impl FnOnce(&mut PowerFunction)) {
        edit(&mut self.function.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The function in force.
    pub fn function(&self) -> PowerFunction {
        *self.function.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last reading reported.
    pub fn last(&self) -> Reading {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn follow(
    emulator: Emulator,
    function: Arc<Mutex<PowerFunction>>,
    last: Arc<Mutex<Reading>>,
    stop: Arc<AtomicBool>,
    settings: LoopSettings,
) {
    let mut history: VecDeque<Load> = VecDeque::new();
    let mut noise = Noise(settings.seed | 1);
    let mut energy_mwh = 0.0;
    let mut previous: Option<(Instant, f64)> = None;
    while !stop.load(Ordering::Relaxed) {
        if let Some(path) = &settings.control_file {
            if let Ok(text) = std::fs::read_to_string(path) {
                let mut f = function.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = f.apply_control(&text) {
                    eprintln!("closed-loop meter: {}: {e}", path.display());
                }
            }
        }
        if let Some(now) = read_load() {
            history.push_back(now);
            while history
                .front()
                .is_some_and(|l| now.at.duration_since(l.at) > settings.smoothing)
            {
                history.pop_front();
            }
            let first = history.front().copied().unwrap_or(now);
            let dt = now.at.duration_since(first.at).as_secs_f64();
            if dt > 0.0 {
                let cpu = (now.busy_seconds - first.busy_seconds) / dt;
                let disk = (now.disk_bytes - first.disk_bytes) / dt;
                let f = *function.lock().unwrap_or_else(|e| e.into_inner());
                let watts = (f.watts(cpu, disk) + f.noise_watts * noise.gaussian()).max(0.0);
                if let Some((t, w)) = previous {
                    energy_mwh += w * now.at.duration_since(t).as_secs_f64() / 3.6;
                }
                previous = Some((now.at, watts));
                emulator.set_frame(frame(watts, energy_mwh));
                *last.lock().unwrap_or_else(|e| e.into_inner()) = Reading {
                    watts,
                    cpu_per_s: cpu,
                    disk_bytes_per_s: disk,
                };
            }
        }
        std::thread::sleep(settings.period);
    }
    drop(emulator);
}

impl Drop for ClosedLoopMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A process-free CPU load for the closed loop: one thread busy for a duty cycle that swings
/// slowly between `low` and `high` (share of one core) over `period`, so the load varies but
/// changes little within a `rate()` window. Stops when dropped.
pub struct SwingingLoad {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SwingingLoad {
    /// Starts the load.
    pub fn start(low: f64, high: f64, period: Duration) -> SwingingLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let slice = Duration::from_millis(20);
                while !stop.load(Ordering::Relaxed) {
                    let phase = started.elapsed().as_secs_f64() / period.as_secs_f64();
                    let duty = low
                        + (high - low) * 0.5 * (1.0 - (2.0 * std::f64::consts::PI * phase).cos());
                    let busy_until = Instant::now() + slice.mul_f64(duty.clamp(0.0, 1.0));
                    let mut x = 0u64;
                    while Instant::now() < busy_until {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    std::thread::sleep(slice.mul_f64((1.0 - duty).clamp(0.0, 1.0)));
                }
            })
        };
        SwingingLoad {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SwingingLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_change_the_function_and_bad_ones_are_named() {
        let mut f = PowerFunction {
            idle_watts: 2.0,
            watts_per_cpu: 3.0,
            watts_per_disk_byte: 0.0,
            dynamic_scale: 1.0,
            noise_watts: 0.0,
        };
        assert_eq!(f.watts(1.0, 0.0), 5.0);
        f.apply_control("# drift\ndynamic_scale = 1.15\n").unwrap();
        assert!((f.watts(1.0, 0.0) - 5.45).abs() < 1e-12);
        assert!(f.apply_control("colour=1").unwrap_err().contains("colour"));
        assert!(f
            .apply_control("idle_watts=x")
            .unwrap_err()
            .contains("idle_watts"));
    }

    #[test]
    fn noise_is_reproducible_and_roughly_standard() {
        let mut a = Noise(7);
        let mut b = Noise(7);
        let xs: Vec<f64> = (0..20_000).map(|_| a.gaussian()).collect();
        assert_eq!(
            xs[..5],
            (0..5).map(|_| b.gaussian()).collect::<Vec<_>>()[..]
        );
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }
}
