//! The eBPF collector against the real kernel: processes in a test cgroup shaped like a Docker
//! container, compared with what the kernel itself reports. Runs as root.

use std::time::Duration;

use crate::kernel_support::{build, collect, loopback_sink, require_root, value, TestCgroup};
use greenpipe_common::names::{container, label, source};
use greenpipe_exporter::collector::{ebpf, Collector};

fn labels<'a>(cg: &'a TestCgroup, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut l = vec![
        (label::CONTAINER_ID, cg.container_id.as_str()),
        (label::SOURCE, source::BPF),
    ];
    l.extend_from_slice(extra);
    l
}

/// The collector's CPU seconds for the test cgroup and `cpu.stat` read at (nearly) the same
/// moment: `cpu.stat` is read just before and just after the collection and the midpoint is
/// used; a sample where the test thread was preempted in between (the two reads more than
/// 2 ms of the cgroup's CPU apart) is retaken, since on a loaded machine that alone could
/// exceed the tolerance.
fn aligned_sample(cg: &TestCgroup, collector: &mut dyn Collector) -> (f64, f64) {
    let mut best = None;
    for _ in 0..20 {
        let before = cg.usage_usec();
        let set = collect(collector);
        let after = cg.usage_usec();
        let bpf = value(&set, container::CPU_SECONDS_TOTAL, &labels(cg, &[])).expect("cpu series");
        let kernel = (before + after) as f64 / 2e6;
        let spread = after - before;
        if spread <= 2_000 {
            return (bpf, kernel);
        }
        if best.is_none_or(|(_, _, s)| spread < s) {
            best = Some((bpf, kernel, spread));
        }
    }
    let (bpf, kernel, spread) = best.expect("at least one sample");
    eprintln!("cpu.stat reads around the collection stayed {spread} us apart");
    (bpf, kernel)
}

#[test]
fn cpu_time_matches_the_kernels_cpu_stat_within_3_percent() {
    require_root();
    let cg = TestCgroup::new();
    let mut collector = build(&ebpf::SPEC);
    let mut stress = cg.spawn("exec stress-ng --cpu 1 --timeout 60s --quiet");
    // Let the worker start and settle in the cgroup.
    std::thread::sleep(Duration::from_secs(1));
    let first = aligned_sample(&cg, collector.as_mut());
    std::thread::sleep(Duration::from_secs(8));
    let second = aligned_sample(&cg, collector.as_mut());
    stress.kill().unwrap();
    stress.wait().unwrap();
    let (bpf, kernel) = (second.0 - first.0, second.1 - first.1);
    eprintln!("bpf {bpf:.4} s, cpu.stat {kernel:.4} s over the same window");
    assert!(kernel > 0.2, "stress-ng did not run: {kernel} s");
    assert!(
        (bpf - kernel).abs() <= 0.03 * kernel,
        "bpf {bpf} s vs cpu.stat {kernel} s"
    );
}

#[test]
fn reading_a_file_twice_gives_page_cache_hits_to_its_cgroup() {
    require_root();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    let pages = 8 * 1024 * 1024 / 4096;
    std::fs::write(&file, vec![7u8; pages * 4096]).unwrap();
    // Push it out of the page cache so the first read misses.
    let f = std::fs::File::open(&file).unwrap();
    f.sync_all().unwrap();
    // SAFETY: fadvise on a descriptor we own.
    unsafe {
        libc::posix_fadvise(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
            0,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    let cg = TestCgroup::new();
    let mut collector = build(&ebpf::SPEC);
    let before = collect(collector.as_mut());
    let read = format!("dd if={} of=/dev/null bs=1M status=none", file.display());
    cg.run(&read);
    let after_first = collect(collector.as_mut());
    cg.run(&read);
    let after_second = collect(collector.as_mut());
    let get = |set, name| value(set, name, &labels(&cg, &[])).unwrap_or(0.0);
    let hits = container::PAGE_CACHE_HITS_TOTAL;
    let adds = container::PAGE_CACHE_ADDITIONS_TOTAL;
    let first_hits = get(&after_first, hits) - get(&before, hits);
    let first_adds = get(&after_first, adds) - get(&before, adds);
    let second_hits = get(&after_second, hits) - get(&after_first, hits);
    let second_adds = get(&after_second, adds) - get(&after_first, adds);
    eprintln!(
        "{pages} pages: first read {first_hits} hits {first_adds} additions; \
         second read {second_hits} hits {second_adds} additions"
    );
    let pages = pages as f64;
    assert!(first_adds >= 0.9 * pages, "the cold read fills the cache");
    assert!(first_hits <= 0.1 * pages, "the cold read is mostly misses");
    assert!(second_hits >= 0.9 * pages, "the warm read hits");
    assert!(second_hits <= 1.1 * pages, "hits are not counted twice");
    assert!(second_adds <= 0.1 * pages, "the warm read adds nothing");
}

fn on_tmpfs(dir: &std::path::Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut fs) }, 0);
    fs.f_type as i64 == TMPFS_MAGIC
}

#[test]
fn direct_io_block_bytes_within_10_percent() {
    require_root();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("direct");
    assert!(
        !on_tmpfs(dir.path()),
        "{} is on tmpfs, which has no block device: direct I/O cannot be accounted there",
        dir.path().display()
    );
    let mib = 64.0;
    let cg = TestCgroup::new();
    let mut collector = build(&ebpf::SPEC);
    let before = collect(collector.as_mut());
    cg.run(&format!(
        "dd if=/dev/zero of={} bs=1M count={mib} oflag=direct status=none",
        file.display()
    ));
    let after = collect(collector.as_mut());
    let write = labels(&cg, &[(label::DIRECTION, "write")]);
    let name = container::DISK_BYTES_TOTAL;
    let bytes = value(&after, name, &write).expect("disk series")
        - value(&before, name, &write).unwrap_or(0.0);
    let want = mib * 1024.0 * 1024.0;
    eprintln!("dd oflag=direct {want} bytes, bpf {bytes} bytes");
    assert!((bytes - want).abs() <= 0.1 * want, "{bytes} vs {want}");
}

#[test]
fn loopback_bytes_sent_within_10_percent() {
    require_root();
    let (port, receiver) = loopback_sink();
    let mib = 32usize;
    let cg = TestCgroup::new();
    let mut collector = build(&ebpf::SPEC);
    let before = collect(collector.as_mut());
    // bash opens the socket, head writes N MiB into it, both in the cgroup.
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && head -c {} /dev/zero > /dev/tcp/127.0.0.1/{port}",
            cg.dir.display(),
            mib << 20
        ))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(receiver.join().unwrap(), mib << 20);
    let after = collect(collector.as_mut());
    let tx = labels(&cg, &[(label::DIRECTION, "transmit")]);
    let name = container::NETWORK_BYTES_TOTAL;
    let bytes = value(&after, name, &tx).expect("network series")
        - value(&before, name, &tx).unwrap_or(0.0);
    let want = (mib << 20) as f64;
    eprintln!("sent {want} bytes over loopback, bpf {bytes} bytes");
    assert!((bytes - want).abs() <= 0.1 * want, "{bytes} vs {want}");
}
