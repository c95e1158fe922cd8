//! The emissions recording rules in deploy/carbon are valid (`promtool check rules`) and compute
//! the right grams (`promtool test rules` with input series and expected values).

use std::path::PathBuf;
use std::process::Command;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/carbon")
}

fn promtool(args: &[&str]) -> std::process::Output {
    Command::new("promtool")
        .args(args)
        .current_dir(deploy_dir())
        .output()
        .expect("promtool runs (Debian package prometheus, installed by scripts/setup.sh)")
}

#[test]
fn emissions_rules_check_and_unit_tests_pass() {
    for args in [
        ["check", "rules", "emissions-rules.yaml"],
        ["test", "rules", "emissions-rules.test.yaml"],
    ] {
        let out = promtool(&args);
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn metric_names_in_rules_are_the_contract_names() {
    use greenpipe_common::names;
    let rules = std::fs::read_to_string(deploy_dir().join("emissions-rules.yaml")).unwrap();
    for name in [
        names::carbon::GRID_CARBON_INTENSITY_GRAMS_PER_KWH,
        names::carbon::NODE_GRID_ZONE_INFO,
        names::estimate::NODE_POWER_WATTS,
        names::estimate::CONTAINER_POWER_WATTS,
    ] {
        assert!(
            rules.contains(name),
            "{name} not used in emissions-rules.yaml"
        );
    }
}
