//! The exporter's own cost: CPU seconds and resident memory, read each tick without procfs
//! paths so a fixture `--path.procfs` cannot hide the real overhead.

/// `sysconf(_SC_CLK_TCK)`: the unit of `/proc/stat` and `/proc/<pid>/stat` times.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as f64
    } else {
        100.0
    }
}

/// `sysconf(_SC_PAGESIZE)`.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// User + system CPU seconds used by this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Resident set size of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// Hands the heap pages freed since start back to the kernel. Loading the eBPF programs parses
/// the kernel's whole BTF (about 20 MiB of heap, freed once the programs are loaded), and glibc
/// keeps freed pages mapped below live ones; without this they stay in the resident set for the
/// exporter's whole life. Returns whether any memory was released.
pub fn release_freed_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_usage_is_visible() {
        let before = cpu_seconds();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(cpu_seconds() > before);
        assert!(resident_bytes().unwrap() > 1024 * 1024);
    }
}
