//! The training benchmarks: *micro* (one resource at a time), *combined* (mixes that look like
//! inference without being it) and *kernels* (DeepBench's inference GEMM and convolution sizes).
//!
//! Every benchmark is swept over load levels: a level is the share of each 100 ms period that
//! each worker thread spends working (the rest it sleeps), so 25/50/75/100 % step the
//! resource's use the way stress-ng's `--cpu-load` does, for disk and network too. One sweep
//! step is one run window in the campaign log and one `greenpipe_workload_operations_total`
//! increment stream, with an idle gap between steps so the power model sees the transitions.
//!
//! Everything is in Rust rather than stress-ng: the operation counts then come from the code
//! that did the work, and the container image needs no shell or extra packages.

pub mod combined;
pub mod deepbench;
pub mod kernels;
pub mod micro;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;

/// The three groups of the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Micro,
    Combined,
    Kernels,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Micro => "micro",
            Group::Combined => "combined",
            Group::Kernels => "kernels",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Group> {
        match s {
            "micro" => Ok(Group::Micro),
            "combined" => Ok(Group::Combined),
            "kernels" => Ok(Group::Kernels),
            _ => bail!("unknown benchmark group {s:?}: expected micro, combined or kernels"),
        }
    }
}

/// What a benchmark may use.
#[derive(Debug, Clone)]
pub struct Env {
    /// Worker threads per step.
    pub threads: usize,
    /// Directory for the page-cache and disk benchmarks' files.
    pub scratch: PathBuf,
    /// TCP/UDP echo peer (`greenpipe-workload peer`); `None` starts one on loopback.
    pub peer: Option<String>,
    /// Memory-bandwidth working set in bytes, split over the threads.
    pub memory_bytes: usize,
    /// Disk benchmark file size in bytes.
    pub disk_bytes: usize,
    /// Kernel problems whose f32 operands exceed this are skipped (DeepBench's server set
    /// has 2 GB ones).
    pub kernel_max_bytes: u64,
    /// DeepBench table of the kernel benchmarks.
    pub kernel_set: kernels::Set,
    /// Weight seed of the kernel operands.
    pub seed: u64,
}

/// A unit of work a worker thread repeats; returns the operations it did.
pub type Work = Box<dyn FnMut() -> anyhow::Result<u64> + Send>;

/// One prepared sweep step: a worker per thread, and the parameters for the campaign log.
pub struct Prepared {
    pub workers: Vec<Work>,
    /// Extra configuration for the campaign log (sizes, precision, …).
    pub params: serde_json::Value,
    /// Cleanup to run after the step (stop an in-process peer, remove files).
    pub guard: Option<Box<dyn Send>>,
}

/// A benchmark: name, group, unit of its operations, and how to prepare a step.
pub struct Benchmark {
    pub name: &'static str,
    pub group: Group,
    pub unit: &'static str,
    pub prepare: fn(&Env) -> anyhow::Result<Prepared>,
}

impl std::fmt::Debug for Benchmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {})", self.name, self.group.name(), self.unit)
    }
}

/// Every benchmark, in run order.
pub fn all() -> Vec<Benchmark> {
    let mut v = micro::benchmarks();
    v.extend(combined::benchmarks());
    v.extend(kernels::benchmarks());
    v
}

/// Period of the duty cycle.
const PERIOD: Duration = Duration::from_millis(100);

/// Result of one step.
#[derive(Debug, Clone, Copy)]
pub struct StepResult {
    pub operations: u64,
    pub complete: bool,
}

/// Runs every worker on its own thread at `level` percent for `duration` (or until `stop`).
pub fn run_step(
    workers: Vec<Work>,
    level: u32,
    duration: Duration,
    stop: Arc<AtomicBool>,
    on_ops: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<StepResult> {
    let deadline = Instant::now() + duration;
    let busy = PERIOD.mul_f64(f64::from(level.clamp(1, 100)) / 100.0);
    let results: Vec<anyhow::Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|mut work| {
                let stop = stop.clone();
                s.spawn(move || -> anyhow::Result<u64> {
                    let mut total = 0u64;
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        let period_start = Instant::now();
                        while period_start.elapsed() < busy
                            && Instant::now() < deadline
                            && !stop.load(Ordering::Relaxed)
                        {
                            let n = work()?;
                            total += n;
                            on_ops(n);
                        }
                        let rest = PERIOD.saturating_sub(period_start.elapsed());
                        let rest = rest.min(deadline.saturating_duration_since(Instant::now()));
                        if !rest.is_zero() {
                            std::thread::sleep(rest);
                        }
                    }
                    Ok(total)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("worker panicked")))
            })
            .collect()
    });
    let mut operations = 0;
    for r in results {
        operations += r?;
    }
    Ok(StepResult {
        operations,
        complete: !stop.load(Ordering::Relaxed),
    })
}

/// A small, fast, seeded generator for benchmark data and access patterns.
pub fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}
