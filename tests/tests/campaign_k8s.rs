//! `greenpipe-campaign run --kubernetes` against a real control plane (etcd,
//! kube-apiserver, kube-controller-manager with its Job controller, kube-scheduler, kwok; see
//! scripts/control-plane.sh). kwok's fake kubelets run nothing: a Job's pod "runs" until the
//! standard annotation `pod-complete.stage.kwok.x-k8s.io/delay` has passed, and kwok's chaos stage
//! fails the containers of a pod labelled `pod-container-running-failed.stage.kwok.x-k8s.io`
//! with the exit code its annotation gives. So this checks what the runner does with the cluster
//! — the Jobs it creates, where they land, the windows it takes from the pods' status, the
//! failure it records, Ctrl-C, cleanup and resume — not energy, which kwok pods cannot use (the
//! campaign's energy is covered by campaign.rs in local mode).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use greenpipe_tests::control_plane::{ControlPlane, Watch};
use greenpipe_tests::{wait_for, workspace_binary, Guard, Prometheus};
use serde_json::{json, Value};

const NS: &str = "greenpipe";
const NODE: &str = "edge-1";

const PLAN: &str = r#"
[campaign]
warmup_seconds = 1
idle_seconds = 1
step_seconds = 3

[[step]]
name = "one"
group = "micro"
tag = "train"
[step.kubernetes]
annotations = { "pod-complete.stage.kwok.x-k8s.io/delay" = "300s" }
[[step.process]]
command = "greenpipe-workload"
args = ["bench", "micro", "--only", "cpu-int", "--levels", "100", "--step", "{timeout}",
        "--gap", "0s", "--scratch", "{out}"]

[[step]]
name = "two-fails"
group = "micro"
tag = "train"
[step.kubernetes]
labels = { "pod-container-running-failed.stage.kwok.x-k8s.io" = "true" }
annotations = { "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code" = "3" }
[[step.process]]
command = "sh"
args = ["-c", "exit 3"]

[[step]]
name = "three"
group = "combined"
tag = "validate"
# Long enough that the test's SIGINT lands inside it however loaded the machine is.
seconds = 10
[step.kubernetes]
annotations = { "pod-complete.stage.kwok.x-k8s.io/delay" = "300s" }
[[step.process]]
name = "server"
command = "greenpipe-workload"
measure = true
args = ["serve", "--model", "mobilenet_v2", "--grpc.listen-address", "127.0.0.1:{port:grpc}",
        "--node", "{node}"]
[[step.process]]
name = "client"
command = "greenpipe-workload"
args = ["client", "--target", "127.0.0.1:{port:grpc}", "--duration", "{timeout}"]
"#;

fn windows(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("windows.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The objects of a watch's ADDED events.
fn added(w: &Watch) -> Vec<Value> {
    w.events()
        .into_iter()
        .filter(|(_, e)| e["type"] == "ADDED")
        .map(|(_, e)| e["object"].clone())
        .collect()
}

fn step_of(o: &Value) -> String {
    o["metadata"]["annotations"]["greenpipe.io/campaign-step"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn time(v: &Value) -> f64 {
    let t = humantime::parse_rfc3339(v.as_str().expect("a time")).expect("RFC 3339");
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Every state a pod was seen in, by pod UID: (step, node, last container start while running,
/// first terminated finishedAt).
#[derive(Debug, Default, Clone)]
struct PodSeen {
    step: String,
    node: String,
    started: Option<f64>,
    finished: Option<f64>,
    exit_code: Option<i64>,
}

fn pods_seen(w: &Watch) -> BTreeMap<String, PodSeen> {
    let mut seen: BTreeMap<String, PodSeen> = BTreeMap::new();
    for (_, e) in w.events() {
        let p = &e["object"];
        let uid = p["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let s = seen.entry(uid).or_default();
        s.step = step_of(p);
        if let Some(n) = p["spec"]["nodeName"].as_str() {
            s.node = n.to_string();
        }
        let cs = p["status"]["containerStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let running: Vec<f64> = cs
            .iter()
            .filter_map(|c| {
                c["state"]["running"]["startedAt"]
                    .as_str()
                    .map(|_| time(&c["state"]["running"]["startedAt"]))
            })
            .collect();
        if !cs.is_empty() && running.len() == cs.len() && s.started.is_none() {
            s.started = running.into_iter().reduce(f64::max);
        }
        if s.finished.is_none() {
            if let Some(t) = cs.iter().find(|c| c["state"]["terminated"].is_object()) {
                s.finished = Some(time(&t["state"]["terminated"]["finishedAt"]));
                s.exit_code = t["state"]["terminated"]["exitCode"].as_i64();
            }
        }
    }
    seen
}

fn items(cp: &ControlPlane, path: &str) -> Vec<Value> {
    cp.get(path).unwrap().unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn kubernetes_campaign_runs_jobs_pinned_to_the_node_and_resumes() {
    let cp = ControlPlane::start().expect("control plane");
    // Two nodes, so that landing on the right one is the runner's doing.
    cp.add_fake_nodes(&[(NODE, &[]), ("edge-2", &[])])
        .expect("kwok nodes");
    cp.kubectl_ok(&["create", "namespace", NS]).unwrap();
    // Restricted Pod Security, as for the workload manifests: the Jobs must pass it.
    cp.kubectl_ok(&[
        "label",
        "namespace",
        NS,
        "pod-security.kubernetes.io/enforce=restricted",
    ])
    .unwrap();
    let job_watch = cp
        .watch(&format!("/apis/batch/v1/namespaces/{NS}/jobs"))
        .unwrap();
    let pod_watch = cp.watch(&format!("/api/v1/namespaces/{NS}/pods")).unwrap();
    // Nothing to scrape: the analysis after the steps finds no meter data, as the report says.
    let prom = Prometheus::start(&[], "1s").expect("prometheus");

    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let out = dir.path().join("campaign");
    let campaign = || {
        let mut c = Command::new(workspace_binary("greenpipe-campaign"));
        c.args(["run", "--kubernetes", "--plan"])
            .arg(&plan)
            .args(["--node", NODE, "--prometheus-url", &prom.url, "--out"])
            .arg(&out)
            .env("KUBECONFIG", &cp.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        c
    };

    // First run: SIGINT once step three's pod runs (steps one and two-fails are recorded).
    let log = dir.path().join("first.log");
    let child = campaign()
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut first = Guard::new("campaign", child);
    wait_for(Duration::from_secs(120), || {
        pods_seen(&pod_watch)
            .values()
            .any(|p| p.step == "three" && p.started.is_some())
            .then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "step three's pod never ran:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(first.pid() as i32, libc::SIGINT);
    }
    let status = first
        .wait_exit(Duration::from_secs(90))
        .expect("the campaign stops on SIGINT");
    let first_log = std::fs::read_to_string(&log).unwrap();
    assert!(
        !status.success(),
        "an interrupted run succeeded:\n{first_log}"
    );
    let w = windows(&out);
    let by_step = |w: &[Value], s: &str| -> Vec<Value> {
        w.iter().filter(|x| x["workload"] == s).cloned().collect()
    };
    assert_eq!(by_step(&w, "one")[0]["status"], "complete", "{w:?}");
    assert_eq!(by_step(&w, "two-fails")[0]["status"], "failed", "{w:?}");
    assert_eq!(by_step(&w, "three")[0]["status"], "interrupted", "{w:?}");
    // Ctrl-C deleted the running Job; nothing of the campaign is left.
    assert!(items(&cp, &format!("/apis/batch/v1/namespaces/{NS}/jobs")).is_empty());
    wait_for(Duration::from_secs(60), || {
        items(&cp, &format!("/api/v1/namespaces/{NS}/pods"))
            .is_empty()
            .then_some(())
    })
    .expect("the interrupted step's pod is deleted");

    // Rerun: only step three runs.
    let rerun = campaign().output().unwrap();
    let stderr = String::from_utf8_lossy(&rerun.stderr);
    assert!(rerun.status.success(), "rerun failed:\n{stderr}");
    assert!(
        stderr.contains("resuming: 2 of 3 steps already done, 1 to run"),
        "{stderr}"
    );
    let jobs = added(&job_watch);
    let jobs_of = |s: &str| jobs.iter().filter(|j| step_of(j) == s).count();
    assert_eq!(
        (jobs_of("one"), jobs_of("two-fails"), jobs_of("three")),
        (1, 1, 2),
        "Jobs per step"
    );
    assert!(items(&cp, &format!("/apis/batch/v1/namespaces/{NS}/jobs")).is_empty());
    wait_for(Duration::from_secs(60), || {
        items(&cp, &format!("/api/v1/namespaces/{NS}/pods"))
            .is_empty()
            .then_some(())
    })
    .expect("every step's pod is deleted");

    // Each Job: pinned to the node, labelled for Prometheus' workload job, the plan's commands.
    for j in &jobs {
        let step = step_of(j);
        let pod = &j["spec"]["template"];
        assert_eq!(
            pod["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]),
            "{step}"
        );
        let labels = &pod["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/component"], "workload", "{step}");
        assert_eq!(labels["app.kubernetes.io/name"], "greenpipe-campaign");
        assert_eq!(labels["greenpipe.io/campaign-step"], step.as_str());
        assert_eq!(labels["greenpipe.io/campaign-node"], NODE);
        assert_eq!(j["spec"]["backoffLimit"], 0);
        let c = &pod["spec"]["containers"];
        assert!(c
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["image"] == "ghcr.io/greenpipe/greenpipe-workload:0.1.0"));
        match step.as_str() {
            "one" => {
                assert_eq!(c[0]["command"], json!(["greenpipe-workload"]));
                // {timeout} = warm-up + window + 30 s; {out} = the pod's scratch volume.
                assert_eq!(
                    c[0]["args"],
                    json!([
                        "bench",
                        "micro",
                        "--only",
                        "cpu-int",
                        "--levels",
                        "100",
                        "--step",
                        "34s",
                        "--gap",
                        "0s",
                        "--scratch",
                        "/scratch"
                    ])
                );
            }
            "two-fails" => {
                assert_eq!(c[0]["command"], json!(["sh"]));
                assert_eq!(c[0]["args"], json!(["-c", "exit 3"]));
            }
            "three" => {
                assert_eq!(c.as_array().unwrap().len(), 2, "one container per process");
                assert_eq!(c[0]["name"], "server");
                assert_eq!(c[1]["name"], "client");
                // The processes share the pod's network: the client reaches its server on
                // loopback, on the port the runner chose for {port:grpc}.
                assert_eq!(c[0]["args"][4], "127.0.0.1:8001");
                assert_eq!(c[0]["args"][6], NODE);
                assert_eq!(c[1]["args"][2], "127.0.0.1:8001");
            }
            other => panic!("a Job of no step: {other:?}"),
        }
    }

    // The windows come from the pods' status: start = the containers' start + warm-up, end =
    // start + the window (complete) or the container's finish (failed); the pod UIDs are the
    // pods'; every pod ran on the node.
    let pods = pods_seen(&pod_watch);
    assert!(pods.values().all(|p| p.node == NODE), "{pods:?}");
    let w = windows(&out);
    eprintln!(
        "windows.jsonl:\n{}",
        std::fs::read_to_string(out.join("windows.jsonl")).unwrap()
    );
    assert_eq!(
        w.len(),
        4,
        "one, two-fails, three interrupted, three: {w:?}"
    );
    for rec in &w {
        let step = rec["workload"].as_str().unwrap();
        let uid = rec["pod_uid"].as_str().unwrap();
        let (start, end) = (rec["start"].as_f64().unwrap(), rec["end"].as_f64().unwrap());
        match rec["status"].as_str().unwrap() {
            "complete" => {
                let p = &pods[uid];
                assert_eq!(p.step, step);
                assert_eq!(start, p.started.unwrap() + 1.0, "{step}: {rec}");
                let window = if step == "three" { 10.0 } else { 3.0 };
                assert_eq!(end, start + window, "{step}: {rec}");
                assert!(rec["complete"].as_bool().unwrap());
                assert!(!rec["containers"].as_object().unwrap().is_empty());
            }
            "failed" => {
                assert_eq!(step, "two-fails");
                let p = pods
                    .values()
                    .find(|p| p.step == "two-fails")
                    .expect("the failing step's pod");
                assert_eq!(p.exit_code, Some(3));
                assert_eq!(end, p.finished.unwrap(), "{rec}");
                let e = rec["error"].as_str().unwrap();
                assert!(e.contains("exited with code 3"), "{e}");
            }
            "interrupted" => assert_eq!(step, "three"),
            s => panic!("status {s}"),
        }
    }
    // The report lists the failure and, with no meter here, the windows without meter data.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| two-fails | micro | train | failed |"),
        "{report}"
    );

    // A third run has nothing to do and creates no Job.
    let again = campaign().output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(added(&job_watch).len(), jobs.len());
    assert_eq!(windows(&out).len(), 4);
}
