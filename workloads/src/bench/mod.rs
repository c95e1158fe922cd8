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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::ModelError;
use crate::peer::PeerError;

/// Why a benchmark could not be chosen, prepared or run; each names the flag, file, peer or
/// kernel problem involved (the benchmark and the level are added by the caller).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("unknown benchmark group {0:?}: expected micro, combined or kernels")]
    UnknownGroup(String),
    #[error("unknown --kernels.set {0:?}: expected device or server")]
    UnknownKernelSet(String),
    #[error("--scratch {}", dir.display())]
    Scratch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A scratch file could not be opened, written, read, synced or seeked (`op` says which).
    #[error("{op} {}", path.display())]
    File {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "opening {} with O_DIRECT (the scratch directory's filesystem must support direct I/O: \
         tmpfs before Linux 6.6, overlayfs and some FUSE filesystems do not)",
        path.display()
    )]
    OpenDirect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Talking to the echo peer or the request-loop server failed (`op` says at which step).
    #[error("{op} {addr}")]
    Network {
        op: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The in-process peer or request-loop server did not start.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// A DeepBench problem's one-operator model could not be built or run; `problem` is its
    /// DeepBench sizes.
    #[error("{problem}")]
    Kernel {
        problem: String,
        #[source]
        source: ModelError,
    },
    #[error("every {kind} problem exceeds --kernels.max-bytes {max_bytes}")]
    TooLarge { kind: &'static str, max_bytes: u64 },
    #[error("no worker threads")]
    NoWorkers,
    #[error("worker thread {worker} panicked")]
    WorkerPanicked { worker: usize },
}

/// `op` on the scratch file `path` failed.
pub(super) fn file_error<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> BenchError + 'a {
    move |source| BenchError::File {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// `op` with the peer or server at `addr` failed.
pub(super) fn network_error<'a>(
    op: &'static str,
    addr: &'a str,
) -> impl FnOnce(std::io::Error) -> BenchError + 'a {
    move |source| BenchError::Network {
        op,
        addr: addr.to_string(),
        source,
    }
}

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

    pub fn parse(s: &str) -> Result<Group, BenchError> {
        match s {
            "micro" => Ok(Group::Micro),
            "combined" => Ok(Group::Combined),
            "kernels" => Ok(Group::Kernels),
            _ => Err(BenchError::UnknownGroup(s.to_string())),
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
pub type Work = Box<dyn FnMut() -> Result<u64, BenchError> + Send>;

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
    pub prepare: fn(&Env) -> Result<Prepared, BenchError>,
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
) -> Result<StepResult, BenchError> {
    let deadline = Instant::now() + duration;
    let busy = PERIOD.mul_f64(f64::from(level.clamp(1, 100)) / 100.0);
    let results: Vec<Result<u64, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|mut work| {
                let stop = stop.clone();
                s.spawn(move || -> Result<u64, BenchError> {
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
            .enumerate()
            .map(|(worker, h)| {
                h.join()
                    .unwrap_or(Err(BenchError::WorkerPanicked { worker }))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env(scratch: PathBuf, peer: Option<String>) -> Env {
        Env {
            threads: 1,
            scratch,
            peer,
            memory_bytes: 1 << 20,
            disk_bytes: 1 << 20,
            kernel_max_bytes: 0,
            kernel_set: kernels::Set::Device,
            seed: 1,
        }
    }

    fn prepare(name: &str, env: &Env) -> BenchError {
        let b = all().into_iter().find(|b| b.name == name).expect(name);
        match (b.prepare)(env) {
            Ok(_) => panic!("{name} prepared"),
            Err(e) => e,
        }
    }

    #[test]
    fn errors_name_the_scratch_directory_the_peer_and_the_flag_with_the_reason_once() {
        // --scratch below a regular file: the OS says "Not a directory".
        let file = tempfile::NamedTempFile::new().unwrap();
        let scratch = file.path().join("sub");
        let text = crate::error_chain(&prepare("page-cache", &env(scratch.clone(), None)));
        assert!(
            text.starts_with(&format!("--scratch {}: ", scratch.display())),
            "{text}"
        );
        assert_eq!(text.matches("os error").count(), 1, "{text}");

        // A peer address nothing listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        let err = prepare(
            "network-tcp",
            &env(PathBuf::from("/tmp"), Some(addr.clone())),
        );
        assert!(matches!(err, BenchError::Network { .. }), "{err:?}");
        let text = crate::error_chain(&err);
        assert!(
            text.starts_with(&format!("connecting to the TCP peer {addr}: ")),
            "{text}"
        );
        assert_eq!(text.matches("os error").count(), 1, "{text}");

        // Every kernel problem above --kernels.max-bytes 0 (without tract no kernel runs at all).
        let text = crate::error_chain(&prepare("gemm-f32", &env(PathBuf::from("/tmp"), None)));
        if cfg!(feature = "tract") {
            assert_eq!(text, "every GEMM problem exceeds --kernels.max-bytes 0");
        }

        assert_eq!(
            Group::parse("macro").unwrap_err().to_string(),
            "unknown benchmark group \"macro\": expected micro, combined or kernels"
        );
        assert_eq!(
            kernels::Set::parse("cloud").unwrap_err().to_string(),
            "unknown --kernels.set \"cloud\": expected device or server"
        );
    }

    #[test]
    fn a_failing_or_panicking_worker_fails_the_step_and_says_which() {
        let stop = Arc::new(AtomicBool::new(false));
        let run = |workers: Vec<Work>| {
            run_step(workers, 100, Duration::from_secs(5), stop.clone(), &|_| {})
        };
        let fails: Work = Box::new(|| {
            Err(BenchError::File {
                op: "reading",
                path: PathBuf::from("/scratch/f0"),
                source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            })
        });
        let err = run(vec![fails]).unwrap_err();
        assert!(
            crate::error_chain(&err).starts_with("reading /scratch/f0: "),
            "{err}"
        );

        let counts: Work = Box::new(|| Ok(1));
        let panics: Work = Box::new(|| panic!("deliberate worker panic"));
        let stopper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::Relaxed);
            })
        };
        let err = run(vec![counts, panics]).unwrap_err();
        stopper.join().unwrap();
        assert!(
            matches!(err, BenchError::WorkerPanicked { worker: 1 }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "worker thread 1 panicked");
    }
}
