//! The Helm chart deploy/helm/greenpipe, with Helm built from source (scripts/helm.sh):
//!
//! - offline: `helm lint --strict` and `helm template` for every file of examples/, each
//!   rendered object validated against the Kubernetes OpenAPI schemas (and the Prometheus
//!   Operator's and cert-manager's) by scripts/check-deploy.py, as deploy_manifests.rs does for
//!   the kustomizations; values.schema.json refuses mistyped keys and values;
//! - one source of truth: each example renders the same objects as the kustomization of that
//!   setup (after the differences that are the tools' own: Helm's labels and checksum
//!   annotations, kustomize's hash-suffixed generated names), and the exporter runs on exactly
//!   the architectures the image is built for;
//! - live, on the control plane of scripts/control-plane.sh (kwok nodes, Pod Security admission):
//!   `helm install`, the Pod Security and RBAC checks of deploy_applied_k8s.rs, `helm upgrade`
//!   that changes the model and turns on TLS (the estimator pod is replaced, the claim holding
//!   the resume point is kept), and `helm uninstall` leaving only what the user asked to keep.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use greenpipe_tests::control_plane::{run_ok, run_with_stdin, ControlPlane};
use greenpipe_tests::{wait_for, workspace_root};
use serde_json::{json, Value};

const NS: &str = "greenpipe";

fn chart() -> PathBuf {
    workspace_root().join("deploy/helm/greenpipe")
}

fn example(name: &str) -> PathBuf {
    chart().join("examples").join(format!("{name}.yaml"))
}

/// Every example values file, by name; the setups the issue names must all be there.
fn examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(chart().join("examples"))
        .expect("deploy/helm/greenpipe/examples")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.strip_suffix(".yaml").map(str::to_string)
        })
        .collect();
    names.sort();
    for needed in [
        "standalone",
        "meter-serial",
        "tls",
        "recalibration",
        "prometheus-operator",
        "arm",
        "carbon",
    ] {
        assert!(
            names.iter().any(|n| n == needed),
            "examples/{needed}.yaml missing"
        );
    }
    names
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Helm with state directories of its own (nothing read from or written to the user's).
struct Helm {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    fn new(kubeconfig: Option<PathBuf>) -> Helm {
        Helm {
            home: tempfile::tempdir().unwrap(),
            kubeconfig,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(workspace_root().join("scripts/helm.sh"));
        for (var, dir) in [
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ] {
            c.env(var, self.home.path().join(dir));
        }
        if let Some(kc) = &self.kubeconfig {
            c.arg("--kubeconfig").arg(kc);
        }
        c.args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running scripts/helm.sh {args:?}: {e}"))
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {}:\n{}",
            args.join(" "),
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `helm template greenpipe CHART -n greenpipe ARGS...`.
    fn template(&self, args: &[&str]) -> String {
        let chart = chart();
        let mut all = vec!["template", "greenpipe", chart.to_str().unwrap(), "-n", NS];
        all.extend(args);
        self.ok(&all)
    }
}

fn venv_python() -> PathBuf {
    let python = workspace_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/setup.sh (it installs the deploy validators)",
        python.display()
    );
    python
}

fn check_deploy(args: &[&str]) -> Output {
    Command::new(venv_python())
        .arg(workspace_root().join("scripts/check-deploy.py"))
        .args(args)
        .output()
        .expect("scripts/check-deploy.py")
}

/// A YAML stream as JSON objects (PyYAML from the venv), with the files a ConfigMap carries
/// (`*.yml`, `*.yaml`, `*.json` keys) parsed too, so that two renderings of the same file
/// compare equal whatever their formatting and comments.
fn objects(yaml: &str) -> Vec<Value> {
    const SCRIPT: &str = r#"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for d in docs:
    if d.get("kind") == "ConfigMap":
        for k, v in (d.get("data") or {}).items():
            if k.endswith((".yml", ".yaml", ".json")):
                d["data"][k] = {"parsed file": yaml.safe_load(v)}
json.dump(docs, sys.stdout)
"#;
    let mut c = Command::new(venv_python());
    c.args(["-c", SCRIPT]);
    let out = run_with_stdin(&mut c, yaml).expect("YAML to JSON");
    serde_json::from_str(out.lines().next().unwrap_or("")).expect("JSON list")
}

fn kustomize(dir: &str) -> String {
    run_ok(
        Command::new("kubectl")
            .arg("kustomize")
            .arg(workspace_root().join(dir)),
    )
    .unwrap_or_else(|e| panic!("kubectl kustomize {dir}: {e}"))
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["namespace"].as_str().unwrap_or("-"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// What only one of the tools adds, taken off both sides:
/// - Helm's standard labels and the project's part-of label (kustomize puts the latter on
///   deploy/base's objects only) on object metadata; pod templates and selectors keep theirs;
/// - the chart's checksum/* pod annotations (kustomize rolls pods by renaming the generated
///   ConfigMap or Secret instead);
/// - kustomize's hash suffix on generated ConfigMap and Secret names, wherever they are named;
/// - the order of volumes, volume mounts and env entries (matched by name);
/// - the Namespace, which the chart does not create (the user applies deploy/base/namespace.yaml
///   with its Pod Security labels, then installs into it).
fn normalize(mut objects: Vec<Value>) -> BTreeMap<String, Value> {
    let mut renames: Vec<(String, String)> = Vec::new();
    for o in &objects {
        if o["kind"] != "ConfigMap" && o["kind"] != "Secret" {
            continue;
        }
        let name = o["metadata"]["name"].as_str().unwrap_or("");
        if let Some((base, hash)) = name.rsplit_once('-') {
            // kustomize's hash alphabet: hex digits with 0, 1, 3, a and e spelled g, h, k, m, t.
            if hash.len() == 10 && hash.chars().all(|c| "2456789bcdfghkmt".contains(c)) {
                renames.push((name.to_string(), base.to_string()));
            }
        }
    }
    fn walk(v: &mut Value, renames: &[(String, String)], parent: &str) {
        match v {
            Value::String(s) => {
                if let Some((_, base)) = renames.iter().find(|(n, _)| n == s) {
                    *s = base.clone();
                }
            }
            Value::Array(items) => {
                for i in items.iter_mut() {
                    walk(i, renames, "");
                }
                if ["volumes", "volumeMounts", "env"].contains(&parent) {
                    items.sort_by_key(|i| i["name"].as_str().unwrap_or("").to_string());
                }
            }
            Value::Object(map) => {
                for (k, i) in map.iter_mut() {
                    walk(i, renames, k);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for o in objects.iter_mut() {
        if o["kind"] == "Namespace" {
            continue;
        }
        walk(o, &renames, "");
        // (`get_mut`/`pointer_mut`, not indexing: `value[key]` on a missing key inserts null.)
        if let Some(labels) = o
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            for k in [
                "app.kubernetes.io/part-of",
                "app.kubernetes.io/managed-by",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "helm.sh/chart",
            ] {
                labels.remove(k);
            }
            if labels.is_empty() {
                o["metadata"].as_object_mut().unwrap().remove("labels");
            }
        }
        if let Some(template) = o
            .pointer_mut("/spec/template/metadata")
            .and_then(Value::as_object_mut)
        {
            if let Some(annotations) = template
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.retain(|k, _| !k.starts_with("checksum/"));
                if annotations.is_empty() {
                    template.remove("annotations");
                }
            }
        }
        out.insert(key(o), o.clone());
    }
    out
}

/// Where two JSON values differ, as paths (at most `limit`).
fn differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(u, v, &p, out),
                    (Some(u), None) => out.push(format!("{p}: only in the chart: {u}")),
                    (None, Some(v)) => out.push(format!("{p}: only in kustomize: {v}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{path}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: chart {a} != kustomize {b}")),
        _ => {}
    }
}

fn assert_same_objects(setup: &str, chart: BTreeMap<String, Value>, kz: BTreeMap<String, Value>) {
    let mut problems = Vec::new();
    for k in kz.keys().filter(|k| !chart.contains_key(*k)) {
        problems.push(format!("{k}: only in kustomize"));
    }
    for k in chart.keys().filter(|k| !kz.contains_key(*k)) {
        problems.push(format!("{k}: only in the chart"));
    }
    for (k, c) in &chart {
        if let Some(o) = kz.get(k) {
            let mut d = Vec::new();
            differences(c, o, "", &mut d);
            problems.extend(d.into_iter().map(|d| format!("{k}: {d}")));
        }
    }
    assert!(
        problems.is_empty(),
        "{setup}: the chart and the kustomization drifted apart:\n  {}",
        problems.join("\n  ")
    );
    assert!(!chart.is_empty(), "{setup}: nothing rendered");
}

/// The architectures the Containerfile builds the image for: the arms of its TARGETARCH case.
fn image_architectures() -> Vec<String> {
    let file = std::fs::read_to_string(workspace_root().join("Containerfile")).unwrap();
    let case = file
        .split("case \"$TARGETARCH\" in")
        .nth(1)
        .expect("Containerfile: no case on $TARGETARCH");
    let case = case.split("esac").next().unwrap();
    let mut arches: Vec<String> = case
        .lines()
        .filter_map(|l| {
            let arm = l.trim().split(')').next()?;
            (arm.chars().all(|c| c.is_ascii_alphanumeric()) && !arm.is_empty() && l.contains(')'))
                .then(|| arm.to_string())
        })
        .collect();
    arches.sort();
    assert!(!arches.is_empty(), "no architecture in the Containerfile");
    arches
}

fn daemonset_architectures(objects: &BTreeMap<String, Value>) -> Vec<String> {
    let ds = &objects[&format!("DaemonSet/{NS}/greenpipe-exporter")];
    let terms = &ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    let exprs = terms[0]["matchExpressions"].as_array().expect("arch term");
    let arch = exprs
        .iter()
        .find(|e| e["key"] == "kubernetes.io/arch" && e["operator"] == "In")
        .expect("a kubernetes.io/arch In expression");
    let mut v: Vec<String> = arch["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_lints_renders_and_validates_strictly() {
    let helm = Helm::new(None);
    let tmp = tempfile::tempdir().unwrap();
    let chart = chart();
    for name in examples() {
        let values = example(&name);
        helm.ok(&[
            "lint",
            "--strict",
            chart.to_str().unwrap(),
            "-n",
            NS,
            "-f",
            values.to_str().unwrap(),
        ]);
        let rendered = helm.template(&["-f", values.to_str().unwrap()]);
        let path = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&path, &rendered).unwrap();
        let out = check_deploy(&["validate", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "examples/{name}.yaml renders objects that do not validate:\n{}",
            text(&out)
        );
        let out = check_deploy(&["shards", path.to_str().unwrap()]);
        assert!(out.status.success(), "examples/{name}.yaml: {}", text(&out));
        eprintln!("examples/{name}.yaml: {}", text(&out).trim());
    }
    // Sharded: SHARD_COUNT follows replicas.
    let rendered = helm.template(&["--set", "estimator.replicas=3"]);
    let path = tmp.path().join("shards.yaml");
    std::fs::write(&path, rendered).unwrap();
    let out = check_deploy(&["shards", path.to_str().unwrap()]);
    assert!(out.status.success(), "3 replicas: {}", text(&out));
}

#[test]
fn the_values_schema_refuses_mistyped_keys_and_values() {
    let helm = Helm::new(None);
    let chart = chart();
    let refused = |set: &str, expect: &str| {
        let out = helm.run(&["template", "g", chart.to_str().unwrap(), "--set", set]);
        assert!(!out.status.success(), "--set {set} accepted");
        assert!(
            text(&out).contains(expect),
            "--set {set}: the error does not name {expect:?}:\n{}",
            text(&out)
        );
    };
    refused("exporter.colectionInterval=1s", "colectionInterval");
    refused("estimatr.model=rpi4.json", "estimatr");
    refused("estimator.replicas=two", "replicas");
    refused("exporter.architectures={amd64,x86}", "architectures");
    refused("estimator.interval=1sec", "interval");
    refused("prometheusOperator.enabled=maybe", "enabled");
    // Checks the schema cannot express: errors that name the setting.
    refused("estimator.model=rpi9.json", "estimator.model rpi9.json");
    refused("tls.enabled=true", "tls.estimatorPassword is required");
    refused(
        "prometheus.enabled=false",
        "estimator.prometheusUrl is required",
    );
    // A well-typed value passes: the refusals above are the keys', not the mechanism's.
    helm.ok(&[
        "template",
        "g",
        chart.to_str().unwrap(),
        "--set",
        "exporter.collectionInterval=2s",
    ]);
}

#[test]
fn the_chart_and_the_kustomizations_render_the_same_objects() {
    let helm = Helm::new(None);
    let render = |name: &str| {
        normalize(objects(
            &helm.template(&["-f", example(name).to_str().unwrap()]),
        ))
    };
    for (name, overlay) in [
        ("standalone", "deploy/overlays/standalone"),
        ("meter-serial", "deploy/overlays/meter-serial"),
        ("tls", "deploy/overlays/tls"),
        ("recalibration", "deploy/overlays/recalibration"),
        ("prometheus-operator", "deploy/overlays/prometheus-operator"),
    ] {
        assert_same_objects(
            &format!("examples/{name}.yaml vs {overlay}"),
            render(name),
            normalize(objects(&kustomize(overlay))),
        );
    }
    // The defaults are the standalone setup.
    assert_same_objects(
        "defaults vs deploy/overlays/standalone",
        normalize(objects(&helm.template(&[]))),
        normalize(objects(&kustomize("deploy/overlays/standalone"))),
    );

    // ARM: standalone with the exporter on arm64 nodes only (no overlay of its own; the
    // difference is the one the example states).
    let mut standalone = normalize(objects(&kustomize("deploy/overlays/standalone")));
    let ds = standalone
        .get_mut(&format!("DaemonSet/{NS}/greenpipe-exporter"))
        .unwrap();
    ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        ["matchExpressions"][0]["values"] = json!(["arm64"]);
    assert_same_objects(
        "examples/arm.yaml vs deploy/overlays/standalone on arm64",
        render("arm"),
        standalone,
    );

    // The carbon controller: standalone plus deploy/carbon's controller and its RBAC.
    let mut carbon = kustomize("deploy/overlays/standalone");
    for f in ["deploy/carbon/rbac.yaml", "deploy/carbon/controller.yaml"] {
        carbon.push_str("\n---\n");
        carbon.push_str(&std::fs::read_to_string(workspace_root().join(f)).unwrap());
    }
    assert_same_objects(
        "examples/carbon.yaml vs standalone + deploy/carbon",
        render("carbon"),
        normalize(objects(&carbon)),
    );

    // With the Prometheus Operator's API served, "auto" adds its objects.
    let auto = normalize(objects(
        &helm.template(&["--api-versions", "monitoring.coreos.com/v1"]),
    ));
    for kind in ["PodMonitor", "ServiceMonitor", "PrometheusRule"] {
        assert!(
            auto.keys().any(|k| k.starts_with(&format!("{kind}/"))),
            "no {kind} with monitoring.coreos.com/v1 served"
        );
    }
}

#[test]
fn the_exporter_runs_on_the_architectures_the_image_is_built_for() {
    let helm = Helm::new(None);
    let arches = image_architectures();
    let chart = normalize(objects(&helm.template(&[])));
    assert_eq!(daemonset_architectures(&chart), arches, "chart defaults");
    let base = normalize(objects(&kustomize("deploy/base")));
    assert_eq!(daemonset_architectures(&base), arches, "deploy/base");
}

// ---- live: install, upgrade, uninstall on the test control plane ----

/// Whether a Pod Security level admits a pod: a server-side dry run in a namespace that
/// enforces that level (as deploy_applied_k8s.rs checks the kustomizations' pods).
fn admitted_at(cp: &ControlPlane, template: &Value, level: &str) -> Result<(), String> {
    let mut spec = template["spec"].clone();
    // The probe namespace has only the default account; Pod Security does not look at it. A
    // template read back from the API server also carries the deprecated `serviceAccount`.
    if let Some(s) = spec.as_object_mut() {
        s.remove("serviceAccountName");
        s.remove("serviceAccount");
        s.insert("automountServiceAccountToken".into(), json!(false));
        // A StatefulSet's volumeClaimTemplates become volumes only in its own pods: the probe
        // gets an emptyDir of the same name, which every Pod Security level allows.
        let mut names: Vec<Value> = Vec::new();
        for c in s
            .get("containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                names.push(m["name"].clone());
            }
        }
        let volumes = s.entry("volumes").or_insert_with(|| json!([]));
        if let Some(list) = volumes.as_array_mut() {
            for name in names {
                if !list.iter().any(|v| v["name"] == name) {
                    list.push(json!({"name": name, "emptyDir": {}}));
                }
            }
        }
    }
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "psa-probe", "namespace": format!("psa-{level}")},
        "spec": spec,
    });
    let mut c = cp.kubectl();
    c.args(["create", "--dry-run=server", "-f", "-"]);
    run_with_stdin(&mut c, &pod.to_string())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn get_json(cp: &ControlPlane, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cp.kubectl_ok(&all).unwrap()).unwrap()
}

/// The release's workloads, all Ready on the kwok nodes.
fn wait_ready(cp: &ControlPlane, what: &str) {
    let ready = wait_for(Duration::from_secs(180), || {
        let list = get_json(
            cp,
            &["get", "deployments,statefulsets,daemonsets", "-n", NS],
        );
        let items = list["items"].as_array()?.clone();
        let n = |v: &Value| v.as_i64().unwrap_or(0);
        items
            .iter()
            .all(|o| {
                let st = &o["status"];
                match o["kind"].as_str().unwrap_or("") {
                    "DaemonSet" => {
                        n(&st["desiredNumberScheduled"]) >= 1
                            && n(&st["numberReady"]) == n(&st["desiredNumberScheduled"])
                            && n(&st["updatedNumberScheduled"]) == n(&st["desiredNumberScheduled"])
                    }
                    _ => {
                        let want = o["spec"]["replicas"].as_i64().unwrap_or(1);
                        n(&st["readyReplicas"]) == want
                            && n(&st["updatedReplicas"]) == want
                            && st["observedGeneration"] == o["metadata"]["generation"]
                    }
                }
            })
            .then_some(items.len())
    });
    if ready.is_none() {
        let events = cp
            .kubectl_ok(&["get", "events", "-n", NS, "--sort-by=.lastTimestamp"])
            .unwrap_or_default();
        let state = cp
            .kubectl_ok(&["get", "all,pvc", "-n", NS, "-o", "wide"])
            .unwrap_or_default();
        panic!("{what}: workloads not ready\n{state}\nevents:\n{events}");
    }
}

/// The Pod Security and RBAC claims of deploy_applied_k8s.rs, on what the release installed.
fn check_least_privilege(cp: &ControlPlane, what: &str) {
    let workloads = get_json(
        cp,
        &["get", "deployments,statefulsets,daemonsets", "-n", NS],
    );
    let mut seen = Vec::new();
    for o in workloads["items"].as_array().unwrap() {
        let name = o["metadata"]["name"].as_str().unwrap();
        seen.push(name.to_string());
        let template = &o["spec"]["template"];
        let w = format!("{what}: {} {name}", o["kind"].as_str().unwrap());
        for c in template["spec"]["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            assert_ne!(sc["privileged"], json!(true), "{w}: privileged container");
            assert_eq!(
                sc["readOnlyRootFilesystem"],
                json!(true),
                "{w}: writable root"
            );
            assert_eq!(sc["allowPrivilegeEscalation"], json!(false), "{w}");
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{w}");
        }
        if name == "greenpipe-exporter" {
            let add = &template["spec"]["containers"][0]["securityContext"]["capabilities"]["add"];
            assert_eq!(
                add,
                &json!(["BPF", "PERFMON", "SYS_RESOURCE", "SYS_PTRACE"]),
                "{w}"
            );
            admitted_at(cp, template, "privileged").unwrap_or_else(|e| panic!("{w}: {e}"));
            let refused = admitted_at(cp, template, "baseline").expect_err(&w);
            assert!(refused.contains("violates PodSecurity"), "{w}: {refused}");
        } else {
            admitted_at(cp, template, "baseline").unwrap_or_else(|e| panic!("{w}: {e}"));
        }
        if ["greenpipe-estimator", "prometheus"].contains(&name) {
            admitted_at(cp, template, "restricted")
                .unwrap_or_else(|e| panic!("{w}: not restricted-clean: {e}"));
        }
    }
    assert!(
        seen.contains(&"greenpipe-exporter".to_string())
            && seen.contains(&"greenpipe-estimator".to_string()),
        "{what}: workloads {seen:?}"
    );
    // Helm 3.22 does not print the API server's Pod Security warnings; the dry runs above are
    // what shows which level admits each pod.

    let accounts = get_json(cp, &["get", "serviceaccounts", "-n", NS]);
    let mut checked = 0;
    for sa in accounts["items"].as_array().unwrap() {
        let name = sa["metadata"]["name"].as_str().unwrap();
        if name == "default" {
            continue;
        }
        checked += 1;
        let kc = cp.service_account_kubeconfig(NS, name).unwrap();
        let may = |verb: &str, resource: &str, ns: Option<&str>| {
            cp.can_i(&kc, verb, resource, ns)
                .unwrap_or_else(|e| panic!("{what}: can-i as {name}: {e}"))
        };
        let w = format!("{what}: ServiceAccount {name}");
        for (verb, resource) in [
            ("get", "secrets"),
            ("list", "secrets"),
            ("create", "pods"),
            ("delete", "pods"),
            ("create", "pods/exec"),
            ("create", "serviceaccounts/token"),
            ("escalate", "roles.rbac.authorization.k8s.io"),
            ("bind", "clusterroles.rbac.authorization.k8s.io"),
        ] {
            assert!(!may(verb, resource, Some(NS)), "{w} may {verb} {resource}");
            assert!(
                !may(verb, resource, None),
                "{w} may {verb} {resource} anywhere"
            );
        }
        match name {
            "prometheus" => {
                for verb in ["get", "list", "watch"] {
                    assert!(may(verb, "pods", Some(NS)), "{w} cannot {verb} pods");
                    assert!(
                        !may(verb, "pods", Some("kube-system")),
                        "{w}: pods elsewhere"
                    );
                }
                assert!(!may("list", "nodes", None), "{w} may list nodes");
                assert!(!may("patch", "nodes", None), "{w} may patch nodes");
            }
            "greenpipe-carbon" => {
                for verb in ["get", "list", "patch"] {
                    assert!(may(verb, "nodes", None), "{w} cannot {verb} nodes");
                }
                assert!(!may("delete", "nodes", None), "{w} may delete nodes");
                assert!(!may("list", "pods", None), "{w} may list pods");
            }
            "greenpipe-exporter" | "greenpipe-estimator" => {
                assert!(!may("patch", "nodes", None), "{w} may patch nodes");
                let rules = run_ok(
                    Command::new("kubectl")
                        .arg("--kubeconfig")
                        .arg(&kc)
                        .args(["auth", "can-i", "--list", "-n", NS]),
                )
                .unwrap();
                for line in rules.lines().skip(1) {
                    let resource = line.split_whitespace().next().unwrap_or("");
                    assert!(
                        resource.starts_with("selfsubject") || resource.starts_with('['),
                        "{w} has a rule beyond the defaults: {line}\n{rules}"
                    );
                }
                assert_eq!(sa["automountServiceAccountToken"], json!(false), "{w}");
                let pods = get_json(cp, &["get", "pods", "-n", NS]);
                for p in pods["items"].as_array().unwrap() {
                    if p["spec"]["serviceAccountName"] == name {
                        assert!(
                            !p["spec"]["volumes"].to_string().contains("kube-api-access"),
                            "{w}: pod {} got a token",
                            p["metadata"]["name"]
                        );
                    }
                }
            }
            other => panic!("{what}: ServiceAccount {other} has no stated needs in this test"),
        }
    }
    assert!(checked >= 2, "{what}: {checked} ServiceAccounts");
}

/// The estimator's pod 0: (uid, checksum annotation, MODEL_FILE).
fn estimator_pod(cp: &ControlPlane) -> Option<(String, String, String)> {
    let p = cp
        .get(&format!(
            "/api/v1/namespaces/{NS}/pods/greenpipe-estimator-0"
        ))
        .ok()??;
    if !p["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let ready = p["status"]["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let env = p["spec"]["containers"][0]["env"].as_array()?;
    let model = env.iter().find(|e| e["name"] == "MODEL_FILE")?["value"]
        .as_str()?
        .to_string();
    ready.then(|| {
        (
            p["metadata"]["uid"].as_str().unwrap_or("").to_string(),
            p["metadata"]["annotations"]["checksum/config"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            model,
        )
    })
}

/// Claim name -> (uid, bound volume), of the claims in the namespace.
fn claims(cp: &ControlPlane) -> BTreeMap<String, (String, String)> {
    let list = get_json(cp, &["get", "pvc", "-n", NS]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_string(),
                (
                    c["metadata"]["uid"].as_str().unwrap().to_string(),
                    c["spec"]["volumeName"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

/// After `helm uninstall`: nothing in the namespace but `kept` (kind/name) and what the cluster
/// itself puts in every namespace, nor any cluster-wide object of the chart.
fn wait_only_kept(cp: &ControlPlane, kept: &[&str], what: &str) {
    let kinds = cp
        .kubectl_ok(&[
            "api-resources",
            "--verbs=list",
            "--namespaced",
            "-o",
            "name",
        ])
        .unwrap();
    let kinds: Vec<&str> = kinds.lines().filter(|k| !k.starts_with("events")).collect();
    let kinds = kinds.join(",");
    let mut left = Vec::new();
    let clean = wait_for(Duration::from_secs(180), || {
        let list = get_json(cp, &["get", &kinds, "-n", NS]);
        left = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .filter(|k| {
                !kept.contains(&k.as_str())
                    && k != "ServiceAccount/default"
                    && k != "ConfigMap/kube-root-ca.crt"
            })
            .collect();
        left.is_empty().then_some(())
    });
    assert!(clean.is_some(), "{what}: left behind in {NS}: {left:?}");
    let cluster = cp
        .kubectl_ok(&[
            "get",
            "clusterroles,clusterrolebindings",
            "-l",
            "app.kubernetes.io/part-of=greenpipe",
            "-o",
            "name",
        ])
        .unwrap();
    assert!(
        cluster.trim().is_empty(),
        "{what}: cluster-wide leftovers: {cluster}"
    );
    for k in kept {
        let (kind, name) = k.split_once('/').unwrap();
        cp.kubectl_ok(&["get", kind, name, "-n", NS])
            .unwrap_or_else(|e| panic!("{what}: {k}, which should be kept, is gone: {e}"));
    }
}

/// A trained model file that differs from the bundled profile (another idle power).
fn trained_model() -> String {
    let text =
        std::fs::read_to_string(workspace_root().join("estimator/models/profiles/rpi4.json"))
            .unwrap();
    let mut model: Value = serde_json::from_str(&text).unwrap();
    model["models"][0]["name"] = json!("node-a");
    model["models"][0]["idle_power_watts"] = json!(2.9);
    serde_json::to_string_pretty(&model).unwrap()
}

#[test]
fn helm_installs_upgrades_and_uninstalls_on_the_control_plane() {
    let cp = ControlPlane::start().expect("starting the control plane");
    let helm = Helm::new(Some(cp.kubeconfig.clone()));
    // kwok nodes of three architectures: the exporter belongs on the first two only.
    cp.add_fake_nodes(&[
        ("node-amd64", &[]),
        ("node-arm64", &[("kubernetes.io/arch", "arm64")]),
        ("node-riscv", &[("kubernetes.io/arch", "riscv64")]),
    ])
    .expect("kwok nodes");
    for level in ["restricted", "baseline", "privileged"] {
        cp.apply_objects(&[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": format!("psa-{level}"),
            "labels": {"pod-security.kubernetes.io/enforce": level}}}),
        ])
        .unwrap();
    }
    // The Prometheus Operator's and cert-manager's CRDs (as deploy_applied_k8s.rs), so that
    // "auto" finds monitoring.coreos.com/v1 and the TLS upgrade's Certificates are served.
    let crds = workspace_root().join("tests/control-plane/crds");
    cp.kubectl_ok(&["apply", "--server-side", "-f", crds.to_str().unwrap()])
        .expect("CRDs");
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=120s",
    ])
    .unwrap();
    // Static volumes for the claims (no provisioner here); the PV controller binds them.
    let volumes: Vec<Value> = (1..=3)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": format!("test-volume-{i}")},
                "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "greenpipe-test",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": format!("/var/lib/greenpipe-test-{i}")}}})
        })
        .collect();
    cp.apply_objects(&volumes).unwrap();
    // The namespace as the kustomizations define it (Pod Security labels), then the chart.
    cp.apply(
        &std::fs::read_to_string(workspace_root().join("deploy/base/namespace.yaml")).unwrap(),
    )
    .unwrap();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();

    // 1. Standalone with a persistent Prometheus (its TSDB holds the estimator's resume point).
    let persistent = [
        "--set",
        "prometheus.persistence.enabled=true",
        "--set",
        "prometheus.persistence.storageClassName=greenpipe-test",
        "--set",
        "prometheus.persistence.size=1Gi",
    ];
    let mut args = vec![
        "install",
        "greenpipe",
        chart,
        "-n",
        NS,
        "--wait",
        "--timeout",
        "180s",
    ];
    args.extend(persistent);
    let out = helm.run(&args);
    assert!(out.status.success(), "helm install:\n{}", text(&out));
    wait_ready(&cp, "install");
    let ds = get_json(&cp, &["get", "daemonset", "greenpipe-exporter", "-n", NS]);
    assert_eq!(
        ds["status"]["desiredNumberScheduled"],
        json!(2),
        "the exporter belongs on the amd64 and arm64 nodes, not on riscv64"
    );
    check_least_privilege(&cp, "install");
    for kind in ["podmonitor", "servicemonitor", "prometheusrule"] {
        cp.kubectl_ok(&["get", kind, "-n", NS, "-o", "name"])
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| panic!("no {kind}: \"auto\" did not see the operator's API"));
    }
    let before = estimator_pod(&cp).expect("estimator pod 0 ready");
    let claims_before = claims(&cp);
    let data = claims_before
        .get("prometheus-data")
        .unwrap_or_else(|| panic!("no prometheus-data claim: {claims_before:?}"));
    assert!(
        !data.1.is_empty(),
        "prometheus-data not bound: {claims_before:?}"
    );

    // 2. Upgrade: a trained model file becomes the served model, and TLS goes on.
    let model = tmp.path().join("node-a.json");
    std::fs::write(&model, trained_model()).unwrap();
    let set_file = format!("estimator.extraModels.node-a\\.json={}", model.display());
    let tls = example("tls");
    let mut args = vec![
        "upgrade",
        "greenpipe",
        chart,
        "-n",
        NS,
        "--wait",
        "--timeout",
        "180s",
        "--reuse-values",
        "-f",
        tls.to_str().unwrap(),
        "--set-file",
        &set_file,
        "--set",
        "estimator.model=node-a.json",
    ];
    args.extend(persistent);
    let out = helm.run(&args);
    assert!(out.status.success(), "helm upgrade:\n{}", text(&out));
    let replaced = wait_for(Duration::from_secs(180), || {
        estimator_pod(&cp).filter(|p| p.0 != before.0)
    })
    .unwrap_or_else(|| panic!("the estimator pod was not replaced: still {before:?}"));
    assert_ne!(replaced.1, before.1, "checksum annotation unchanged");
    assert_eq!(
        replaced.2, "node-a.json",
        "the new pod serves the new model"
    );
    wait_ready(&cp, "upgrade");
    let models = get_json(&cp, &["get", "configmap", "greenpipe-models", "-n", NS]);
    assert!(
        models["data"]["node-a.json"]
            .as_str()
            .is_some_and(|m| m.contains("\"node-a\"")),
        "the model ConfigMap lacks node-a.json"
    );
    let sts = get_json(
        &cp,
        &["get", "statefulset", "greenpipe-estimator", "-n", NS],
    );
    let args_now = sts["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args_now.contains("--web.config.file"),
        "TLS not on: {args_now}"
    );
    for kind in ["certificate", "issuer", "networkpolicy"] {
        let names = cp
            .kubectl_ok(&["get", kind, "-n", NS, "-o", "name"])
            .unwrap();
        assert!(!names.trim().is_empty(), "no {kind} after the TLS upgrade");
    }
    assert_eq!(
        claims(&cp).get("prometheus-data"),
        Some(data),
        "the resume point's claim was replaced or unbound by the upgrade"
    );
    check_least_privilege(&cp, "upgrade");

    // 3. Uninstall: only the claim that asked to be kept (helm.sh/resource-policy: keep).
    helm.ok(&[
        "uninstall",
        "greenpipe",
        "-n",
        NS,
        "--wait",
        "--timeout",
        "180s",
    ]);
    wait_only_kept(&cp, &["PersistentVolumeClaim/prometheus-data"], "uninstall");
    cp.kubectl_ok(&["delete", "pvc", "prometheus-data", "-n", NS])
        .unwrap();

    // 4. Recalibration with its model versions on a claim per estimator pod, and the carbon
    // controller: the StatefulSet's claim survives an upgrade and, by its retention policy,
    // the uninstall; the carbon controller's cluster-wide RBAC goes.
    cp.kubectl_ok(&[
        "create",
        "configmap",
        "greenpipe-validation-traces",
        "-n",
        NS,
        "--from-literal=none.csv=",
    ])
    .unwrap();
    cp.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "greenpipe-carbon",
        "-n",
        NS,
        "--from-literal=watttime-user=u",
        "--from-literal=watttime-password=p",
        "--from-literal=electricitymaps-token=t",
    ])
    .unwrap();
    let recal = example("recalibration");
    let carbon = example("carbon");
    let base_args = [
        "-n",
        NS,
        "--wait",
        "--timeout",
        "180s",
        "-f",
        recal.to_str().unwrap(),
        "-f",
        carbon.to_str().unwrap(),
        "--set",
        "carbon.remoteWriteUrl=",
        "--set",
        "estimator.recalibration.persistence.enabled=true",
        "--set",
        "estimator.recalibration.persistence.storageClassName=greenpipe-test",
    ];
    let mut args = vec!["install", "greenpipe", chart];
    args.extend(base_args);
    let out = helm.run(&args);
    assert!(
        out.status.success(),
        "helm install (recalibration):\n{}",
        text(&out)
    );
    wait_ready(&cp, "install (recalibration)");
    check_least_privilege(&cp, "install (recalibration)");
    let versions = "model-versions-greenpipe-estimator-0";
    let claim = wait_for(Duration::from_secs(60), || {
        claims(&cp)
            .get(versions)
            .filter(|c| !c.1.is_empty())
            .cloned()
    })
    .unwrap_or_else(|| panic!("{versions} not bound: {:?}", claims(&cp)));
    let before = estimator_pod(&cp).expect("estimator pod 0 ready");
    let mut args = vec!["upgrade", "greenpipe", chart];
    args.extend(base_args);
    args.extend([
        "--set-file",
        &set_file,
        "--set",
        "estimator.model=node-a.json",
    ]);
    helm.ok(&args);
    let replaced = wait_for(Duration::from_secs(180), || {
        estimator_pod(&cp).filter(|p| p.0 != before.0)
    })
    .unwrap_or_else(|| panic!("the estimator pod was not replaced: still {before:?}"));
    assert_eq!(replaced.2, "node-a.json");
    assert_eq!(
        claims(&cp).get(versions),
        Some(&claim),
        "{versions} replaced"
    );
    helm.ok(&[
        "uninstall",
        "greenpipe",
        "-n",
        NS,
        "--wait",
        "--timeout",
        "180s",
    ]);
    wait_only_kept(
        &cp,
        &[
            &format!("PersistentVolumeClaim/{versions}"),
            // The user's own, created before the install.
            "ConfigMap/greenpipe-validation-traces",
            "Secret/greenpipe-carbon",
        ],
        "uninstall (recalibration)",
    );
    assert_eq!(claims(&cp).get(versions), Some(&claim));
}
