//! What happens when the kernel says no: a verifier rejection is reported with the verifier's
//! words; a host without a PMU marks the perf collector unavailable and everything else runs.

use std::path::Path;

use crate::kernel_support::{require_root, value, TestCgroup};
use greenpipe_common::names::{container, exporter, label, source};
use greenpipe_exporter::bpf::{Accounting, LoadError};
use greenpipe_exporter::collector::{ebpf, perf, CollectError};
use greenpipe_exporter::config::Config;
use greenpipe_exporter::paths::Paths;
use greenpipe_exporter::sampler::Sampler;

static REJECTED: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/verifier_reject.bpf.o"));

#[test]
fn a_verifier_rejection_is_reported_with_the_verifiers_words() {
    require_root();
    let err = Accounting::load(REJECTED).expect_err("the verifier must refuse the fixture");
    let LoadError::Program {
        program, message, ..
    } = &err
    else {
        panic!("expected a program error, got {err}");
    };
    assert_eq!(*program, "on_sched_switch");
    assert!(message.contains("Verifier output"), "{message}");
    // The verifier's verdict on a map value used without a NULL check.
    assert!(message.contains("map_value_or_null"), "{message}");
    let reason = ebpf::short_reason(&err);
    assert!(reason.contains("map_value_or_null"), "{reason}");
}

#[test]
fn no_pmu_marks_perf_unavailable_and_nothing_else_changes() {
    require_root();
    let config = Config::for_paths(Paths::default(), "test-node");
    let has_pmu = perf::probe_pmu(Path::new("/sys")).is_ok();
    match (perf::SPEC.build)(&config.context()) {
        Ok(_) if has_pmu => {}
        Ok(_) => panic!("perf collector built on a host whose probe failed"),
        Err(CollectError::Unavailable(reason)) => {
            assert!(!has_pmu, "unavailable on a host with a PMU: {reason}");
            eprintln!("perf unavailable: {reason}");
            assert!(reason.contains("perf_event_open"), "{reason}");
            if !Path::new("/sys/bus/event_source/devices/cpu").exists() {
                assert!(reason.contains("devices/cpu absent"), "{reason}");
            }
        }
        Err(e) => panic!("perf collector: {e}"),
    }
    let mut sampler = Sampler::new(config).expect("default collectors never stop start-up");
    let _ = sampler.collect_once();
    // Give the BPF programs a container to account: on a host where every task sits in the
    // root cgroup there would be nothing to see, whatever the perf collector did.
    let cg = TestCgroup::new();
    cg.run("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done");
    let sample = sampler.collect_once();
    let available = |c| {
        value(
            &sample,
            exporter::COLLECTOR_AVAILABLE,
            &[(label::COLLECTOR, c)],
        )
    };
    let success = |c| {
        value(
            &sample,
            exporter::COLLECTOR_SUCCESS,
            &[(label::COLLECTOR, c)],
        )
    };
    assert_eq!(available("perf"), Some(if has_pmu { 1.0 } else { 0.0 }));
    assert_eq!(success("ebpf"), Some(1.0));
    assert_eq!(success("cpu"), Some(1.0));
    let cpu = value(
        &sample,
        container::CPU_SECONDS_TOTAL,
        &[
            (label::SOURCE, source::BPF),
            (label::CONTAINER_ID, cg.container_id.as_str()),
        ],
    );
    assert!(
        cpu.is_some_and(|v| v > 0.0),
        "bpf CPU time still exported: {cpu:?}"
    );
}
