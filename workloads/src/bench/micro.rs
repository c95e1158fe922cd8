//! Micro-benchmarks: one resource at a time.
//!
//! | name | resource | unit |
//! |---|---|---|
//! | `cpu-int` | integer ALU (xorshift/multiply chains) | `operations` |
//! | `cpu-float` | FP pipeline (independent f64 multiply-add chains) | `flops` |
//! | `cpu-matrix` | 64×64 f32 matrix product in L1 | `flops` |
//! | `memory-bandwidth` | DRAM (STREAM triad over `--memory-bytes`) | `bytes` |
//! | `cache-l1`, `cache-l2`, `cache-llc` | random reads over a working set of half the level's size (sysfs) | `bytes` |
//! | `page-cache` | re-reading a 64 MiB file set that stays cached | `bytes` |
//! | `disk-sequential` | 1 MiB O_DIRECT writes and reads | `bytes` |
//! | `disk-random` | 4 KiB O_DIRECT random reads | `bytes` |
//! | `network-tcp` | 64 KiB messages echoed by the peer | `bytes` |
//! | `network-udp` | 1400-byte datagrams echoed by the peer | `bytes` |

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    file_error, network_error, xorshift, BenchError, Benchmark, Env, Group, Prepared, Work,
};
use crate::peer;

pub fn benchmarks() -> Vec<Benchmark> {
    let b = |name, unit, prepare| Benchmark {
        name,
        group: Group::Micro,
        unit,
        prepare,
    };
    vec![
        b("cpu-int", "operations", cpu_int),
        b("cpu-float", "flops", cpu_float),
        b("cpu-matrix", "flops", cpu_matrix),
        b("memory-bandwidth", "bytes", memory_bandwidth),
        b("cache-l1", "bytes", |e| cache(e, 1)),
        b("cache-l2", "bytes", |e| cache(e, 2)),
        b("cache-llc", "bytes", |e| cache(e, 3)),
        b("page-cache", "bytes", page_cache),
        b("disk-sequential", "bytes", disk_sequential),
        b("disk-random", "bytes", disk_random),
        b("network-tcp", "bytes", network_tcp),
        b("network-udp", "bytes", network_udp),
    ]
}

fn per_thread(
    env: &Env,
    mut make: impl FnMut(usize) -> Result<Work, BenchError>,
) -> Result<Vec<Work>, BenchError> {
    (0..env.threads).map(&mut make).collect()
}

fn plain(workers: Vec<Work>, params: serde_json::Value) -> Prepared {
    Prepared {
        workers,
        params,
        guard: None,
    }
}

fn cpu_int(env: &Env) -> Result<Prepared, BenchError> {
    let workers = per_thread(env, |i| {
        let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
        Ok(Box::new(move || -> Result<u64, BenchError> {
            let mut acc = 0u64;
            for _ in 0..100_000 {
                acc = acc
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(xorshift(&mut s));
            }
            std::hint::black_box(acc);
            Ok(100_000)
        }) as Work)
    })?;
    Ok(plain(workers, serde_json::json!({})))
}

fn cpu_float(env: &Env) -> Result<Prepared, BenchError> {
    let workers = per_thread(env, |i| {
        let mut x = [1.0f64 + i as f64 * 1e-3; 8];
        Ok(Box::new(move || -> Result<u64, BenchError> {
            // Eight independent chains keep the FP units busy; values stay bounded (|a·x+b| with
            // a < 1 converges).
            for _ in 0..20_000 {
                for v in x.iter_mut() {
                    *v = *v * 0.999_999 + 1e-6;
                }
            }
            std::hint::black_box(&x);
            Ok(20_000 * 8 * 2)
        }) as Work)
    })?;
    Ok(plain(workers, serde_json::json!({})))
}

fn cpu_matrix(env: &Env) -> Result<Prepared, BenchError> {
    const N: usize = 64;
    let workers = per_thread(env, |i| {
        let mut s = 1 + i as u64;
        let a: Vec<f32> = (0..N * N)
            .map(|_| (xorshift(&mut s) % 1000) as f32 / 1000.0)
            .collect();
        let b = a.clone();
        let mut c = vec![0.0f32; N * N];
        Ok(Box::new(move || -> Result<u64, BenchError> {
            for row in 0..N {
                for k in 0..N {
                    let av = a[row * N + k];
                    for col in 0..N {
                        c[row * N + col] += av * b[k * N + col];
                    }
                }
            }
            c.iter_mut().for_each(|v| *v *= 1e-3);
            std::hint::black_box(&c);
            Ok((2 * N * N * N) as u64)
        }) as Work)
    })?;
    Ok(plain(workers, serde_json::json!({"matrix": N})))
}

fn memory_bandwidth(env: &Env) -> Result<Prepared, BenchError> {
    let per = (env.memory_bytes / env.threads / 3 / 8).max(1024);
    let workers = per_thread(env, |_| {
        let a = vec![1.0f64; per];
        let b = vec![2.0f64; per];
        let mut c = vec![0.0f64; per];
        let chunk = 1 << 16;
        let mut at = 0usize;
        Ok(Box::new(move || -> Result<u64, BenchError> {
            // STREAM triad over the next chunk: 2 reads and 1 write of 8 bytes per element.
            let end = (at + chunk).min(per);
            for j in at..end {
                c[j] = a[j] + 3.0 * b[j];
            }
            std::hint::black_box(&c);
            let n = end - at;
            at = if end == per { 0 } else { end };
            Ok((n * 24) as u64)
        }) as Work)
    })?;
    Ok(plain(
        workers,
        serde_json::json!({"working_set_bytes": per * 24 * env.threads}),
    ))
}

/// Size in bytes of the data or unified cache at `level` (1, 2, 3) from sysfs.
pub fn cache_size(level: u32) -> Option<usize> {
    let dir = Path::new("/sys/devices/system/cpu/cpu0/cache");
    for entry in std::fs::read_dir(dir).ok()? {
        let p = entry.ok()?.path();
        let read = |f: &str| {
            std::fs::read_to_string(p.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        if read("level")?.parse::<u32>().ok()? != level || read("type")? == "Instruction" {
            continue;
        }
        let size = read("size")?;
        let (num, mult) = match size.strip_suffix('K') {
            Some(n) => (n, 1024),
            None => match size.strip_suffix('M') {
                Some(n) => (n, 1 << 20),
                None => (size.as_str(), 1),
            },
        };
        return num.parse::<usize>().ok().map(|n| n * mult);
    }
    None
}

fn cache(env: &Env, level: u32) -> Result<Prepared, BenchError> {
    // A board without the sysfs entry gets the typical Cortex-A72 sizes.
    let size = cache_size(level).unwrap_or(match level {
        1 => 32 << 10,
        2 => 1 << 20,
        _ => 4 << 20,
    });
    // Half the level's size: fits in it, not in the level below.
    let words = (size / 2 / 8).max(512);
    let workers = per_thread(env, |i| {
        let data: Vec<u64> = (0..words as u64).collect();
        let mut s = 7 + i as u64;
        Ok(Box::new(move || -> Result<u64, BenchError> {
            let mut acc = 0u64;
            for _ in 0..50_000 {
                acc = acc.wrapping_add(data[(xorshift(&mut s) as usize) % words]);
            }
            std::hint::black_box(acc);
            Ok(50_000 * 8)
        }) as Work)
    })?;
    Ok(plain(
        workers,
        serde_json::json!({"cache_level": level, "cache_bytes": size, "working_set_bytes": words * 8}),
    ))
}

/// Removes a benchmark's files when the step ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir(env: &Env, name: &str) -> Result<Scratch, BenchError> {
    let dir = env
        .scratch
        .join(format!("greenpipe-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::Scratch {
        dir: env.scratch.clone(),
        source,
    })?;
    Ok(Scratch(dir))
}

fn page_cache(env: &Env) -> Result<Prepared, BenchError> {
    const FILES: usize = 64;
    const SIZE: usize = 1 << 20;
    let dir = scratch_dir(env, "page-cache")?;
    let block = vec![0x5au8; SIZE];
    for f in 0..FILES {
        let p = dir.0.join(format!("f{f}"));
        std::fs::write(&p, &block).map_err(file_error("writing", &p))?;
    }
    let paths: Vec<PathBuf> = (0..FILES).map(|f| dir.0.join(format!("f{f}"))).collect();
    let workers = per_thread(env, |i| {
        let paths = paths.clone();
        let mut next = i;
        let mut buf = vec![0u8; SIZE];
        Ok(Box::new(move || -> Result<u64, BenchError> {
            let p = &paths[next % paths.len()];
            next += 1;
            let mut f = File::open(p).map_err(file_error("opening", p))?;
            f.read_exact(&mut buf).map_err(file_error("reading", p))?;
            Ok(SIZE as u64)
        }) as Work)
    })?;
    Ok(Prepared {
        workers,
        params: serde_json::json!({"files": FILES, "file_bytes": SIZE}),
        guard: Some(Box::new(dir)),
    })
}

/// A 4096-aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

// The buffer is owned by one worker at a time.
unsafe impl Send for Aligned {}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: the layout has a non-zero size; the memory is freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation of {len} bytes failed");
        Aligned { ptr, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to len initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).expect("valid layout");
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

fn open_direct(p: &Path, create: bool) -> Result<File, BenchError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .map_err(|source| BenchError::OpenDirect {
            path: p.to_path_buf(),
            source,
        })
}

fn disk_file(env: &Env, name: &str) -> Result<(Scratch, PathBuf, usize), BenchError> {
    let dir = scratch_dir(env, name)?;
    let p = dir.0.join("data");
    let size = (env.disk_bytes / (1 << 20)).max(1) << 20;
    let mut f = open_direct(&p, true)?;
    let mut buf = Aligned::new(1 << 20);
    buf.as_mut()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    for _ in 0..size >> 20 {
        f.write_all(buf.as_mut())
            .map_err(file_error("writing", &p))?;
    }
    f.sync_all().map_err(file_error("syncing", &p))?;
    Ok((dir, p, size))
}

fn disk_sequential(env: &Env) -> Result<Prepared, BenchError> {
    let (dir, path, size) = disk_file(env, "disk-sequential")?;
    let workers = per_thread(env, |i| {
        let mut f = open_direct(&path, false)?;
        let path = path.clone();
        let mut buf = Aligned::new(1 << 20);
        let blocks = (size >> 20) as u64;
        let mut block = i as u64 % blocks;
        let mut writing = i % 2 == 0;
        Ok(Box::new(move || -> Result<u64, BenchError> {
            f.seek(SeekFrom::Start(block << 20))
                .map_err(file_error("seeking in", &path))?;
            if writing {
                f.write_all(buf.as_mut())
                    .map_err(file_error("writing", &path))?;
            } else {
                f.read_exact(buf.as_mut())
                    .map_err(file_error("reading", &path))?;
            }
            block += 1;
            if block == blocks {
                block = 0;
                writing = !writing;
            }
            Ok(1 << 20)
        }) as Work)
    })?;
    Ok(Prepared {
        workers,
        params: serde_json::json!({"file_bytes": size, "block_bytes": 1 << 20, "direct": true}),
        guard: Some(Box::new(dir)),
    })
}

fn disk_random(env: &Env) -> Result<Prepared, BenchError> {
    let (dir, path, size) = disk_file(env, "disk-random")?;
    let workers = per_thread(env, |i| {
        let f = open_direct(&path, false)?;
        let path = path.clone();
        let mut buf = Aligned::new(4096);
        let mut s = 99 + i as u64;
        let blocks = (size / 4096) as u64;
        Ok(Box::new(move || -> Result<u64, BenchError> {
            let mut n = 0;
            for _ in 0..16 {
                let at = (xorshift(&mut s) % blocks) * 4096;
                f.read_exact_at(buf.as_mut(), at)
                    .map_err(file_error("reading", &path))?;
                n += 4096;
            }
            Ok(n)
        }) as Work)
    })?;
    Ok(Prepared {
        workers,
        params: serde_json::json!({"file_bytes": size, "block_bytes": 4096, "direct": true}),
        guard: Some(Box::new(dir)),
    })
}

/// The peer's address, starting an in-process loopback one when none is configured.
fn peer_addr(env: &Env) -> Result<(String, Option<Box<dyn Send>>), BenchError> {
    match &env.peer {
        Some(p) => Ok((p.clone(), None)),
        None => {
            let running = peer::spawn("127.0.0.1:0")?;
            Ok((running.addr.to_string(), Some(Box::new(running))))
        }
    }
}

fn network_tcp(env: &Env) -> Result<Prepared, BenchError> {
    const MSG: usize = 64 << 10;
    let (addr, guard) = peer_addr(env)?;
    let workers = per_thread(env, |_| {
        let mut s = TcpStream::connect(&addr)
            .map_err(network_error("connecting to the TCP peer", &addr))?;
        let setup = network_error("setting up the connection to the TCP peer", &addr);
        s.set_nodelay(true)
            .and_then(|()| s.set_read_timeout(Some(Duration::from_secs(10))))
            .map_err(setup)?;
        let out = vec![0xa5u8; MSG];
        let mut back = vec![0u8; MSG];
        let addr = addr.clone();
        Ok(Box::new(move || -> Result<u64, BenchError> {
            s.write_all(&out)
                .and_then(|()| s.read_exact(&mut back))
                .map_err(network_error("echoing with the TCP peer", &addr))?;
            Ok(2 * MSG as u64)
        }) as Work)
    })?;
    Ok(Prepared {
        workers,
        params: serde_json::json!({"peer": env.peer.as_deref().unwrap_or("loopback"), "message_bytes": MSG}),
        guard,
    })
}

fn network_udp(env: &Env) -> Result<Prepared, BenchError> {
    const DGRAM: usize = 1400;
    let (addr, guard) = peer_addr(env)?;
    let workers = per_thread(env, |_| {
        let s = UdpSocket::bind("0.0.0.0:0")
            .map_err(network_error("binding a UDP socket for the peer", &addr))?;
        s.connect(&addr).map_err(network_error("UDP peer", &addr))?;
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(network_error(
                "setting up the socket to the UDP peer",
                &addr,
            ))?;
        let out = vec![0x3cu8; DGRAM];
        let mut back = vec![0u8; DGRAM];
        let addr = addr.clone();
        Ok(Box::new(move || -> Result<u64, BenchError> {
            let mut n = 0;
            // A burst of 32 datagrams, then collect what came back: UDP may drop, so only
            // bytes actually sent and received count.
            for _ in 0..32 {
                n += s
                    .send(&out)
                    .map_err(network_error("sending to the UDP peer", &addr))?
                    as u64;
            }
            for _ in 0..32 {
                match s.recv(&mut back) {
                    Ok(k) => n += k as u64,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        break
                    }
                    Err(e) => return Err(network_error("receiving from the UDP peer", &addr)(e)),
                }
            }
            Ok(n)
        }) as Work)
    })?;
    if env.threads == 0 {
        return Err(BenchError::NoWorkers);
    }
    Ok(Prepared {
        workers,
        params: serde_json::json!({"peer": env.peer.as_deref().unwrap_or("loopback"), "datagram_bytes": DGRAM}),
        guard,
    })
}
