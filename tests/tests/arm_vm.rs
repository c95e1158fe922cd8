//! A whole arm64 machine: `scripts/arm-vm.sh` boots Debian's arm64 kernel under
//! qemu-system-aarch64 (`-M virt -cpu cortex-a72`, TCG) with an initramfs of Debian arm64
//! packages and the aarch64 exporter `scripts/test-arm.sh` cross-built with its BPF objects.
//! In the guest, with pure cgroup v2, a busy shell loop runs 15 s in a pod-shaped cgroup; the
//! test reads the guest's console and checks that the BPF programs passed the arm64 verifier,
//! that the eBPF collector attributed the loop's CPU to its container, and that the perf
//! collector counts the container's cycles on the ARMv8 PMU with the events QEMU lacks left out.

use greenpipe_common::names::{container, exporter, label, source};
use greenpipe_tests::arm::{boot_vm, cross_binary, AARCH64};
use greenpipe_tests::scrape::{sample, samples};

/// The programs every supported kernel has tracepoints for; the others are attached where the
/// kernel has their tracepoint (Debian 12's 6.1 has neither `mm_filemap_get_pages` nor
/// `sock_send_length`/`sock_recv_length`).
const REQUIRED_PROGRAMS: [&str; 4] = [
    "on_sched_switch",
    "on_page_cache_add",
    "on_block_bio_queue",
    "on_process_exit",
];

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn bpf_loads_under_the_arm64_verifier_and_attributes_a_busy_cgroup() {
    let run = boot_vm(&cross_binary(AARCH64, "greenpipe-exporter"), "cortex-a72");
    let kernel = run.fact("kernel");
    assert!(kernel.ends_with("aarch64"), "guest kernel: {kernel}");
    let btf: u64 = run.fact("btf").parse().unwrap();
    assert!(btf > 1_000_000, "/sys/kernel/btf/vmlinux is {btf} bytes");
    assert!(
        run.fact("exporter").starts_with("up=1"),
        "the exporter never served in the guest; log:\n{}",
        run.log
    );
    let page = &run.metrics;
    assert_eq!(
        sample(
            page,
            exporter::COLLECTOR_AVAILABLE,
            &[("collector", "ebpf")]
        ),
        Some(1.0),
        "eBPF collector unavailable in the guest; log:\n{}",
        run.log
    );

    // Every program is attached, or its tracepoint is absent from this kernel's BTF; anything
    // else (the verifier rejecting a program) fails.
    let head = format!("{}{{", exporter::BPF_PROGRAM_ATTACHED);
    let programs: Vec<&str> = page.lines().filter(|l| l.starts_with(&head)).collect();
    assert!(programs.len() >= REQUIRED_PROGRAMS.len(), "{programs:#?}");
    for line in &programs {
        assert!(
            line.ends_with(" 1") || line.contains("reason=\"unknown BTF type `btf_trace_"),
            "BPF program not attached for a reason other than a missing tracepoint: {line}\n\
             log:\n{}",
            run.log
        );
    }
    for program in REQUIRED_PROGRAMS {
        assert_eq!(
            sample(
                page,
                exporter::BPF_PROGRAM_ATTACHED,
                &[("program", program)]
            ),
            Some(1.0),
            "{program} not attached: {programs:#?}"
        );
    }

    let (id, pod_uid) = run
        .fact("container")
        .split_once(" pod ")
        .expect("container ID pod UID");
    let usage_usec: f64 = run
        .fact("cpu.stat")
        .split_whitespace()
        .skip_while(|w| *w != "usage_usec")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("usage_usec in the guest's cpu.stat");
    let kernel_seconds = usage_usec / 1e6;
    assert!(
        kernel_seconds > 5.0,
        "the busy loop ran only {kernel_seconds} CPU seconds"
    );
    for src in [source::BPF, source::CGROUP] {
        let series = samples(
            page,
            container::CPU_SECONDS_TOTAL,
            &[
                (label::CONTAINER_ID, id),
                (label::POD_UID, pod_uid),
                (label::SOURCE, src),
            ],
        );
        let [exported] = series[..] else {
            panic!(
                "{src}: expected one CPU series for container {id} (pod {pod_uid}), got {series:?}"
            )
        };
        eprintln!("{src}: {exported:.6} s, guest cpu.stat {kernel_seconds:.6} s");
        // sched_switch timestamps and the scheduler's own runtime sum differ by the tick-level
        // slack of where each is taken; 2 % is far below any misattribution.
        assert!(
            (exported - kernel_seconds).abs() <= 0.02 * kernel_seconds,
            "{src}: {exported} s vs guest cpu.stat {kernel_seconds} s"
        );
    }

    // Perf on the ARMv8 PMU. QEMU's (TCG, no icount) counts cycles only, on a 1 GHz virtual
    // clock: instructions and cache misses are refused with ENOENT, logged once and not
    // exported, and the cycles of the container's cgroup are its running time × 1 GHz.
    assert_eq!(
        sample(
            page,
            exporter::COLLECTOR_AVAILABLE,
            &[("collector", "perf")]
        ),
        Some(1.0),
        "perf collector unavailable in the guest; log:\n{}",
        run.log
    );
    let open = sample(page, exporter::PERF_EVENTS_OPEN, &[]).unwrap_or(0.0);
    assert!(
        open > 0.0,
        "no perf event open in the guest; log:\n{}",
        run.log
    );
    for (event, family) in [
        ("instructions", container::CPU_INSTRUCTIONS_TOTAL),
        ("cache-misses", container::CACHE_MISSES_TOTAL),
    ] {
        let logged = run.log.lines().any(|l| {
            l.contains("does not count the event") && l.contains(&format!("event=\"{event}\""))
        });
        let exported = page.lines().any(|l| l.starts_with(family));
        assert!(
            logged != exported,
            "{event}: logged as missing {logged}, exported {exported}; log:\n{}",
            run.log
        );
    }
    let cycles = samples(
        page,
        container::CPU_CYCLES_TOTAL,
        &[
            (label::CONTAINER_ID, id),
            (label::POD_UID, pod_uid),
            (label::SOURCE, source::PERF),
        ],
    );
    let [cycles] = cycles[..] else {
        panic!("expected one perf cycles series for container {id}, got {cycles:?}")
    };
    eprintln!(
        "perf: {cycles} cycles, {:.3} GHz over the cgroup's CPU time",
        cycles / kernel_seconds / 1e9
    );
    assert!(
        (cycles / kernel_seconds - 1e9).abs() <= 0.05e9,
        "{cycles} cycles over {kernel_seconds} CPU seconds is not QEMU's 1 GHz"
    );
}
