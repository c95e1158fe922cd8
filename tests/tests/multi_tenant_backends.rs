//! The estimator on the real multi-tenant engines, built from source by `scripts/backends.sh`
//! and started by `greenpipe_tests::backends` (ignored unless asked for, run by
//! scripts/test-backends.sh):
//! Thanos v0.42.0 (receive + query, tenants by `THANOS-TENANT`, tenancy enforced on queries) and
//! Mimir 3.0.5 (monolithic, tenants by `X-Scope-OrgID`). The estimator reads the fleet's
//! features through the engine's query API (`--prometheus.engine thanos|mimir`) and writes its
//! results back, both as tenant `tenant-a` (from `--prometheus.header` and
//! `--remote-write.header`). Predictions land, the containers' shares add up to the node, the
//! ticks run on without a gap across an estimator restart with the energy counter continuing,
//! and tenant `tenant-b` sees none of it.

use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_common::names::estimate;
use greenpipe_tests::backends::Backend;
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::{
    by_labels, free_port, now_ms, one_container_node, query_api_with_headers,
    raw_samples_with_headers, remote_write_with_headers, test_binary, wait_for, Guard,
    SeriesByLabels,
};

/// `serve` against `engine` as `tenant-a`, its log in `log`.
fn start_estimator(
    engine: &str,
    read: &str,
    write: &str,
    header: &str,
    models: &std::path::Path,
    log: &std::path::Path,
) -> Guard {
    let tenant = format!("{header}=tenant-a");
    let child = Command::new(test_binary("greenpipe-estimator"))
        .arg("serve")
        .arg(format!("--prometheus-url={read}"))
        .arg(format!("--remote-write-url={write}"))
        .arg(format!("--prometheus.engine={engine}"))
        .arg(format!("--prometheus.header={tenant}"))
        .arg(format!("--remote-write.header={tenant}"))
        .arg(format!("--models={}", models.display()))
        .args(["--interval=1s", "--rate-window=5s"])
        .arg(format!("--web.listen-address=127.0.0.1:{}", free_port()))
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .expect("starting the estimator");
    Guard::new("estimator", child)
}

/// The series matching `selector` as the tenant of `headers` sees them, keyed by labels.
fn series(read: &str, headers: &[(&str, &str)], selector: &str) -> SeriesByLabels {
    by_labels(
        raw_samples_with_headers(read, headers, selector, "10m").unwrap_or_default(),
        None,
    )
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn the_estimator_reads_and_writes_one_tenant_of_thanos_across_a_restart() {
    // Thanos receive stores the tenant as a label of every series.
    one_tenant_across_a_restart("thanos", Some("tenant_id"));
}

#[test]
#[ignore = "needs the engines built from Go source: scripts/test-backends.sh runs it"]
fn the_estimator_reads_and_writes_one_tenant_of_mimir_across_a_restart() {
    // Mimir keeps tenants apart in storage; their series carry no tenant label.
    one_tenant_across_a_restart("mimir", None);
}

/// The scenario of the module comment on `engine`; `tenant_label` names the label the engine
/// adds with the tenant's name, if it adds one.
fn one_tenant_across_a_restart(engine: &str, tenant_label: Option<&str>) {
    let backend = Backend::up(engine);
    let (read, write) = (backend.read_url.as_str(), backend.write_url.as_str());
    let header = backend.tenant_header();
    assert_eq!(backend.engine.estimator_engine(), engine);
    let tenant_a = [(header, "tenant-a")];
    let tenant_b = [(header, "tenant-b")];
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 400_000, 1000);
    let ctr = [("node", "t1"), ("container_id", "k1"), ("pod_uid", "p1")];
    remote_write_with_headers(write, &tenant_a, one_container_node("t1", &ctr, span))
        .unwrap_or_else(|e| panic!("pushing features: {e:#}\n{}", backend.logs()));
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("linear-thanos")])).unwrap();
    let log = dir.path().join("estimator.log");
    let marker = estimate::TICK_TIMESTAMP_SECONDS;
    let ticks = || -> Vec<i64> {
        let mut t: Vec<i64> = series(read, &tenant_a, marker)
            .into_values()
            .flatten()
            .map(|(t, _)| t)
            .collect();
        t.sort();
        t
    };
    let fail = |what: &str| -> String {
        format!(
            "{what}; estimator log:\n{}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            backend.logs()
        )
    };

    // Thanos query learns a new tenant's time range from receive's info, refreshed every few
    // seconds; until then it answers nothing for it, and the estimator would find no node at
    // those ticks. (Mimir answers at once.)
    wait_for(Duration::from_secs(60), || {
        let cpu = "greenpipe_node_cpu_seconds_total{node=\"t1\"}";
        let seen = query_api_with_headers(read, &tenant_a, cpu).unwrap_or_default();
        (!seen.is_empty()).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "{}",
            fail("the pushed features never reached the query API")
        )
    });
    let mut estimator = start_estimator(engine, read, write, header, &models, &log);
    wait_for(Duration::from_secs(90), || {
        (ticks().len() >= 5).then_some(())
    })
    .unwrap_or_else(|| panic!("{}", fail(&format!("fewer than 5 ticks through {engine}"))));
    estimator.terminate();
    let stopped = *ticks().last().unwrap();
    std::thread::sleep(Duration::from_secs(8));
    let mut estimator = start_estimator(engine, read, write, header, &models, &log);
    wait_for(Duration::from_secs(90), || {
        (*ticks().last()? >= stopped + 15_000).then_some(())
    })
    .unwrap_or_else(|| panic!("{}", fail("no tick 15 s past the restart")));
    estimator.terminate();

    // Every tick from the first to the last, once.
    let ticks = ticks();
    assert!(
        ticks.windows(2).all(|w| w[1] - w[0] == 1000),
        "gaps or duplicates across the restart at {stopped}: {ticks:?}"
    );
    let node = series(read, &tenant_a, estimate::NODE_POWER_WATTS);
    let [(labels, power)] = &node.into_iter().collect::<Vec<_>>()[..] else {
        panic!("{}", fail("expected one node power series"))
    };
    assert_eq!(labels["node"], "t1", "{labels:?}");
    match tenant_label {
        Some(label) => assert_eq!(labels[label], "tenant-a", "{labels:?}"),
        None => assert!(
            !labels.values().any(|v| v == "tenant-a"),
            "a tenant label on {labels:?}"
        ),
    }
    let at = |s: &[(i64, f64)], t: i64| s.iter().find(|(u, _)| *u == t).map(|(_, v)| *v);
    for &t in &ticks {
        // 3 W + 2 W per CPU second per second (the user mode, 1/s).
        let w = at(power, t).unwrap_or_else(|| {
            panic!("no node power at tick {t}: ticks {ticks:?}, power {power:?}")
        });
        assert!((w - 5.0).abs() < 1e-9, "node power {w} W at {t}");
    }
    let shares = series(read, &tenant_a, estimate::CONTAINER_POWER_WATTS);
    assert!(shares.len() >= 2, "{:?}", shares.keys());
    for &t in &ticks {
        let sum: f64 = shares.values().filter_map(|s| at(s, t)).sum();
        assert!(
            (sum - 5.0).abs() < 1e-9,
            "containers' shares {sum} W at {t}"
        );
    }
    // The energy counter goes on across the restart: 5 J a tick, never back.
    let energy = series(read, &tenant_a, estimate::NODE_ENERGY_JOULES_TOTAL);
    let [(_, joules)] = &energy.into_iter().collect::<Vec<_>>()[..] else {
        panic!("{}", fail("expected one node energy series"))
    };
    let steps: Vec<f64> = ticks
        .windows(2)
        .map(|w| at(joules, w[1]).unwrap() - at(joules, w[0]).unwrap())
        .collect();
    assert!(
        steps.iter().all(|d| (d - 5.0).abs() < 1e-6),
        "energy steps {steps:?}"
    );

    // The other tenant sees nothing of tenant-a: neither the features nor the results.
    let seen_by_b =
        query_api_with_headers(read, &tenant_b, "{__name__=~\"greenpipe_.+\"}").unwrap();
    assert!(seen_by_b.is_empty(), "tenant-b sees {seen_by_b:?}");
    let seen_by_a =
        query_api_with_headers(read, &tenant_a, "{__name__=~\"greenpipe_.+\"}").unwrap();
    assert!(!seen_by_a.is_empty());
}
