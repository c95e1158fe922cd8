//! Per-process eBPF accounting (`--collector.ebpf.per-process`) against the real kernel: real
//! processes in a Docker-shaped test cgroup, compared with what the kernel reports for each
//! process, and the off switch. Runs as root.

use std::ffi::CString;
use std::time::Duration;

use crate::kernel_support::{
    build, build_with, collect, loopback_sink, require_root, value, Forked, TestCgroup,
};
use greenpipe_common::names::{exporter, label, process, source};
use greenpipe_exporter::bpf::{self, Accounting, Options};
use greenpipe_exporter::collector::{ebpf, Collector};
use greenpipe_exporter::metrics::MetricSet;

/// The ebpf collector with per-process accounting on and every process exported.
fn per_process_collector() -> Box<dyn Collector> {
    build_with(&ebpf::SPEC, |c| {
        c.options.ebpf.per_process = true;
        c.options.process.top_n = Some(1_000_000);
    })
}

fn of_pid(pid: &str, extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, String)> {
    let mut l = vec![
        (label::PID, pid.to_string()),
        (label::SOURCE, source::BPF.to_string()),
    ];
    l.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    l
}

fn get(set: &MetricSet, name: &str, labels: &[(&'static str, String)]) -> Option<f64> {
    let refs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    value(set, name, &refs)
}

/// The label value of `key` on the series of `name` for `pid`.
fn label_of(set: &MetricSet, name: &str, pid: &str, key: &str) -> Option<String> {
    set.family(name)?
        .series
        .iter()
        .find(|s| s.labels.iter().any(|(k, v)| *k == label::PID && v == pid))?
        .labels
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.clone())
}

/// The kernel's own on-CPU time of a single-threaded process: `/proc/<pid>/schedstat`'s
/// first field, nanoseconds (the scheduler's sum_exec_runtime).
fn schedstat_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// utime + stime of `/proc/<pid>/stat`, seconds (clock ticks, printed for comparison).
fn stat_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let stat = greenpipe_exporter::collector::process::parse_stat(&text).unwrap();
    stat.cpu_ticks as f64 / greenpipe_exporter::selfstat::clock_ticks_per_second()
}

fn procs_of(cg: &TestCgroup) -> Vec<u32> {
    std::fs::read_to_string(cg.dir.join("cgroup.procs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The collector's CPU seconds for `pid` and the kernel's, read at (nearly) the same moment
/// (schedstat just before and after the collection, midpoint; retaken when the two reads are
/// more than 2 ms of the process's CPU apart).
fn aligned_sample(pid: u32, collector: &mut dyn Collector) -> (f64, f64, MetricSet) {
    let p = pid.to_string();
    let mut best: Option<(f64, f64, u64, MetricSet)> = None;
    for _ in 0..20 {
        let before = schedstat_ns(pid);
        let set = collect(collector);
        let after = schedstat_ns(pid);
        let bpf = get(&set, process::CPU_SECONDS_TOTAL, &of_pid(&p, &[])).expect("cpu series");
        let kernel = (before + after) as f64 / 2e9;
        let spread = after - before;
        if spread <= 2_000_000 {
            return (bpf, kernel, set);
        }
        if best.as_ref().is_none_or(|b| spread < b.2) {
            best = Some((bpf, kernel, spread, set));
        }
    }
    let (bpf, kernel, spread, set) = best.expect("at least one sample");
    eprintln!("schedstat reads around the collection stayed {spread} ns apart");
    (bpf, kernel, set)
}

#[test]
fn a_busy_process_cpu_time_matches_its_schedstat_within_3_percent_and_an_idle_sibling_shows_none() {
    require_root();
    let cg = TestCgroup::new();
    let mut collector = per_process_collector();
    let mut idle = cg.spawn("exec sleep 120");
    let mut stress = cg.spawn("exec stress-ng --cpu 1 --timeout 60s --quiet");
    std::thread::sleep(Duration::from_secs(1));
    // The worker is the process of the cgroup that is neither the idle sibling nor
    // stress-ng's parent (which only waits).
    let worker = procs_of(&cg)
        .into_iter()
        .filter(|p| *p != idle.id() && *p != stress.id())
        .max_by_key(|p| schedstat_ns(*p))
        .expect("stress-ng worker");
    let idle_pid = idle.id().to_string();
    let (bpf0, kernel0, set0) = aligned_sample(worker, collector.as_mut());
    let stat0 = stat_seconds(worker);
    let idle0 = get(&set0, process::CPU_SECONDS_TOTAL, &of_pid(&idle_pid, &[]))
        .expect("the idle sibling ran (fork, exec) so it has a series");
    std::thread::sleep(Duration::from_secs(8));
    let (bpf1, kernel1, set1) = aligned_sample(worker, collector.as_mut());
    let stat1 = stat_seconds(worker);
    let idle1 = get(&set1, process::CPU_SECONDS_TOTAL, &of_pid(&idle_pid, &[])).unwrap();
    let container = label_of(
        &set1,
        process::CPU_SECONDS_TOTAL,
        &worker.to_string(),
        label::CONTAINER_ID,
    );
    let comm = label_of(
        &set1,
        process::CPU_SECONDS_TOTAL,
        &worker.to_string(),
        label::COMM,
    );
    stress.kill().unwrap();
    stress.wait().unwrap();
    idle.kill().unwrap();
    idle.wait().unwrap();
    let (bpf, kernel) = (bpf1 - bpf0, kernel1 - kernel0);
    eprintln!(
        "worker {worker} ({comm:?}): bpf {bpf:.4} s, schedstat {kernel:.4} s, /proc stat utime+stime {:.2} s over the same window; idle sibling {:.6} s",
        stat1 - stat0,
        idle1 - idle0
    );
    assert_eq!(container.as_deref(), Some(cg.container_id.as_str()));
    assert!(kernel > 0.2, "stress-ng did not run: {kernel} s");
    assert!(
        (bpf - kernel).abs() <= 0.03 * kernel,
        "bpf {bpf} s vs schedstat {kernel} s"
    );
    assert!(
        idle1 - idle0 < 0.001,
        "the sleeping sibling used {} s",
        idle1 - idle0
    );
}

#[test]
fn direct_io_bytes_of_one_process_within_10_percent() {
    require_root();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = CString::new(
        dir.path()
            .join("direct")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    let mib = 32usize;
    let layout = std::alloc::Layout::from_size_align(1 << 20, 4096).unwrap();
    // SAFETY: a non-zero-sized layout; freed below.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!buf.is_null());
    let cg = TestCgroup::new();
    let mut collector = per_process_collector();
    let child = Forked::start(&cg, || {
        // SAFETY (forked child): raw system calls on a path and buffer made before the fork.
        unsafe {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_DIRECT,
                0o600,
            );
            if fd < 0 {
                return false;
            }
            for _ in 0..mib {
                if libc::write(fd, buf.cast(), 1 << 20) != 1 << 20 {
                    return false;
                }
            }
            libc::close(fd) == 0
        }
    });
    child.wait_done();
    let set = collect(collector.as_mut());
    let pid = child.pid.to_string();
    let bytes = get(
        &set,
        process::DISK_BYTES_TOTAL,
        &of_pid(&pid, &[(label::DIRECTION, "write")]),
    );
    let others = set
        .family(process::DISK_BYTES_TOTAL)
        .map(|f| f.series.len())
        .unwrap_or(0);
    child.finish();
    // SAFETY: allocated above with the same layout.
    unsafe { std::alloc::dealloc(buf, layout) };
    let want = (mib << 20) as f64;
    let bytes = bytes.expect("disk series of the writer");
    eprintln!(
        "O_DIRECT write of {want} bytes by pid {pid}: bpf {bytes} bytes ({others} disk series)"
    );
    assert!((bytes - want).abs() <= 0.1 * want, "{bytes} vs {want}");
}

#[test]
fn loopback_bytes_sent_by_one_process_within_10_percent() {
    require_root();
    let (port, receiver) = loopback_sink();
    let mib = 16usize;
    let payload = vec![7u8; 1 << 20];
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let cg = TestCgroup::new();
    let mut collector = per_process_collector();
    let child = Forked::start(&cg, || {
        // SAFETY (forked child): raw system calls on an address and buffer made before the fork.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            if fd < 0 {
                return false;
            }
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), len) != 0 {
                return false;
            }
            for _ in 0..mib {
                let mut sent = 0usize;
                while sent < payload.len() {
                    let n =
                        libc::send(fd, payload[sent..].as_ptr().cast(), payload.len() - sent, 0);
                    if n <= 0 {
                        return false;
                    }
                    sent += n as usize;
                }
            }
            libc::close(fd) == 0
        }
    });
    child.wait_done();
    assert_eq!(receiver.join().unwrap(), mib << 20);
    let set = collect(collector.as_mut());
    let pid = child.pid.to_string();
    let tx = get(
        &set,
        process::NETWORK_BYTES_TOTAL,
        &of_pid(&pid, &[(label::DIRECTION, "transmit")]),
    );
    child.finish();
    let want = (mib << 20) as f64;
    let tx = tx.expect("network series of the sender");
    eprintln!("sent {want} bytes over loopback from pid {pid}: bpf {tx} bytes");
    assert!((tx - want).abs() <= 0.1 * want, "{tx} vs {want}");
}

#[test]
fn per_process_off_leaves_the_map_empty_and_exports_nothing_per_process() {
    require_root();
    let off = Accounting::load(bpf::ACCOUNTING_OBJECT).expect("load (off)");
    let on = Accounting::load_with(
        bpf::ACCOUNTING_OBJECT,
        Options {
            per_process: true,
            ..Options::default()
        },
    )
    .expect("load (on)");
    let mut collector = build(&ebpf::SPEC);
    let cg = TestCgroup::new();
    cg.run("exec stress-ng --cpu 1 --timeout 2s --quiet");
    cg.run("head -c 4000000 /dev/urandom | md5sum > /dev/null");
    let set = collect(collector.as_mut());
    let off_entries = off.process_counters().unwrap().len();
    let on_entries = on.process_counters().unwrap().len();
    eprintln!("per-process map entries: off {off_entries}, on {on_entries}");
    assert!(on_entries > 0, "the same load fills the map when on");
    assert_eq!(off_entries, 0, "the map stays empty when off");
    let per_process: Vec<&str> = set
        .families()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with("greenpipe_process_") || *n == exporter::BPF_PROCESSES_TRACKED)
        .collect();
    assert!(
        per_process.is_empty(),
        "exported with per-process off: {per_process:?}"
    );
    // The per-cgroup series are there as before.
    assert!(set
        .family(greenpipe_common::names::container::CPU_SECONDS_TOTAL)
        .is_some());
}
