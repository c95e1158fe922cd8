//! The carbon placement controller against a real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok), built from source by
//! scripts/control-plane.sh.
//!
//! Three kwok nodes in three zones; each zone's carbon series is a canonical CSV file that the
//! test rewrites to move the zones between classes. The controller runs as its own process with
//! the ServiceAccount and RBAC of deploy/carbon/rbac.yaml (a bound token, as a pod gets). The
//! scheduler and the taint-eviction controller are the real ones, unmodified: the reference demo
//! pod is evicted from the node that turns red only after its tolerationSeconds, and its
//! Deployment's replacement is scheduled onto the node that turned green.
//!
//! One test function: the control plane takes a while to start, and the phases build on each
//! other's nodes.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenpipe_tests::control_plane::{run_ok, ControlPlane};
use greenpipe_tests::{carbon_command, wait_for, workspace_root, Guard};
use serde_json::{json, Value};

const KEY: &str = "greenpipe.io/carbon-intensity";
const SINCE: &str = "greenpipe.io/carbon-intensity-since";
const NODES: [(&str, &str); 3] = [("edge-a", "ZA"), ("edge-b", "ZB"), ("edge-c", "ZC")];
/// How long the demo pod tolerates the red taint, and its termination grace period.
const TOLERATION_SECONDS: i64 = 5;
const GRACE_SECONDS: i64 = 1;
const HOUR: i64 = 3600;

struct Cluster {
    cp: ControlPlane,
    /// Kubeconfig of ServiceAccount greenpipe/greenpipe-carbon.
    controller_kubeconfig: PathBuf,
    series: tempfile::TempDir,
}

impl Cluster {
    fn series_path(&self, zone: &str) -> PathBuf {
        self.series.path().join(format!("{zone}.csv"))
    }

    /// Publishes every zone's series: `days` of hourly history at a constant level ending at
    /// the hour of `end` (canonical CSV, written to a temporary file and renamed, so the
    /// controller never reads half a file).
    fn publish(&self, levels: &[(&str, f64)], end: i64) {
        let last = end.div_euclid(HOUR) * HOUR;
        for (zone, level) in levels {
            let mut csv = String::from("timestamp,zone,carbon_intensity_gco2_per_kwh\n");
            for h in (0..10 * 24).rev() {
                csv.push_str(&format!("{},{zone},{level}\n", last - h * HOUR));
            }
            let path = self.series_path(zone);
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, csv).expect("writing series");
            std::fs::rename(&tmp, &path).expect("publishing series");
        }
    }

    /// `carbon place` for the three zones, authenticated as the controller's ServiceAccount.
    fn place(&self, args: &[&str]) -> Command {
        let mut c = carbon_command();
        c.arg("place");
        for (_, zone) in NODES {
            c.arg(format!(
                "--source={zone}=csv:{}",
                self.series_path(zone).display()
            ));
        }
        c.args(["--horizon=1h"])
            .args(args)
            .env("KUBECONFIG", &self.controller_kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        c
    }

    /// One `--once` round; returns its stdout (the plan) and stderr (the log).
    fn round(&self, args: &[&str]) -> (String, String) {
        let out = self
            .place(&[&["--once"], args].concat())
            .stdin(Stdio::null())
            .output()
            .expect("running greenpipe-carbon place");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            out.status.success(),
            "carbon place {args:?} failed:\n{stdout}\n{stderr}"
        );
        (stdout, stderr)
    }

    fn node(&self, name: &str) -> Value {
        self.cp
            .get(&format!("/api/v1/nodes/{name}"))
            .expect("GET node")
            .expect("node exists")
    }

    /// (label, our taint present, the since annotation) of a node.
    fn class_of(&self, name: &str) -> (Option<String>, bool, Option<String>) {
        let n = self.node(name);
        (
            n["metadata"]["labels"][KEY].as_str().map(str::to_string),
            our_taint(&n).is_some(),
            n["metadata"]["annotations"][SINCE]
                .as_str()
                .map(str::to_string),
        )
    }

    fn classes(&self) -> BTreeMap<String, (Option<String>, bool, Option<String>)> {
        NODES
            .iter()
            .map(|(n, _)| (n.to_string(), self.class_of(n)))
            .collect()
    }

    fn wait_class(&self, name: &str, class: &str, tainted: bool) {
        let ok = wait_for(Duration::from_secs(60), || {
            let (label, t, _) = self.class_of(name);
            (label.as_deref() == Some(class) && t == tainted).then_some(())
        });
        assert!(
            ok.is_some(),
            "{name} did not become {class} (tainted: {tainted}); it is {:?}",
            self.class_of(name)
        );
    }
}

fn our_taint(node: &Value) -> Option<Value> {
    node["spec"]["taints"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == KEY)
        .cloned()
}

/// Unix seconds of an RFC 3339 stamp (whole seconds for metav1.Time, microseconds for the
/// audit log's MicroTime).
fn epoch(v: &Value) -> f64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    let out = run_ok(Command::new("date").args(["-u", "-d", s, "+%s.%N"])).expect("date -d");
    out.trim().parse().expect("epoch seconds")
}

fn rfc3339(v: &Value) -> i64 {
    epoch(v) as i64
}

/// When the API server completed the first audited request matching `f` (µs resolution).
fn audited(c: &Cluster, what: &str, f: impl Fn(&Value) -> bool) -> f64 {
    let e =
        c.cp.audit_events()
            .into_iter()
            .find(|e| f(e))
            .unwrap_or_else(|| panic!("no audit event for {what}"));
    epoch(&e["stageTimestamp"])
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn setup() -> Cluster {
    let cp = ControlPlane::start().expect("starting the control plane");
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "greenpipe"}})
            .to_string(),
    )
    .expect("namespace");
    let rbac = std::fs::read_to_string(workspace_root().join("deploy/carbon/rbac.yaml"))
        .expect("deploy/carbon/rbac.yaml");
    cp.apply(&rbac).expect("applying deploy/carbon/rbac.yaml");
    let nodes: Vec<(&str, Vec<(&str, &str)>)> = NODES
        .iter()
        .map(|(n, z)| (*n, vec![("topology.kubernetes.io/zone", *z)]))
        .collect();
    let refs: Vec<(&str, &[(&str, &str)])> =
        nodes.iter().map(|(n, l)| (*n, l.as_slice())).collect();
    cp.add_fake_nodes(&refs).expect("kwok nodes");
    let controller_kubeconfig = cp
        .service_account_kubeconfig("greenpipe", "greenpipe-carbon")
        .expect("controller token");
    Cluster {
        cp,
        controller_kubeconfig,
        series: tempfile::tempdir().expect("series dir"),
    }
}

#[test]
fn carbon_placement_on_a_real_control_plane() {
    let c = setup();
    rbac_allows_nodes_get_list_patch_only(&c);
    dry_run_changes_nothing(&c);
    demo_pod_moves_from_red_to_green(&c);
    hysteresis_and_dwell_hold_under_a_flapping_series(&c);
    conflict_is_retried_and_foreign_taint_kept(&c);
}

/// The controller's account: nodes get/list/patch, nothing else; a write elsewhere is refused
/// by the API server.
fn rbac_allows_nodes_get_list_patch_only(c: &Cluster) {
    let kc = &c.controller_kubeconfig;
    for verb in ["get", "list", "patch"] {
        assert!(c.cp.can_i(kc, verb, "nodes", None).unwrap(), "{verb} nodes");
    }
    for (verb, resource) in [
        ("update", "nodes"),
        ("delete", "nodes"),
        ("create", "nodes"),
        ("watch", "nodes"),
        ("patch", "nodes/status"),
        ("get", "pods"),
        ("delete", "pods"),
        ("create", "pods/eviction"),
        ("get", "secrets"),
        ("create", "configmaps"),
        ("patch", "deployments.apps"),
    ] {
        assert!(
            !c.cp.can_i(kc, verb, resource, None).unwrap(),
            "the controller's account may {verb} {resource}"
        );
    }
    // Not just the review: real writes are refused.
    let denied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["create", "configmap", "x", "-n", "greenpipe"])
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&denied.stderr);
    assert!(
        !denied.status.success() && msg.contains("forbidden"),
        "creating a ConfigMap as the controller: {msg}"
    );
    let denied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["delete", "node", "edge-a", "--wait=false"])
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&denied.stderr);
    assert!(
        !denied.status.success() && msg.contains("forbidden"),
        "deleting a node as the controller: {msg}"
    );
    assert!(c.cp.get("/api/v1/nodes/edge-a").unwrap().is_some());
}

/// `--dry-run` against the API server prints the plan and every patch, and writes nothing.
fn dry_run_changes_nothing(c: &Cluster) {
    c.publish(&[("ZA", 100.0), ("ZB", 200.0), ("ZC", 300.0)], now());
    let before: Vec<Value> = NODES.iter().map(|(n, _)| c.node(n)).collect();
    let (plan, _) = c.round(&["--dry-run", "--min-dwell=0s"]);
    assert!(plan.contains("node edge-a: none -> green"), "{plan}");
    assert!(plan.contains("node edge-b: none -> yellow"), "{plan}");
    assert!(plan.contains("node edge-c: none -> red, taint"), "{plan}");
    assert!(plan.contains("\"op\":\"test\""), "{plan}");
    for (old, (name, _)) in before.iter().zip(NODES) {
        let new = c.node(name);
        assert_eq!(
            old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"],
            "dry run changed {name}"
        );
        assert_eq!(old["metadata"]["labels"], new["metadata"]["labels"]);
        assert_eq!(old["spec"], new["spec"]);
    }
}

fn demo_manifests() -> String {
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "batch", "namespace": "demo"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "batch"}},
            "template": {
                "metadata": {"labels": {"app": "batch"}},
                "spec": {
                    "nodeSelector": {KEY: "green"},
                    "tolerations": [{
                        "key": KEY, "operator": "Equal", "value": "red",
                        "effect": "NoExecute", "tolerationSeconds": TOLERATION_SECONDS,
                    }],
                    "terminationGracePeriodSeconds": GRACE_SECONDS,
                    "containers": [{"name": "work", "image": "busybox:1.36"}],
                },
            },
        },
    });
    // Tolerates red forever, pinned to edge-a: it must stay when edge-a turns red.
    let critical = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "critical", "namespace": "demo"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "edge-a"},
            "tolerations": [{"key": KEY, "operator": "Equal", "value": "red", "effect": "NoExecute"}],
            "containers": [{"name": "db", "image": "postgres:16"}],
        },
    });
    greenpipe_tests::control_plane::list(&[deployment, critical]).to_string()
}

fn pod_node(p: &Value) -> Option<&str> {
    p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
}

/// The reference demo: pod on the green node; its node turns red; the taint manager evicts it
/// after tolerationSeconds; the scheduler puts its replacement on the node that turned green.
fn demo_pod_moves_from_red_to_green(c: &Cluster) {
    let log_path = c.series.path().join("controller.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let controller = c
        .place(&["--interval=1s", "--min-dwell=0s", "--hysteresis=10"])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("starting carbon place");
    let mut controller = Guard::new("carbon place", controller);
    c.wait_class("edge-a", "green", false);
    c.wait_class("edge-b", "yellow", false);
    c.wait_class("edge-c", "red", true);

    c.cp.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}).to_string(),
    )
    .unwrap();
    let sa = wait_for(Duration::from_secs(60), || {
        c.cp.get("/api/v1/namespaces/demo/serviceaccounts/default")
            .ok()?
    });
    assert!(sa.is_some(), "no default ServiceAccount in namespace demo");
    let pods = c.cp.watch("/api/v1/namespaces/demo/pods").unwrap();
    c.cp.apply(&demo_manifests()).unwrap();
    let running_on = |node: &str| {
        let list = c.cp.get("/api/v1/namespaces/demo/pods").ok()??;
        list["items"]
            .as_array()?
            .iter()
            .find(|p| {
                p["metadata"]["labels"]["app"] == "batch"
                    && pod_node(p) == Some(node)
                    && p["status"]["phase"] == "Running"
                    && p["metadata"]["deletionTimestamp"].is_null()
            })
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
    };
    let first = wait_for(Duration::from_secs(60), || running_on("edge-a"))
        .expect("demo pod running on the green node edge-a");

    // ZA turns the dirtiest, ZC the cleanest.
    c.publish(&[("ZA", 300.0), ("ZB", 200.0), ("ZC", 100.0)], now());
    let second = wait_for(Duration::from_secs(120), || running_on("edge-c"));
    let log_text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let second = second.unwrap_or_else(|| {
        panic!(
            "no demo pod running on edge-c; nodes {:?}\ncontroller log:\n{log_text}",
            c.classes()
        )
    });
    assert_ne!(first, second);
    c.wait_class("edge-a", "red", true);
    c.wait_class("edge-c", "green", false);
    controller.terminate();

    // tolerationSeconds honoured: the eviction (a delete with the pod's grace period, which
    // sets deletionTimestamp = eviction + grace) came at least tolerationSeconds after the
    // taint was added. Both stamps are whole seconds, truncated.
    let taint = our_taint(&c.node("edge-a")).expect("edge-a tainted");
    let added = rfc3339(&taint["timeAdded"]);
    let events = pods.events();
    let of = |name: &str| -> Vec<(Instant, Value)> {
        events
            .iter()
            .filter(|(_, e)| e["object"]["metadata"]["name"] == name)
            .cloned()
            .collect()
    };
    let (evicted_at, evicted) = of(&first)
        .into_iter()
        .find(|(_, e)| !e["object"]["metadata"]["deletionTimestamp"].is_null())
        .expect("the first pod was deleted");
    let deletion = rfc3339(&evicted["object"]["metadata"]["deletionTimestamp"]);
    assert!(
        deletion - added >= TOLERATION_SECONDS + GRACE_SECONDS,
        "evicted too early: taint added {added}, deletionTimestamp {deletion}"
    );
    let (bound_at, _) = of(&second)
        .into_iter()
        .find(|(_, e)| pod_node(&e["object"]) == Some("edge-c"))
        .expect("the replacement was bound to edge-c");
    // Exact server-side times from the audit log: the controller's taint patch of edge-a, the
    // taint-eviction controller's delete of the pod, the scheduler's binding of its replacement.
    let is = |e: &Value, verb: &str, resource: &str, name: &str| {
        e["verb"] == verb
            && e["objectRef"]["resource"] == resource
            && e["objectRef"]["name"] == name
            && e["responseStatus"]["code"]
                .as_i64()
                .is_some_and(|c| c < 300)
    };
    let tainted = audited(c, "the red patch of edge-a", |e| {
        is(e, "patch", "nodes", "edge-a")
            && e["user"]["username"] == "system:serviceaccount:greenpipe:greenpipe-carbon"
            && e["stageTimestamp"].as_str().is_some()
            && epoch(&e["stageTimestamp"]) >= (added as f64)
    });
    let deleted = audited(c, "the eviction", |e| {
        is(e, "delete", "pods", &first) && e["objectRef"]["subresource"].is_null()
    });
    let bound = audited(c, "the replacement's binding", |e| {
        is(e, "create", "pods", &second) && e["objectRef"]["subresource"] == "binding"
    });
    assert!(
        deleted - tainted >= TOLERATION_SECONDS as f64,
        "evicted {:.3} s after the taint, before tolerationSeconds",
        deleted - tainted
    );
    assert!(bound > deleted, "replacement bound before the eviction");
    println!(
        "eviction -> reschedule latency: {:.3} s (API server audit: delete {deleted:.6}, binding \
         {bound:.6}); taint -> eviction {:.3} s (tolerationSeconds {TOLERATION_SECONDS}); \
         watch arrivals {:.3} s apart",
        bound - deleted,
        deleted - tainted,
        bound_at.saturating_duration_since(evicted_at).as_secs_f64(),
    );
    // The pod that tolerates red forever is still there, on the red node.
    let critical =
        c.cp.get("/api/v1/namespaces/demo/pods/critical")
            .unwrap()
            .expect("critical pod kept");
    assert_eq!(pod_node(&critical), Some("edge-a"));
    assert!(critical["metadata"]["deletionTimestamp"].is_null());
    c.cp.kubectl_ok(&["delete", "namespace", "demo", "--wait=false"])
        .unwrap();
}

/// Replayed rounds (`--at`) with absolute classes: a series flapping across a class boundary
/// but within the hysteresis band changes nothing; a real change inside the dwell time is held;
/// after it, applied. The same flapping input without hysteresis does change the label.
fn hysteresis_and_dwell_hold_under_a_flapping_series(c: &Cluster) {
    // Replayed time starts well after the demo's labels (dwell is measured from them).
    let t0 = (now() / HOUR + 3) * HOUR;
    let policy = [
        "--green-max=150",
        "--red-min=250",
        "--hysteresis=20",
        "--min-dwell=1h",
    ];
    let at = |t: i64| format!("--at={t}");
    let round = |levels: &[(&str, f64)], t: i64, extra: &[&str]| {
        c.publish(levels, t);
        let overridden = |p: &&&str| {
            !extra
                .iter()
                .any(|e| e.split('=').next() == p.split('=').next())
        };
        let args: Vec<String> = policy
            .iter()
            .filter(overridden)
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .chain([at(t)])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.round(&args)
    };

    round(&[("ZA", 140.0), ("ZB", 200.0), ("ZC", 260.0)], t0, &[]);
    let settled = c.classes();
    assert_eq!(settled["edge-a"].0.as_deref(), Some("green"));
    assert_eq!(settled["edge-b"].0.as_deref(), Some("yellow"));
    assert_eq!(settled["edge-c"].0.as_deref(), Some("red"));
    assert!(settled["edge-c"].1 && !settled["edge-a"].1);
    assert_eq!(settled["edge-a"].2, Some(t0.to_string()));

    // Flapping: ZA across green-max, ZC across red-min, every 10 minutes, within 20 g/kWh.
    for (i, (a, cc)) in [
        (160.0, 240.0),
        (140.0, 260.0),
        (165.0, 235.0),
        (145.0, 255.0),
    ]
    .into_iter()
    .enumerate()
    {
        let t = t0 + 600 * (i as i64 + 1);
        let (plan, _) = round(&[("ZA", a), ("ZB", 200.0), ("ZC", cc)], t, &[]);
        assert!(plan.contains("no changes"), "flap {i} at {t}:\n{plan}");
        assert_eq!(c.classes(), settled, "flap {i} changed a node");
    }

    // A real move of ZA to red, 50 min after its label changed: held by the 1 h dwell.
    let (plan, _) = round(
        &[("ZA", 300.0), ("ZB", 200.0), ("ZC", 260.0)],
        t0 + 3000,
        &[],
    );
    assert!(
        plan.contains("hold edge-a: would become red"),
        "no hold:\n{plan}"
    );
    assert_eq!(c.class_of("edge-a").0.as_deref(), Some("green"));
    // Past the dwell: applied, taint and all.
    let t1 = t0 + 3700;
    round(&[("ZA", 300.0), ("ZB", 200.0), ("ZC", 260.0)], t1, &[]);
    assert_eq!(
        c.class_of("edge-a"),
        (Some("red".into()), true, Some(t1.to_string()))
    );

    // Control: ZA dips to 245, inside red's band. Hysteresis keeps it red; without it, the
    // same input makes it yellow, so the holds above are the band's doing.
    let t2 = t1 + 2 * HOUR;
    let dip = [("ZA", 245.0), ("ZB", 200.0), ("ZC", 260.0)];
    let (plan, _) = round(&dip, t2, &[]);
    assert!(plan.contains("no changes"), "{plan}");
    round(&dip, t2, &["--hysteresis=0"]);
    assert_eq!(
        c.class_of("edge-a"),
        (Some("yellow".into()), false, Some(t2.to_string()))
    );
}

/// The controller reads the nodes, plans, prints the plan, then patches. Its stdout is a pipe
/// the test has filled, so it blocks on its first line of plan — after reading the nodes, before
/// patching. Meanwhile the test adds a foreign taint to the node it is about to taint (a real
/// concurrent edit: the resourceVersion it planned from is gone). Then the pipe is drained. The
/// patch's `test` fails, the controller re-reads and re-plans the node at once, and the foreign
/// taint survives; later it also survives our taint's removal.
fn conflict_is_retried_and_foreign_taint_kept(c: &Cluster) {
    let t = (now() / HOUR + 12) * HOUR;
    let levels = [("ZA", 100.0), ("ZB", 300.0), ("ZC", 200.0)];
    c.publish(&levels, t);
    assert!(!c.class_of("edge-b").1, "edge-b starts untainted");

    let (read_end, write_end) = full_pipe();
    let mut cmd = c.place(&["--once", "--min-dwell=0s", &format!("--at={t}")]);
    let err_path = c.series.path().join("conflict.log");
    let child = cmd
        .stdout(Stdio::from(write_end))
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    // The command holds a copy of the pipe's write end: drop it, or the read never ends.
    drop(cmd);
    let pid = child.id();
    let mut child = Guard::new("carbon place (conflict)", child);
    let blocked = wait_for(Duration::from_secs(120), || {
        blocked_writing_stdout(pid).then_some(())
    });
    assert!(
        blocked.is_some(),
        "the controller never blocked printing its plan:\n{}",
        std::fs::read_to_string(&err_path).unwrap_or_default()
    );
    // It has read edge-b and planned red + taint. Now someone else taints it.
    c.cp.kubectl_ok(&["taint", "node", "edge-b", "dedicated=gpu:NoSchedule"])
        .unwrap();
    let mut plan = String::new();
    let mut reader = std::fs::File::from(read_end);
    reader.read_to_string(&mut plan).unwrap();
    let status = child.wait_exit(Duration::from_secs(120));
    let log = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "controller failed:\n{log}"
    );
    assert!(plan.contains("node edge-b: yellow -> red, taint"), "{plan}");
    assert!(
        log.contains("conflict") && log.contains("re-planning"),
        "no conflict was seen and retried:\n{log}"
    );
    let node = c.node("edge-b");
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let keys: Vec<&str> = taints.iter().filter_map(|t| t["key"].as_str()).collect();
    assert!(
        keys.contains(&"dedicated"),
        "foreign taint lost: {taints:?}"
    );
    assert!(
        keys.contains(&KEY),
        "our taint missing after the retry: {taints:?}"
    );
    assert_eq!(node["metadata"]["labels"][KEY], "red");

    // ZB turns green: our taint goes, the foreign one stays.
    c.publish(&[("ZA", 300.0), ("ZB", 100.0), ("ZC", 200.0)], t + HOUR);
    c.round(&["--min-dwell=0s", &format!("--at={}", t + HOUR)]);
    let node = c.node("edge-b");
    let keys: Vec<String> = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["key"].as_str().map(str::to_string))
        .collect();
    assert_eq!(keys, vec!["dedicated".to_string()]);
    assert_eq!(node["metadata"]["labels"][KEY], "green");
}

/// A pipe whose buffer (one page, the smallest Linux allows) is already full: a process
/// given the write end as stdout blocks on its first write until the read end is drained.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) fills two fds we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh fds from pipe2, owned once each.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on fds we own.
    unsafe {
        libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096);
        let flags = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut file = std::fs::File::from(w);
    let filler = [b'#'; 512];
    while file.write(&filler).is_ok_and(|n| n > 0) {}
    let mut one = [b'\n'];
    while file.write(&one[..]).is_ok_and(|n| n > 0) {
        one = [b'\n'];
    }
    let w = OwnedFd::from(file);
    // The child must see a blocking pipe (the flag belongs to the shared open file).
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    (r, w)
}

/// Whether some thread of `pid` sits in write(2) on fd 1 (`/proc/PID/task/*/syscall`).
fn blocked_writing_stdout(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        let Ok(s) = std::fs::read_to_string(t.path().join("syscall")) else {
            return false;
        };
        let mut f = s.split_whitespace();
        f.next() == Some(&libc::SYS_write.to_string()) && f.next() == Some("0x1")
    })
}
