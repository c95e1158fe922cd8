//! The aarch64 exporter, cross-built by `scripts/test-arm.sh`, running on this host under
//! qemu-user next to the x86-64 exporter, both reading the same real kernel: a pod-shaped
//! cgroup (`greenpipe-arm-<pid>/pod<uid>/docker-<64 hex>.scope`, the kubelet's cgroupfs shape)
//! with `stress-ng --cpu 1` in it.
//!
//! qemu-user passes most syscalls to the host kernel but implements neither bpf(2) nor
//! perf_event_open(2) (ENOSYS), so the aarch64 exporter's eBPF and perf collectors cannot work
//! here: the test asserts that it says so (one log line each, availability 0 with the reason)
//! and that everything else it serves has the x86-64 exporter's families and values.

use std::time::Duration;

use greenpipe_common::names::{container, exporter, label, source};
use greenpipe_tests::arm::{families, CrossExporter, AARCH64};
use greenpipe_tests::cgroup::{
    container_id, stress_cpu_in, unified_root, usage_seconds, TestCgroup,
};
use greenpipe_tests::scrape::{fetch, fresh, sample, samples};
use greenpipe_tests::{start_exporter, wait_for};

/// Emulated, the exporter's cycle takes several times longer than natively: room for it.
const CYCLES: Duration = Duration::from_secs(60);

fn container_cpu(text: &str, id: &str) -> Option<f64> {
    sample(
        text,
        container::CPU_SECONDS_TOTAL,
        &[(label::CONTAINER_ID, id), (label::SOURCE, source::CGROUP)],
    )
}

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn container_cpu_tracks_cpu_stat_as_the_x86_64_exporters_does() {
    let root = unified_root().expect("this test needs a cgroup v2 hierarchy (pure or hybrid)");
    let mut cg = TestCgroup::create(vec![root], &format!("greenpipe-arm-{}", std::process::id()))
        .expect("creating the test cgroup (tests run as root)");
    let id = container_id(0);
    let pod_uid = format!("5e1f0a2b-7c3d-4e5f-8a9b-{:012x}", std::process::id());
    let rel = cg.add_pod_container(&pod_uid, &id).unwrap();
    let dir = cg.dir(&rel);

    let arm = CrossExporter::start(AARCH64, "arm-qemu-user", &[]);
    let (_x86, x86_url) = start_exporter("x86-64", &[]);
    let urls = [("aarch64", arm.url.as_str()), ("x86-64", x86_url.as_str())];
    for (arch, url) in urls {
        wait_for(CYCLES, || container_cpu(&fetch(url).ok()?, &id)).unwrap_or_else(|| {
            panic!(
                "the {arch} exporter never reported the test container; aarch64 log:\n{}",
                arm.log()
            )
        });
    }

    let mut stress = stress_cpu_in(&dir, 5);

    // While the load runs, both served values lie between two kernel readings taken around them.
    std::thread::sleep(Duration::from_secs(2));
    let k1 = usage_seconds(&dir);
    let mid: Vec<(&str, String)> = urls
        .iter()
        .map(|(arch, url)| {
            (
                *arch,
                fresh(url, CYCLES).expect("exporter keeps collecting"),
            )
        })
        .collect();
    let k2 = usage_seconds(&dir);
    for (arch, page) in &mid {
        let e = container_cpu(page, &id)
            .unwrap_or_else(|| panic!("{arch}: no single cgroup CPU series for {id} under load"));
        assert!(
            k1 <= e + 1e-6 && e <= k2 + 1e-6,
            "{arch} exporter {e} s outside kernel readings [{k1}, {k2}] s"
        );
        assert_eq!(
            samples(page, container::PROCESSES, &[(label::CONTAINER_ID, &id)]),
            vec![2.0],
            "{arch}: stress-ng's parent and its one CPU worker"
        );
    }

    let status = stress.wait_exit(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "stress-ng failed: {status:?}"
    );
    let kernel = usage_seconds(&dir);
    assert!(kernel > 1.0, "stress-ng ran only {kernel} CPU seconds");
    for (arch, url) in urls {
        let page = fresh(url, CYCLES).expect("exporter keeps collecting");
        let exported = container_cpu(&page, &id).unwrap();
        eprintln!("{arch}: exported {exported:.6} s, cpu.stat {kernel:.6} s");
        assert!(
            (exported - kernel).abs() <= 0.02 * kernel,
            "{arch} exporter {exported} s vs kernel cpu.stat {kernel} s"
        );
        assert_eq!(
            samples(
                &page,
                container::CPU_SECONDS_TOTAL,
                &[
                    (label::CONTAINER_ID, &id),
                    (label::POD_UID, &pod_uid),
                    (label::SOURCE, source::CGROUP)
                ]
            )
            .len(),
            1,
            "{arch}: the container's CPU series carries pod_uid=\"{pod_uid}\""
        );
    }
}

/// The `reason` label of the collector's availability series, if it is 0 (unavailable).
fn unavailable_reason(page: &str, collector: &str) -> Option<String> {
    let head = format!("{}{{", exporter::COLLECTOR_AVAILABLE);
    page.lines()
        .filter(|l| l.starts_with(&head) && l.contains(&format!("collector=\"{collector}\"")))
        .find(|l| l.ends_with(" 0"))
        .and_then(|l| {
            Some(
                l.split_once("reason=\"")?
                    .1
                    .rsplit_once("\"}")?
                    .0
                    .to_string(),
            )
        })
}

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn same_families_as_x86_64_and_bpf_and_perf_reported_unavailable() {
    let arm = CrossExporter::start(AARCH64, "arm-qemu-user", &[]);
    wait_for(CYCLES, || fetch(&arm.url).ok())
        .unwrap_or_else(|| panic!("the aarch64 exporter never served; log:\n{}", arm.log()));
    // Four cycles: a warning repeated per cycle would show by then.
    fresh(&arm.url, CYCLES).unwrap();
    let page = fresh(&arm.url, CYCLES).unwrap();
    let log = arm.log();

    for collector in ["ebpf", "perf"] {
        let reason = unavailable_reason(&page, collector).unwrap_or_else(|| {
            panic!("aarch64 under qemu-user: {collector} not reported unavailable:\n{page}")
        });
        assert!(
            reason.contains("Function not implemented (os error 38)"),
            "{collector}: expected qemu-user's ENOSYS as the reason, got {reason:?}"
        );
        let warned = log
            .lines()
            .filter(|l| l.contains("collector unavailable"))
            .filter(|l| l.contains(&format!("collector=\"{collector}\"")))
            .count();
        assert_eq!(
            warned, 1,
            "{collector}: one 'collector unavailable' line expected, log:\n{log}"
        );
    }

    // The x86-64 exporter without the two collectors qemu-user cannot serve must declare exactly
    // the aarch64 one's families; with them it may declare more (what eBPF adds on this host).
    let (_x86, x86_url) = start_exporter("x86-64", &["--no-collector.ebpf", "--no-collector.perf"]);
    let x86_page = wait_for(CYCLES, || fresh(&x86_url, CYCLES).ok()).unwrap();
    let (arm_families, x86_families) = (families(&page), families(&x86_page));
    assert!(
        arm_families.len() > 20,
        "only {} families: {arm_families:?}",
        arm_families.len()
    );
    assert_eq!(
        arm_families
            .symmetric_difference(&x86_families)
            .collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "families served by only one of the aarch64 and x86-64 exporters"
    );
}
