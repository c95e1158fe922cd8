//! The energy-per-inference recording rule of deploy/prometheus computes joules per inference
//! from container power and inference counts (`promtool test rules` with input series and the
//! expected value), and names the contract metrics.

use std::process::Command;

use greenpipe_tests::workspace_root;

#[test]
fn energy_per_inference_rule_unit_test_passes() {
    let dir = workspace_root().join("deploy/prometheus/tests");
    let out = Command::new("promtool")
        .args(["test", "rules", "energy-per-inference.test.yaml"])
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
