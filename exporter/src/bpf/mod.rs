//! The exporter's BPF programs: load, attach and read their maps with aya.
//!
//! The objects are built by `build.rs` from `bpf/*.bpf.c`. Programs are loaded one by one so a
//! kernel that rejects one signal (an old kernel without a tracepoint, a verifier refusal) still
//! runs the others; only the on-CPU program is required. Errors keep the verifier's output.

pub mod abi;

use std::collections::BTreeMap;

use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};

use abi::{CgroupCounters, RunningSlice};

/// Per-cgroup counters map (key: cgroup id).
const COUNTERS_MAP: &str = "cgroup_counters";
/// Per-process counters map (key: tgid).
const PROCESS_MAP: &str = "process_counters";

/// `bpf/accounting.bpf.c`, compiled (or an empty stub when built without clang).
pub static ACCOUNTING_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/accounting.bpf.o"));

/// What one BPF program measures, and where it attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// On-CPU time (`sched_switch`).
    CpuTime,
    /// Pages added to the page cache.
    PageCacheAdditions,
    /// Page-cache hits of `read()`.
    PageCacheHits,
    /// Block bytes.
    DiskBytes,
    /// Socket bytes sent.
    NetworkTransmit,
    /// Socket bytes received.
    NetworkReceive,
    /// Process exits (frees per-process entries).
    ProcessExit,
}

/// (program function, BTF tracepoint, signal). The first one is required.
pub const PROGRAMS: &[(&str, &str, Signal)] = &[
    ("on_sched_switch", "sched_switch", Signal::CpuTime),
    (
        "on_page_cache_add",
        "mm_filemap_add_to_page_cache",
        Signal::PageCacheAdditions,
    ),
    (
        "on_filemap_get_pages",
        "mm_filemap_get_pages",
        Signal::PageCacheHits,
    ),
    ("on_block_bio_queue", "block_bio_queue", Signal::DiskBytes),
    (
        "on_sock_send_length",
        "sock_send_length",
        Signal::NetworkTransmit,
    ),
    (
        "on_sock_recv_length",
        "sock_recv_length",
        Signal::NetworkReceive,
    ),
    ("on_process_exit", "sched_process_exit", Signal::ProcessExit),
];

/// How to load the programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Also account per process (tgid). Off, the BPF side's per-process code is removed by the
    /// verifier and the per-process map is created with a single slot.
    pub per_process: bool,
    /// Bound of the per-process map (LRU) when `per_process` is on.
    pub max_processes: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            per_process: false,
            max_processes: DEFAULT_MAX_PROCESSES,
        }
    }
}

/// Default bound of the per-process map (`GREENPIPE_MAX_PROCESSES` in `bpf/include/greenpipe.h`).
pub const DEFAULT_MAX_PROCESSES: u32 = 8192;

/// Why the programs could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The object is the build script's empty stub.
    #[error("the BPF object is an empty stub (exporter built without clang); rebuild with GREENPIPE_BUILD_BPF=1")]
    StubObject,
    /// The kernel exposes no BTF (`/sys/kernel/btf/vmlinux`), which tp_btf programs need.
    #[error("kernel BTF unavailable: {0}")]
    NoBtf(String),
    /// Creating maps or parsing the object failed (often: not root / no CAP_BPF).
    #[error("loading the BPF object failed: {0}")]
    Object(String),
    /// The required program did not load or attach; carries the verifier's output.
    #[error("program {program} ({tracepoint}): {message}")]
    Program {
        /// Program function name.
        program: &'static str,
        /// Tracepoint it attaches to.
        tracepoint: &'static str,
        /// Error text, with the verifier log when the kernel gave one.
        message: String,
    },
    /// A map the object must define is missing or has the wrong type.
    #[error("map {0}: {1}")]
    Map(&'static str, String),
}

/// Reading or pruning a map of the loaded object failed (the kernel's reason kept).
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The map is missing from the object or has the wrong type.
    #[error(transparent)]
    Open(#[from] LoadError),
    /// A lookup of the map failed.
    #[error("reading {map}: {}", chain(.error))]
    Read {
        /// The map.
        map: &'static str,
        /// aya's error (its text, with sources, is in the message).
        error: aya::maps::MapError,
    },
    /// Deleting an entry failed.
    #[error("deleting {key} from {map}: {}", chain(.error))]
    Delete {
        /// The map.
        map: &'static str,
        /// The key (cgroup id or tgid).
        key: String,
        /// aya's error (its text, with sources, is in the message).
        error: aya::maps::MapError,
    },
}

/// The loaded accounting programs and their maps.
pub struct Accounting {
    ebpf: Ebpf,
    options: Options,
    /// Program → `None` if attached, `Some(error)` if it did not load or attach.
    pub programs: BTreeMap<&'static str, Option<String>>,
}

impl std::fmt::Debug for Accounting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounting")
            .field("programs", &self.programs)
            .finish()
    }
}

/// Error text of aya with its sources (the verifier log lives in the `Display` of the source).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        // aya's messages often embed their source already.
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

impl Accounting {
    /// Loads `object` (normally [`ACCOUNTING_OBJECT`]) with default [`Options`] (per-cgroup
    /// accounting only) and attaches every program it can.
    pub fn load(object: &[u8]) -> Result<Accounting, LoadError> {
        Self::load_with(object, Options::default())
    }

    /// Loads `object` with `options` and attaches every program it can.
    pub fn load_with(object: &[u8], options: Options) -> Result<Accounting, LoadError> {
        if object.is_empty() {
            return Err(LoadError::StubObject);
        }
        let btf = Btf::from_sys_fs().map_err(|e| LoadError::NoBtf(chain(&e)))?;
        // The task-storage map of the page-cache program has no typed wrapper in aya 0.14; the
        // kernel creates it all the same and only the BPF side uses it.
        // The flag is a `const volatile` in .rodata: set before load, the verifier sees its value
        // and drops the per-process branches when it is 0. The map is preallocated by the
        // kernel, so off it gets one slot instead of thousands.
        let slots = if options.per_process {
            options.max_processes.max(1)
        } else {
            1
        };
        let mut loader = EbpfLoader::new();
        loader
            .btf(Some(&btf))
            .allow_unsupported_maps()
            .map_max_entries(PROCESS_MAP, slots);
        if options.per_process {
            // Off is the object's own value (0).
            loader.override_global("per_process", &1u32, true);
        }
        let mut ebpf = loader
            .load(object)
            .map_err(|e| LoadError::Object(chain(&e)))?;
        let mut programs = BTreeMap::new();
        for (i, (name, tracepoint, _)) in PROGRAMS.iter().enumerate() {
            let result = attach(&mut ebpf, &btf, name, tracepoint);
            if let Err(message) = &result {
                if i == 0 {
                    return Err(LoadError::Program {
                        program: name,
                        tracepoint,
                        message: message.clone(),
                    });
                }
            }
            programs.insert(*name, result.err());
        }
        let accounting = Accounting {
            ebpf,
            options,
            programs,
        };
        // Fail now, not at the first read, if the object's maps do not match ours.
        accounting.counters_map::<u64>(COUNTERS_MAP)?;
        accounting.counters_map::<u32>(PROCESS_MAP)?;
        accounting.running_map()?;
        Ok(accounting)
    }

    /// The options the programs were loaded with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Whether the program measuring `signal` is attached.
    pub fn has(&self, signal: Signal) -> bool {
        PROGRAMS
            .iter()
            .filter(|(_, _, s)| *s == signal)
            .all(|(name, _, _)| matches!(self.programs.get(name), Some(None)))
    }

    fn counters_map<K: aya::Pod>(
        &self,
        name: &'static str,
    ) -> Result<PerCpuHashMap<&MapData, K, CgroupCounters>, LoadError> {
        let map = self
            .ebpf
            .map(name)
            .ok_or(LoadError::Map(name, "absent".into()))?;
        PerCpuHashMap::try_from(map).map_err(|e| LoadError::Map(name, chain(&e)))
    }

    fn running_map(&self) -> Result<PerCpuArray<&MapData, RunningSlice>, LoadError> {
        let map = self
            .ebpf
            .map("running")
            .ok_or(LoadError::Map("running", "absent".into()))?;
        PerCpuArray::try_from(map).map_err(|e| LoadError::Map("running", chain(&e)))
    }

    /// Every cgroup's counters, summed over CPUs.
    pub fn counters(&self) -> Result<Vec<(u64, CgroupCounters)>, MapError> {
        self.read_counters(COUNTERS_MAP)
    }

    /// Every process's counters (key: tgid), summed over CPUs. Empty with per-process off.
    pub fn process_counters(&self) -> Result<Vec<(u32, CgroupCounters)>, MapError> {
        self.read_counters(PROCESS_MAP)
    }

    fn read_counters<K: aya::Pod>(
        &self,
        name: &'static str,
    ) -> Result<Vec<(K, CgroupCounters)>, MapError> {
        let map = self.counters_map::<K>(name)?;
        let mut all = Vec::new();
        for entry in map.iter() {
            let (key, per_cpu) = match entry {
                Ok(e) => e,
                // The key was deleted (LRU eviction, process exit) between listing and lookup.
                Err(aya::maps::MapError::KeyNotFound) => continue,
                Err(error) => return Err(MapError::Read { map: name, error }),
            };
            let mut sum = CgroupCounters::default();
            per_cpu.iter().for_each(|c| sum.add(c));
            all.push((key, sum));
        }
        Ok(all)
    }

    /// The slice open on each possible CPU.
    pub fn running(&self) -> Result<Vec<RunningSlice>, MapError> {
        let map = self.running_map()?;
        let per_cpu = map.get(&0, 0).map_err(|error| MapError::Read {
            map: "running",
            error,
        })?;
        Ok(per_cpu.iter().copied().collect())
    }

    /// Forgets a cgroup (it was removed).
    pub fn forget(&mut self, cgroup_id: u64) -> Result<(), MapError> {
        self.remove(COUNTERS_MAP, cgroup_id)
    }

    /// Forgets a process (it exited but a slice held on another CPU recreated its entry).
    pub fn forget_process(&mut self, tgid: u32) -> Result<(), MapError> {
        self.remove(PROCESS_MAP, tgid)
    }

    fn remove<K: aya::Pod + std::fmt::Display>(
        &mut self,
        name: &'static str,
        key: K,
    ) -> Result<(), MapError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(LoadError::Map(name, "absent".into()))?;
        let mut map: PerCpuHashMap<&mut MapData, K, CgroupCounters> =
            PerCpuHashMap::try_from(map).map_err(|e| LoadError::Map(name, chain(&e)))?;
        match map.remove(&key) {
            // Gone already: the BPF side deleted it (process exit) or the LRU evicted it.
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(())
            }
            Err(error) => Err(MapError::Delete {
                map: name,
                key: key.to_string(),
                error,
            }),
        }
    }
}

fn attach(ebpf: &mut Ebpf, btf: &Btf, name: &str, tracepoint: &str) -> Result<(), String> {
    let program: &mut BtfTracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| "not in the object".to_string())?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| chain(&e))?;
    program.load(tracepoint, btf).map_err(|e| chain(&e))?;
    program.attach().map_err(|e| chain(&e))?;
    Ok(())
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_object_is_refused_by_name() {
        let err = Accounting::load(&[]).unwrap_err();
        assert!(matches!(err, LoadError::StubObject));
        assert!(err.to_string().contains("GREENPIPE_BUILD_BPF=1"), "{err}");
    }
}
