//! A real cgroup v2 with `stress-ng --cpu 1` in it: the exporter's container CPU seconds track
//! the kernel's own `cpu.stat`, and the load is counted under the container, not under `system`.
//!
//! The cgroup is named like a Docker scope under a test parent
//! (`greenpipe-test-<pid>/docker-<64 hex>.scope`) so the exporter finds it with its real
//! container-id parser.

use std::time::Duration;

use greenpipe_common::names::{container, label, node, source, SYSTEM_CONTAINER};
use greenpipe_tests::cgroup::{
    container_id, stress_cpu_in, unified_root, usage_seconds, TestCgroup,
};
use greenpipe_tests::scrape::{fetch, fresh, sample, samples};
use greenpipe_tests::{start_exporter, wait_for};

/// The cgroup-sourced CPU seconds of a container (the eBPF collector adds `source="bpf"`).
pub(crate) fn container_cpu(text: &str, id: &str) -> Option<f64> {
    sample(
        text,
        container::CPU_SECONDS_TOTAL,
        &[(label::CONTAINER_ID, id), (label::SOURCE, source::CGROUP)],
    )
}

fn node_busy(text: &str) -> f64 {
    greenpipe_common::contract::cpu_mode::ALL
        .iter()
        .filter(|m| greenpipe_common::contract::cpu_mode::is_busy(m))
        .map(|m| sample(text, node::CPU_SECONDS_TOTAL, &[(label::MODE, m)]).unwrap())
        .sum()
}

#[test]
fn container_cpu_tracks_cpu_stat_and_is_not_system() {
    let root = unified_root().expect("this test needs a cgroup v2 hierarchy (pure or hybrid)");
    let mut cg = TestCgroup::create(
        vec![root],
        &format!("greenpipe-test-{}", std::process::id()),
    )
    .expect("creating the test cgroup (tests run as root)");
    let id = container_id(0);
    let rel = cg.add_container(&id).unwrap();
    let dir = cg.dir(&rel);

    let (_exporter, url) = start_exporter("cgroup-test", &[]);
    let before = wait_for(Duration::from_secs(30), || {
        let text = fetch(&url).ok()?;
        container_cpu(&text, &id).map(|_| text)
    })
    .expect("the exporter reports the test cgroup as a container");

    let mut stress = stress_cpu_in(&dir, 5);

    // While the load runs: the served value lies between two kernel readings around the sample.
    std::thread::sleep(Duration::from_secs(2));
    let k1 = usage_seconds(&dir);
    let mid = fresh(&url, Duration::from_secs(10)).expect("exporter keeps collecting");
    let k2 = usage_seconds(&dir);
    let e = container_cpu(&mid, &id).unwrap_or_else(|| {
        let ours: Vec<&str> = mid.lines().filter(|l| l.contains(id.as_str())).collect();
        panic!("no single cgroup CPU series for {id} during load: {ours:#?}")
    });
    assert!(
        k1 <= e + 1e-6 && e <= k2 + 1e-6,
        "exporter {e} s outside kernel readings [{k1}, {k2}] s"
    );
    assert_eq!(
        samples(&mid, container::PROCESSES, &[(label::CONTAINER_ID, &id)]),
        vec![2.0],
        "stress-ng's parent and its one CPU worker"
    );

    let status = stress.wait_exit(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| s.success()),
        "stress-ng failed: {status:?}"
    );
    let after = fresh(&url, Duration::from_secs(10)).expect("exporter keeps collecting");
    let kernel = usage_seconds(&dir);
    let exported = container_cpu(&after, &id).unwrap();
    assert!(kernel > 1.0, "stress-ng ran only {kernel} CPU seconds");
    assert!(
        (exported - kernel).abs() <= 0.02 * kernel,
        "exporter {exported} s vs kernel cpu.stat {kernel} s"
    );

    // The load is the container's: system advanced by at most what the node did besides it.
    let delta = |name_labels: &dyn Fn(&str) -> f64| name_labels(&after) - name_labels(&before);
    let d_node = delta(&node_busy);
    let d_container = delta(&|t: &str| container_cpu(t, &id).unwrap());
    let d_system = delta(&|t: &str| container_cpu(t, SYSTEM_CONTAINER).unwrap());
    let d_containers = delta(&|t: &str| {
        samples(
            t,
            container::CPU_SECONDS_TOTAL,
            &[(label::SOURCE, source::CGROUP)],
        )
        .iter()
        .sum()
    });
    eprintln!("Δnode busy {d_node:.2} s, Δcontainer {d_container:.2} s, Δsystem {d_system:.2} s");
    assert!(
        d_system <= d_node - d_container + 0.25 * d_container,
        "system took the container's load: Δsystem {d_system} Δnode {d_node} Δcontainer {d_container}"
    );
    assert!(
        (d_containers - d_node).abs() <= 0.1 * d_node + 0.5,
        "Σ containers + system {d_containers} s vs node busy {d_node} s"
    );
}
