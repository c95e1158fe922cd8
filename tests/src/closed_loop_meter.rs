//! TEST FIXTURE, never a product default: an emulated UM25C on a pty (the real wire protocol, via
//! `greenpipe_exporter::meter::um_emulator`) whose reported power follows a stated function of
//! this machine's real load, read from `/proc` every second:
//!
//! `P = IDLE_WATTS + CPU_WATTS · (busy CPU-seconds per second) + DISK_WATTS_PER_BYTE · (disk
//! bytes per second) + noise`, noise uniform in ±`NOISE_WATTS`.
//!
//! Busy CPU time is `/proc/stat`'s `cpu` line without idle, iowait and steal (as the exporter counts it); disk bytes are the sectors
//! read and written of whole disks in `/proc/diskstats` (as the exporter counts them). The energy
//! group of the frame integrates the same power, so the meter's own energy counter agrees.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use greenpipe_exporter::meter::um_emulator::Emulator;
use greenpipe_exporter::meter::usb_um::{DataGroup, Frame, Model};

/// Power with nothing running, W.
pub const IDLE_WATTS: f64 = 3.0;
/// W per busy CPU-second per second.
pub const CPU_WATTS: f64 = 2.5;
/// W per disk byte per second (50 MB/s → 1 W).
pub const DISK_WATTS_PER_BYTE: f64 = 2e-8;
/// Half-width of the uniform noise, W.
pub const NOISE_WATTS: f64 = 0.02;

/// The emulated function without noise.
pub fn power(cpu_busy_per_second: f64, disk_bytes_per_second: f64) -> f64 {
    IDLE_WATTS + CPU_WATTS * cpu_busy_per_second + DISK_WATTS_PER_BYTE * disk_bytes_per_second
}

fn busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq (guest is inside user already; steal is time
    // the hypervisor gave to others, not work here).
    let busy: f64 = v
        .iter()
        .take(7)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy / hz
}

fn disk_bytes() -> f64 {
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    stats
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = *f.get(2)?;
            let whole = Path::new("/sys/block").join(name).exists();
            let virt = ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p));
            (whole && !virt).then(|| {
                let read: f64 = f.get(5)?.parse().ok()?;
                let written: f64 = f.get(9)?.parse().ok()?;
                Some((read + written) * 512.0)
            })?
        })
        .sum()
}

/// The running meter; stops (and unplugs) on drop.
pub struct ClosedLoopMeter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClosedLoopMeter {
    /// Plugs the meter in behind `link` (pass `um25c:<link>` to the exporter's `--meter`).
    pub fn start(link: &Path) -> std::io::Result<ClosedLoopMeter> {
        let mut frame = Frame::zero(Model::Um25c);
        frame.voltage_volts = 5.0;
        frame.power_watts = IDLE_WATTS;
        frame.current_amperes = IDLE_WATTS / 5.0;
        frame.temperature_celsius = 30.0;
        frame.temperature_fahrenheit = 86.0;
        let emulator = Emulator::start(link, frame)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("closed-loop-meter".into())
            .spawn(move || {
                let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
                let mut noise = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * NOISE_WATTS
                };
                let (mut busy, mut disk, mut at) = (busy_seconds(), disk_bytes(), Instant::now());
                let mut milliwatt_hours = 0.0;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1000));
                    let (b, d, t) = (busy_seconds(), disk_bytes(), Instant::now());
                    let dt = t.duration_since(at).as_secs_f64().max(1e-3);
                    let watts = power((b - busy).max(0.0) / dt, (d - disk).max(0.0) / dt) + noise();
                    milliwatt_hours += watts * dt / 3.6;
                    (busy, disk, at) = (b, d, t);
                    emulator.update(|f| {
                        f.power_watts = (watts * 1000.0).round() / 1000.0;
                        f.current_amperes = watts / f.voltage_volts;
                        f.groups[0] = DataGroup {
                            milliamp_hours: (milliwatt_hours / 5.0) as u32,
                            milliwatt_hours: milliwatt_hours as u32,
                        };
                    });
                }
                drop(emulator);
            })?;
        Ok(ClosedLoopMeter {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ClosedLoopMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
