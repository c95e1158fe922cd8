//! Every kustomization in deploy/ applied for real (`kubectl apply --server-side`) to a control
//! plane built from source (scripts/control-plane.sh), with Pod Security admission on and kwok
//! nodes that run the pods. The offline counterpart is deploy_manifests.rs (schemas, promtool).
//!
//! Each kustomization is found by walking deploy/ (new ones are picked up without touching this
//! file), applied to an empty cluster state, checked, and deleted before the next one: the
//! overlays are alternatives that share object names. Checked: every object is accepted; every
//! workload's controller gets its pods admitted and, on the kwok nodes, Ready; the exporter's pod
//! is admitted only at the Pod Security level its namespace claims (privileged) and the
//! estimator's even at restricted; the ServiceAccounts can do exactly what their workloads need
//! (SelfSubjectAccessReview with each account's own token).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use greenpipe_tests::control_plane::{run_ok, ControlPlane};
use greenpipe_tests::{files_with_extension, wait_for, workspace_root};
use serde_json::{json, Value};

/// The CRDs the overlays' kinds need: the Prometheus Operator's (v0.85.0, from its Go module's
/// example/prometheus-operator-crd) for PodMonitor, ServiceMonitor and PrometheusRule, and
/// cert-manager's (v1.17.1, from its Go module's deploy/crds via
/// scripts/vendor-cert-manager-crds.sh) for the TLS overlay's Issuers and Certificates.
fn crd_files() -> Vec<PathBuf> {
    files_with_extension(&workspace_root().join("tests/control-plane/crds"), "yaml")
}

/// Every directory under deploy/ with a kustomization file, except Components (which only
/// exist to be included by others).
fn kustomizations() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            }
        }
        for name in ["kustomization.yaml", "kustomization.yml", "Kustomization"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
                if !text.contains("kind: Component") {
                    out.push(dir.to_path_buf());
                }
                break;
            }
        }
    }
    let mut out = Vec::new();
    walk(&workspace_root().join("deploy"), &mut out);
    out
}

fn kustomize(cp: &ControlPlane, dir: &Path) -> Vec<Value> {
    let yaml =
        run_ok(Command::new("kubectl").arg("kustomize").arg(dir)).expect("kubectl kustomize");
    // kubectl turns the stream into one JSON List (a client-side dry run: nothing is sent).
    let mut c = cp.kubectl();
    c.args(["create", "--dry-run=client", "-o", "json", "-f", "-"]);
    let json = greenpipe_tests::control_plane::run_with_stdin(&mut c, &yaml)
        .expect("kubectl converts the build to JSON");
    // One JSON document per object (or one List), then whatever kubectl said on stderr.
    let start = json.find('{').expect("JSON output");
    let mut objects = Vec::new();
    for v in serde_json::Deserializer::from_str(&json[start..]).into_iter::<Value>() {
        let Ok(v) = v else { break };
        match v["kind"].as_str() {
            Some("List") => objects.extend(v["items"].as_array().cloned().unwrap_or_default()),
            _ => objects.push(v),
        }
    }
    objects
}

fn name_of(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The pod a workload's controller would create.
fn pod_from_template(o: &Value, namespace: &str, name: &str) -> Value {
    let template = match o["kind"].as_str() {
        Some("CronJob") => &o["spec"]["jobTemplate"]["spec"]["template"],
        _ => &o["spec"]["template"],
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    })
}

const WORKLOADS: [&str; 5] = ["Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"];

/// Whether a Pod Security level admits a pod: a server-side dry run in a namespace that
/// enforces that level.
fn admitted_at(cp: &ControlPlane, pod: &Value, level: &str) -> Result<(), String> {
    let ns = format!("psa-{level}");
    let mut pod = pod.clone();
    pod["metadata"]["namespace"] = json!(ns);
    // The probe namespace has only the default account; Pod Security does not look at it.
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.remove("serviceAccountName");
        spec.insert("automountServiceAccountToken".into(), json!(false));
    }
    let mut c = cp.kubectl();
    c.args(["create", "--dry-run=server", "-f", "-"]);
    greenpipe_tests::control_plane::run_with_stdin(&mut c, &pod.to_string())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn every_kustomization_applies_server_side_with_pod_security_and_least_privilege() {
    let cp = ControlPlane::start().expect("starting the control plane");
    // Nodes for the workloads: one plain, one wired for profiling and a USB meter (the
    // generic device plugin would advertise squat.ai/serial on it).
    cp.add_fake_nodes(&[
        ("node-1", &[]),
        (
            "node-2",
            &[
                ("greenpipe.io/profiling", "true"),
                ("greenpipe.io/meter", "um25c"),
            ],
        ),
    ])
    .expect("kwok nodes");
    cp.kubectl_ok(&[
        "patch",
        "node",
        "node-2",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"capacity":{"squat.ai/serial":"1"},"allocatable":{"squat.ai/serial":"1"}}}"#,
    ])
    .expect("advertising squat.ai/serial");
    for level in ["restricted", "baseline", "privileged"] {
        cp.apply(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": format!("psa-{level}"),
                "labels": {"pod-security.kubernetes.io/enforce": level}}})
            .to_string(),
        )
        .unwrap();
    }
    for crd in crd_files() {
        cp.kubectl_ok(&["apply", "--server-side", "-f", crd.to_str().unwrap()])
            .unwrap_or_else(|e| panic!("CRD {}: {e}", crd.display()));
    }
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=120s",
    ])
    .unwrap();
    let served_kinds = cp.kubectl_ok(&["api-resources", "-o", "name"]).unwrap();

    let dirs = kustomizations();
    assert!(
        dirs.iter().any(|d| d.ends_with("base")),
        "deploy/base not found among {dirs:?}"
    );
    let mut saw_exporter = false;
    let mut saw_estimator = false;
    for dir in &dirs {
        let label = dir
            .strip_prefix(workspace_root())
            .unwrap()
            .display()
            .to_string();
        let objects = kustomize(&cp, dir);
        assert!(!objects.is_empty(), "{label}: builds to nothing");
        for o in &objects {
            if let Some((group, _)) = o["apiVersion"].as_str().and_then(|v| v.split_once('/')) {
                assert!(
                    served_kinds
                        .lines()
                        .any(|l| l.ends_with(&format!(".{group}"))),
                    "{label}: {} needs group {group}, which this API server does not serve; \
                     add its CRD to tests/control-plane/crds",
                    name_of(o)
                );
            }
        }
        // Namespaces the kustomization uses but does not create are created first (deploy/base's
        // definition for greenpipe, with its Pod Security labels).
        let defined: Vec<&str> = objects
            .iter()
            .filter(|o| o["kind"] == "Namespace")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        let mut used: Vec<&str> = objects
            .iter()
            .filter_map(|o| o["metadata"]["namespace"].as_str())
            .collect();
        used.sort();
        used.dedup();
        for ns in used.iter().filter(|ns| !defined.contains(ns)) {
            if *ns == "greenpipe" {
                cp.apply(
                    &std::fs::read_to_string(workspace_root().join("deploy/base/namespace.yaml"))
                        .unwrap(),
                )
                .unwrap();
            } else {
                cp.apply_objects(&[
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                ])
                .unwrap();
            }
        }

        let stream = greenpipe_tests::control_plane::list(&objects).to_string();
        let applied = cp
            .apply(&stream)
            .unwrap_or_else(|e| panic!("{label}: server-side apply refused: {e}"));
        // Every object stored: one `kubectl get` of the whole stream, which fails naming any
        // object it does not find.
        let mut get = cp.kubectl();
        get.args(["get", "-f", "-", "-o", "name"]);
        let stored = greenpipe_tests::control_plane::run_with_stdin(&mut get, &stream)
            .unwrap_or_else(|e| panic!("{label}: not every object stored: {e}"));
        assert_eq!(
            // `kind.group/name` lines; stderr's warnings, if any, have spaces.
            stored
                .lines()
                .filter(|l| l.contains('/') && !l.contains(' '))
                .count(),
            objects.len(),
            "{label}: stored {stored}"
        );

        for o in objects
            .iter()
            .filter(|o| WORKLOADS.contains(&o["kind"].as_str().unwrap_or("")))
        {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
            let name = o["metadata"]["name"].as_str().unwrap();
            let what = format!("{label}: {}", name_of(o));
            wait_workload_ready(&cp, o, ns, name, &what);
            let pod = pod_from_template(o, ns, "psa-probe");
            if name == "greenpipe-exporter" {
                saw_exporter = true;
                // It claims privileged: hostPID, hostNetwork, host paths and added
                // capabilities are beyond baseline.
                assert!(admitted_at(&cp, &pod, "privileged").is_ok(), "{what}");
                let refused = admitted_at(&cp, &pod, "baseline").expect_err(&what);
                assert!(
                    refused.contains("violates PodSecurity"),
                    "{what}: {refused}"
                );
                // The namespace warns at baseline: the apply said so.
                assert!(
                    applied.contains("would violate PodSecurity \"baseline:latest\""),
                    "{what}: no Pod Security warning on apply:\n{applied}"
                );
            }
            if name == "greenpipe-estimator" {
                saw_estimator = true;
                admitted_at(&cp, &pod, "restricted")
                    .unwrap_or_else(|e| panic!("{what}: not restricted-clean: {e}"));
            }
            // The namespace's enforced level admits every workload (else no pods above).
        }

        check_service_accounts(&cp, &objects, &label);

        let mut c = cp.kubectl();
        c.args([
            "delete",
            "--wait=true",
            "--timeout=180s",
            "--ignore-not-found",
            "-f",
            "-",
        ]);
        greenpipe_tests::control_plane::run_with_stdin(&mut c, &stream)
            .unwrap_or_else(|e| panic!("{label}: delete: {e}"));
    }
    assert!(
        saw_exporter && saw_estimator,
        "the exporter or the estimator was not seen"
    );
}

fn wait_workload_ready(cp: &ControlPlane, o: &Value, ns: &str, name: &str, what: &str) {
    let kind = o["kind"].as_str().unwrap();
    let path = match kind {
        "Deployment" => format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
        "StatefulSet" => format!("/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"),
        "DaemonSet" => format!("/apis/apps/v1/namespaces/{ns}/daemonsets/{name}"),
        "Job" => format!("/apis/batch/v1/namespaces/{ns}/jobs/{name}"),
        _ => return, // a CronJob creates nothing until its schedule fires
    };
    let ready = wait_for(Duration::from_secs(180), || {
        let s = cp.get(&path).ok()??;
        let st = &s["status"];
        let n = |v: &Value| v.as_i64().unwrap_or(0);
        let ok = match kind {
            "Deployment" | "StatefulSet" => {
                n(&st["readyReplicas"]) == s["spec"]["replicas"].as_i64().unwrap_or(1)
            }
            "DaemonSet" => {
                n(&st["desiredNumberScheduled"]) >= 1
                    && n(&st["numberReady"]) == n(&st["desiredNumberScheduled"])
            }
            "Job" => n(&st["active"]) + n(&st["succeeded"]) >= 1,
            _ => true,
        };
        ok.then_some(())
    });
    if ready.is_none() {
        let events = cp
            .kubectl_ok(&["get", "events", "-n", ns, "--sort-by=.lastTimestamp"])
            .unwrap_or_default();
        let status = cp.get(&path).ok().flatten().map(|s| s["status"].clone());
        panic!("{what}: pods not admitted and ready; status {status:?}\nevents:\n{events}");
    }
}

/// Each ServiceAccount the kustomization creates can do what its workload needs, no more:
/// checked with the account's own token (SelfSubjectAccessReview via `kubectl auth can-i`).
fn check_service_accounts(cp: &ControlPlane, objects: &[Value], label: &str) {
    for sa in objects.iter().filter(|o| o["kind"] == "ServiceAccount") {
        let name = sa["metadata"]["name"].as_str().unwrap();
        let ns = sa["metadata"]["namespace"].as_str().unwrap_or("default");
        let kc = cp.service_account_kubeconfig(ns, name).unwrap();
        let may = |verb: &str, resource: &str, in_ns: Option<&str>| {
            cp.can_i(&kc, verb, resource, in_ns)
                .unwrap_or_else(|e| panic!("{label}: can-i as {name}: {e}"))
        };
        let what = format!("{label}: ServiceAccount {ns}/{name}");
        // What nobody here needs.
        for (verb, resource) in [
            ("get", "secrets"),
            ("list", "secrets"),
            ("create", "pods"),
            ("delete", "pods"),
            ("create", "pods/exec"),
            ("patch", "nodes"),
            ("create", "serviceaccounts/token"),
            ("escalate", "roles.rbac.authorization.k8s.io"),
            ("bind", "clusterroles.rbac.authorization.k8s.io"),
        ] {
            assert!(
                !may(verb, resource, Some(ns)),
                "{what} may {verb} {resource}"
            );
            assert!(
                !may(verb, resource, None),
                "{what} may {verb} {resource} cluster-wide"
            );
        }
        match name {
            // Prometheus discovers pods of its own namespace, read-only.
            "prometheus" => {
                // The reviews answer as kubectl's own can-i does, both ways.
                for (verb, resource) in [("list", "pods"), ("get", "secrets")] {
                    let out = Command::new("kubectl")
                        .arg("--kubeconfig")
                        .arg(&kc)
                        .args(["auth", "can-i", verb, resource, "-n", ns])
                        .output()
                        .unwrap();
                    let kubectl_says = String::from_utf8_lossy(&out.stdout).trim() == "yes";
                    assert_eq!(
                        may(verb, resource, Some(ns)),
                        kubectl_says,
                        "{what}: {verb} {resource}: the review and kubectl auth can-i disagree"
                    );
                }
                for verb in ["get", "list", "watch"] {
                    assert!(may(verb, "pods", Some(ns)), "{what} cannot {verb} pods");
                    assert!(
                        !may(verb, "pods", Some("kube-system")),
                        "{what} may {verb} pods elsewhere"
                    );
                }
                assert!(!may("list", "nodes", None), "{what} may list nodes");
                assert!(
                    !may("list", "services", Some(ns)),
                    "{what} may list services"
                );
            }
            // The exporter and the estimator never call the API: no access at all, and no
            // token in their pods.
            "greenpipe-exporter" | "greenpipe-estimator" => {
                let rules = run_ok(
                    Command::new("kubectl")
                        .arg("--kubeconfig")
                        .arg(&kc)
                        .args(["auth", "can-i", "--list", "-n", ns]),
                )
                .unwrap();
                for line in rules.lines().skip(1) {
                    let resource = line.split_whitespace().next().unwrap_or("");
                    // The self-reviews every authenticated user has (system:basic-user), and
                    // non-resource discovery URLs (lines starting with []).
                    assert!(
                        resource.starts_with("selfsubject") || resource.starts_with('['),
                        "{what} has a rule beyond the defaults: {line}\n{rules}"
                    );
                }
                assert_eq!(
                    sa["automountServiceAccountToken"],
                    json!(false),
                    "{what} mounts a token it never uses"
                );
            }
            // Accounts added later get the checks above; their own needs belong here.
            _ => {}
        }
    }
    // Pods of workloads whose account mounts no token really have none.
    for o in objects
        .iter()
        .filter(|o| WORKLOADS.contains(&o["kind"].as_str().unwrap_or("")))
    {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
        let sa = o["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap_or("default");
        let mounts_none = objects.iter().any(|s| {
            s["kind"] == "ServiceAccount"
                && s["metadata"]["name"] == sa
                && s["automountServiceAccountToken"] == json!(false)
        });
        if !mounts_none {
            continue;
        }
        let pods = cp
            .get(&format!("/api/v1/namespaces/{ns}/pods"))
            .unwrap()
            .unwrap();
        for p in pods["items"].as_array().unwrap() {
            if p["spec"]["serviceAccountName"] != sa {
                continue;
            }
            let volumes = p["spec"]["volumes"].to_string();
            assert!(
                !volumes.contains("kube-api-access"),
                "{label}: pod {} of {sa} got a token volume",
                p["metadata"]["name"]
            );
        }
    }
}
