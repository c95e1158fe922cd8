//! deploy/, dashboards/ and the Containerfile, checked offline: every kustomization builds,
//! every manifest validates strictly against the Kubernetes OpenAPI schemas (and the Prometheus
//! Operator's CRD schemas), the rules pass promtool, and every dashboard expression parses.
//! The live counterpart (every expression returns data) is `promql_live.rs`.
//!
//! The Python validators live in the `.venv` that scripts/setup.sh creates.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use greenpipe_tests::grafana::{dashboard_exprs, substitute_variables};
use greenpipe_tests::workspace_root;
use serde_json::Value;

fn venv_python() -> PathBuf {
    let python = workspace_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/setup.sh (it installs the deploy validators)",
        python.display()
    );
    python
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn check_deploy(args: &[&str]) -> Output {
    run(Command::new(venv_python())
        .arg(workspace_root().join("scripts/check-deploy.py"))
        .args(args))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every directory under deploy/ that holds a kustomization meant to be applied.
fn kustomizations() -> Vec<PathBuf> {
    let deploy = workspace_root().join("deploy");
    let mut dirs = vec![
        deploy.join("base"),
        deploy.join("prometheus"),
        deploy.join("profiling"),
        deploy.join("inference").join("local"),
        deploy.join("inference").join("served"),
    ];
    for e in std::fs::read_dir(deploy.join("overlays")).expect("deploy/overlays") {
        dirs.push(e.expect("overlay entry").path());
    }
    for d in &dirs {
        assert!(
            d.join("kustomization.yaml").exists(),
            "{} has no kustomization.yaml",
            d.display()
        );
    }
    dirs
}

fn build(dir: &Path, out_dir: &Path) -> PathBuf {
    let out = run(Command::new("kubectl").arg("kustomize").arg(dir));
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        text(&out)
    );
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let path = out_dir.join(format!("{name}.yaml"));
    std::fs::write(&path, &out.stdout).expect("writing built manifests");
    path
}

#[test]
fn every_kustomization_builds_and_validates_strictly() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in kustomizations() {
        let built = build(&dir, tmp.path());
        let out = check_deploy(&["validate", built.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{} does not validate:\n{}",
            dir.display(),
            text(&out)
        );
        eprintln!("{}: {}", dir.display(), text(&out).trim());
    }
}

#[test]
fn validator_rejects_unknown_fields() {
    // The strict check must catch a typo, or the test above proves nothing.
    let tmp = tempfile::tempdir().unwrap();
    let deploy = workspace_root().join("deploy");
    let base = build(&deploy.join("base"), tmp.path());
    let typo =
        std::fs::read_to_string(&base)
            .unwrap()
            .replacen("hostPID: true", "hostPid: true", 1);
    let bad = tmp.path().join("typo.yaml");
    std::fs::write(&bad, typo).unwrap();
    let out = check_deploy(&["validate", bad.to_str().unwrap()]);
    assert!(!out.status.success(), "typo accepted:\n{}", text(&out));
    assert!(text(&out).contains("hostPid"), "{}", text(&out));

    let operator = build(&deploy.join("overlays/prometheus-operator"), tmp.path());
    let typo = std::fs::read_to_string(&operator).unwrap().replacen(
        "podMetricsEndpoints:",
        "podMetricEndpoints:",
        1,
    );
    std::fs::write(&bad, typo).unwrap();
    let out = check_deploy(&["validate", bad.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "PodMonitor typo accepted:\n{}",
        text(&out)
    );
}

#[test]
fn estimator_shard_count_equals_replicas_in_every_overlay() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in kustomizations() {
        let built = build(&dir, tmp.path());
        let manifests = std::fs::read_to_string(&built).unwrap();
        if !manifests.contains("name: greenpipe-estimator") || !manifests.contains("StatefulSet") {
            continue;
        }
        let out = check_deploy(&["shards", built.to_str().unwrap()]);
        assert!(out.status.success(), "{}: {}", dir.display(), text(&out));
    }
}

#[test]
fn rules_pass_promtool() {
    let rules = workspace_root().join("deploy/prometheus/rules");
    let files: Vec<PathBuf> = std::fs::read_dir(&rules)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() >= 2, "recording and alert rule files expected");
    let out = run(Command::new("promtool")
        .args(["check", "rules"])
        .args(&files));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn prometheus_config_passes_promtool() {
    let tmp = tempfile::tempdir().unwrap();
    let converted = tmp.path().join("prometheus.yml");
    let source = workspace_root().join("deploy/prometheus/prometheus.yml");
    let out = check_deploy(&[
        "promconfig",
        source.to_str().unwrap(),
        converted.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(Command::new("promtool")
        .args(["check", "config"])
        .arg(&converted));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn prometheusrule_matches_the_rule_files() {
    let out = check_deploy(&["prometheusrule"]);
    assert!(out.status.success(), "{}", text(&out));
    let committed = std::fs::read_to_string(
        workspace_root().join("deploy/overlays/prometheus-operator/prometheusrule.yaml"),
    )
    .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "deploy/overlays/prometheus-operator/prometheusrule.yaml drifted from \
         deploy/prometheus/rules: regenerate it with\n  .venv/bin/python scripts/check-deploy.py \
         prometheusrule > deploy/overlays/prometheus-operator/prometheusrule.yaml"
    );
}

#[test]
fn containerfile_parses_and_builds_both_binaries() {
    let file = workspace_root().join("Containerfile");
    let out = check_deploy(&["containerfile", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let stages: Value = serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| l.starts_with(b"{"))
            .expect("stage list"),
    )
    .unwrap();
    for stage in ["build", "runtime", "workload"] {
        assert!(
            stages["stages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s == stage),
            "stage {stage} missing: {stages}"
        );
    }
    let containerfile = std::fs::read_to_string(&file).unwrap();
    for (bin, dir) in [
        ("greenpipe-exporter", "exporter"),
        ("greenpipe-estimator", "estimator"),
        ("greenpipe-campaign", "campaign"),
        ("greenpipe-carbon", "carbon"),
        ("greenpipe-workload", "workloads"),
    ] {
        assert!(
            containerfile.contains(&format!("--bin {bin}")),
            "Containerfile does not build {bin}"
        );
        let manifest = workspace_root().join(dir);
        let cargo = std::fs::read_to_string(manifest.join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains(&format!("name = \"{bin}\"")),
            "no binary {bin} in the workspace"
        );
    }
    for arch in ["amd64", "arm64"] {
        assert!(
            containerfile.contains(&format!("{arch})")),
            "{arch} not handled"
        );
    }
}

#[test]
fn dashboards_are_well_formed() {
    let dir = workspace_root().join("dashboards");
    let mut uids = Vec::new();
    for name in [
        "fleet-overview",
        "node-detail",
        "containers",
        "self-monitoring",
        "model-accuracy",
    ] {
        let path = dir.join(format!("{name}.json"));
        let dash: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        uids.push(dash["uid"].as_str().unwrap().to_string());
        let vars = dash["templating"]["list"].as_array().unwrap();
        assert!(
            vars.iter()
                .any(|v| v["name"] == "datasource" && v["type"] == "datasource"),
            "{name}: no datasource variable"
        );
        let mut ids: Vec<i64> = Vec::new();
        for panel in dash["panels"].as_array().unwrap() {
            ids.push(panel["id"].as_i64().unwrap());
            let grid = &panel["gridPos"];
            assert!(
                grid["x"].as_i64().unwrap() + grid["w"].as_i64().unwrap() <= 24,
                "{name}: panel {} wider than the grid",
                panel["title"]
            );
            if panel["type"] != "row" {
                assert_eq!(
                    panel["datasource"]["uid"], "${datasource}",
                    "{name}: panel {} ignores the datasource variable",
                    panel["title"]
                );
                assert!(
                    !panel["targets"].as_array().unwrap().is_empty(),
                    "{name}: panel {} has no query",
                    panel["title"]
                );
            }
        }
        let count = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), count, "{name}: duplicate panel ids");
    }
    let count = uids.len();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), count, "duplicate dashboard uids");
}

#[test]
fn dashboard_expressions_parse() {
    // promtool parses each expression as a recording rule: the same parser Prometheus uses.
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 20, "only {} expressions", exprs.len());
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, (_, e))| {
            serde_json::json!({"record": format!("dashboard:expr_{i}"), "expr": substitute_variables(e, "1h")})
        })
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboards", "rules": rules}]});
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("dashboards.yml");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    let out = run(Command::new("promtool").args(["check", "rules"]).arg(&path));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn tls_overlay_configs_check_with_promtool_and_the_web_config_parser() {
    // Prometheus' scrape config with tls_config/basic_auth: promtool checks that the files it
    // names exist, so they are pointed at empty stand-ins of the mounted Secrets.
    let tmp = tempfile::tempdir().unwrap();
    let overlay = workspace_root().join("deploy/overlays/tls");
    let converted = tmp.path().join("converted.yml");
    let out = check_deploy(&[
        "promconfig",
        overlay.join("prometheus.yml").to_str().unwrap(),
        converted.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let root = tmp.path().join("etc");
    for f in [
        "scraper-tls/ca.crt",
        "scraper-tls/tls.crt",
        "scraper-tls/tls.key",
        "secrets/scraper-password",
    ] {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let config = std::fs::read_to_string(&converted)
        .unwrap()
        .replace("/etc/prometheus/", &format!("{}/", root.display()));
    assert!(config.contains("tls_config") && config.contains("password_file"));
    let checked = tmp.path().join("prometheus.yml");
    std::fs::write(&checked, config).unwrap();
    let out = run(Command::new("promtool")
        .args(["check", "config"])
        .arg(&checked));
    assert!(out.status.success(), "{}", text(&out));
    // The servers' web configs: exporter-toolkit's schema as greenpipe-web reads it.
    for name in ["exporter.yml", "estimator.yml", "prometheus.yml"] {
        let path = overlay.join("web-config").join(name);
        let web = greenpipe_web::config::WebConfigFile::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert!(
            web.tls_server_config
                .as_ref()
                .is_some_and(|t| t.is_enabled()),
            "{name}: TLS"
        );
        for (user, hash) in web.users() {
            assert!(
                bcrypt::verify("fakepassword", &hash).is_ok(),
                "{name}: {user}'s hash"
            );
        }
    }
}

#[test]
fn tls_overlay_network_policies_admit_only_the_intended_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let built = build(&workspace_root().join("deploy/overlays/tls"), tmp.path());
    let text = std::fs::read_to_string(built).unwrap();
    let policies: Vec<&str> = text
        .split("\n---\n")
        .filter(|d| d.contains("kind: NetworkPolicy"))
        .collect();
    assert_eq!(policies.len(), 3, "{policies:?}");
    let find = |target: &str| {
        policies
            .iter()
            .find(|p| {
                p.contains(&format!(
                    "podSelector:\n    matchLabels:\n      app.kubernetes.io/name: {target}\n"
                ))
            })
            .unwrap_or_else(|| panic!("no policy selects {target}"))
    };
    for (target, port, allowed) in [
        ("greenpipe-exporter", "9910", &["prometheus"][..]),
        ("greenpipe-estimator", "9911", &["prometheus"][..]),
        (
            "prometheus",
            "9090",
            &["greenpipe-estimator", "grafana"][..],
        ),
    ] {
        let p = find(target);
        assert!(p.contains(&format!("port: {port}")), "{target}: {p}");
        let from: Vec<&str> = p
            .lines()
            .skip_while(|l| !l.contains("ingress:"))
            .skip(1)
            .take_while(|l| l.starts_with("  - ") || l.starts_with("    "))
            .filter_map(|l| l.trim().strip_prefix("app.kubernetes.io/name: "))
            .collect();
        assert_eq!(from, allowed, "{target}");
    }
}
