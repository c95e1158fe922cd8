//! The energy-per-inference and monitoring-overhead recording rules of deploy/prometheus
//! compute joules per inference from container power and inference counts, and the exporter's
//! own power from its CPU time (`promtool test rules` with input series and the expected
//! values), and name the contract metrics; the live view's joules per inference starts its
//! window when the workload is ready.

use std::process::Command;

use greenpipe_tests::workspace_root;

#[test]
fn energy_per_inference_rule_unit_test_passes() {
    let dir = workspace_root().join("deploy/prometheus/tests");
    let out = Command::new("promtool")
        .args([
            "test",
            "rules",
            "energy-per-inference.test.yaml",
            "monitoring-overhead.test.yaml",
        ])
        .current_dir(&dir)
        .output()
        .expect("promtool runs (Debian package prometheus, installed by scripts/setup.sh)");
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rules = std::fs::read_to_string(
        workspace_root().join("deploy/prometheus/rules/greenpipe-recording.yml"),
    )
    .unwrap();
    for name in [
        greenpipe_common::names::estimate::CONTAINER_POWER_WATTS,
        greenpipe_campaign::workload_metrics::INFERENCES_TOTAL,
        greenpipe_estimator::view::ENERGY_PER_INFERENCE_RULE,
    ] {
        assert!(rules.contains(name), "{name} not in the recording rules");
    }
}

/// The view's joules per inference is right from its first value: a pod that drew 3 W for 30 s
/// while it built its model, then 2 W at 10 inferences per second, reads 0.2 J 20 s into its
/// inferring, where a fixed one-minute average of its power (the recording rule's) gives 0.26 J.
/// Evaluated by Prometheus' own engine (`promtool test rules` on the query as a rule).
#[test]
fn the_view_s_energy_per_inference_window_starts_when_the_workload_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let query = greenpipe_estimator::view::energy_per_inference_query();
    let indented: String = query.lines().map(|l| format!("          {l}\n")).collect();
    let rules = format!(
        "groups:\n  - name: view\n    rules:\n      - record: view:energy_per_inference_joules\n        expr: |\n{indented}"
    );
    std::fs::write(dir.path().join("view.yml"), rules).unwrap();
    let power = greenpipe_common::names::estimate::CONTAINER_POWER_WATTS;
    let inferences = greenpipe_campaign::workload_metrics::INFERENCES_TOTAL;
    let test = format!(
        r#"rule_files:
  - view.yml
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: '{power}{{node="n1",container_id="c1",pod_uid="p1",model="m",component="dynamic"}}'
        values: '2.5x29 1.5x40'
      - series: '{power}{{node="n1",container_id="c1",pod_uid="p1",model="m",component="idle"}}'
        values: '0.5x69'
      - series: '{inferences}{{pod_uid="p1",workload="infer",model="mobilenet_v2",precision="int8",engine="onnxruntime",threads="1",mode="local"}}'
        values: '_x30 0+10x40 stale'
    promql_expr_test:
      # Ready 5 s ago: no figure yet.
      - expr: view:energy_per_inference_joules
        eval_time: 35s
        exp_samples: []
      - expr: view:energy_per_inference_joules
        eval_time: 50s
        exp_samples:
          - labels: 'view:energy_per_inference_joules{{container_id="c1",pod_uid="p1"}}'
            value: 0.2
      # The workload ended at 70 s (its counter is stale): no figure.
      - expr: view:energy_per_inference_joules
        eval_time: 80s
        exp_samples: []
"#
    );
    std::fs::write(dir.path().join("view.test.yml"), test).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules", "view.test.yml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool runs (Debian package prometheus, installed by scripts/setup.sh)");
    assert!(
        out.status.success(),
        "promtool test rules on the view's query:\n{query}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
