//! `campaign run --kubernetes`: each step as a Kubernetes Job on the node, instead of local
//! processes. One Job per step, one pod, one container per process (they share the pod's
//! network, so a client reaches its server on `127.0.0.1:{port:NAME}` as in local mode), built
//! like the workload manifests (deploy/profiling/job.yaml: restricted security context, scratch
//! `emptyDir`, `NODE_NAME`, a `metrics` port, the `app.kubernetes.io/component: workload` label
//! Prometheus' `greenpipe-workload` job keeps).
//!
//! The node: a required node affinity on the field `metadata.name` (what the DaemonSet
//! controller uses), not `nodeName` (which skips the scheduler: no resource fit, no taints, and a
//! kubelet that rejects the pod fails the Job) nor a `kubernetes.io/hostname` selector (that label
//! is not the node name on every cloud).
//!
//! Timing follows local mode, anchored to the pod's status: the window starts `warmup_seconds`
//! after the last container's `state.running.startedAt` and lasts the step's seconds; the runner
//! keeps the pod running through it, then deletes the Job (propagation Background) and waits
//! until its pod is gone, so the next idle gap is idle. A container that ends first makes the
//! step failed (its exit code and reason from the status, its `finishedAt` the window's end).
//! Ctrl-C deletes the running Job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

use crate::plan::{Plan, Step};
use crate::runner::{self, Outcome, RunContext, RunError, StepBackend};
use crate::windows::{Status, Window};
use crate::workload_metrics::{self, Reading};

/// Label every campaign Job and pod carries (`app.kubernetes.io/name`).
pub const APP_NAME: &str = "greenpipe-campaign";
/// Label naming the Job a campaign pod belongs to (set by the runner, so it does not depend on
/// the Job controller's own labels, which changed names in Kubernetes 1.27).
pub const JOB_LABEL: &str = "greenpipe.io/campaign-job";
/// Label (and annotation, which holds any step name) naming the step.
pub const STEP_KEY: &str = "greenpipe.io/campaign-step";
/// Label naming the node the campaign runs on.
pub const NODE_LABEL: &str = "greenpipe.io/campaign-node";
/// Where a pod's `emptyDir` scratch volume is mounted: `{out}`, and `{campaign_log}` in it.
pub const SCRATCH: &str = "/scratch";
/// First port of the processes' `{metrics_address}` (the workload image's 9912, then up).
const METRICS_PORT: u16 = 9912;
/// First port of the `{port:NAME}` placeholders (the served workload's gRPC 8001, then up).
const NAMED_PORT: u16 = 8001;
/// SIGTERM to SIGKILL when a step's Job is deleted (workloads close their window on SIGTERM).
const GRACE_SECONDS: i64 = 10;

/// `--kubernetes` settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of the Jobs.
    pub namespace: String,
    /// Image of every process (it must hold the plan's commands).
    pub image: String,
    /// How long a pod may take to be scheduled, pull its image and start.
    pub start_timeout: Duration,
}

/// Why the Kubernetes runner could not run at all (a step that fails is recorded instead).
#[derive(Debug, thiserror::Error)]
pub enum KubernetesError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("starting the Kubernetes client's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("connecting to the Kubernetes API server (in-cluster config or KUBECONFIG)")]
    Connect(#[source] kube::Error),
    #[error("listing the Jobs of namespace {namespace}")]
    List {
        namespace: String,
        source: kube::Error,
    },
    #[error("deleting Job {namespace}/{name} left by an earlier run")]
    DeleteLeftover {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// The API server, and a runtime to call it from the campaign's blocking loop.
struct Cluster {
    runtime: tokio::runtime::Runtime,
    jobs: Api<Job>,
    pods: Api<Pod>,
    namespace: String,
}

impl Cluster {
    fn connect(namespace: &str) -> Result<Cluster, KubernetesError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(KubernetesError::Runtime)?;
        let client = runtime
            .block_on(kube::Client::try_default())
            .map_err(KubernetesError::Connect)?;
        Ok(Cluster {
            jobs: Api::namespaced(client.clone(), namespace),
            pods: Api::namespaced(client, namespace),
            runtime,
            namespace: namespace.to_string(),
        })
    }

    /// The pods of a campaign Job, as JSON.
    fn pods_of(&self, job: &str) -> Result<Vec<Value>, kube::Error> {
        let lp = ListParams::default().labels(&format!("{JOB_LABEL}={job}"));
        let list = self.runtime.block_on(self.pods.list(&lp))?;
        Ok(list
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect())
    }

    fn delete_job(&self, name: &str) -> Result<(), kube::Error> {
        match self
            .runtime
            .block_on(self.jobs.delete(name, &DeleteParams::background()))
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A pod's `/metrics` through the API server's pod proxy (the runner need not reach pod IPs).
    fn pod_metrics(&self, pod: &str, port: u16) -> Option<String> {
        let path = format!(
            "/api/v1/namespaces/{}/pods/{pod}:{port}/proxy/metrics",
            self.namespace
        );
        let request = http::Request::get(path).body(Vec::new()).ok()?;
        let client: kube::Client = self.pods.clone().into_client();
        self.runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await
            })
            .ok()?
            .ok()
    }

    fn logs(&self, pod: &str, container: &str) -> Result<String, kube::Error> {
        let lp = LogParams {
            container: Some(container.to_string()),
            ..LogParams::default()
        };
        self.runtime.block_on(self.pods.logs(pod, &lp))
    }
}

/// Runs every step without a record as a Job on the node; returns whether it finished or was
/// interrupted. Jobs of an earlier run on this node that are still there are deleted first: a
/// benchmark left running would load every window after it.
pub fn run_steps(
    plan: &Plan,
    ctx: &RunContext,
    settings: &Settings,
    stop: &AtomicBool,
) -> Result<Outcome, KubernetesError> {
    let cluster = Cluster::connect(&settings.namespace)?;
    let mut selector = format!("app.kubernetes.io/name={APP_NAME}");
    if is_label_value(&ctx.node) {
        selector.push_str(&format!(",{NODE_LABEL}={}", ctx.node));
    }
    let leftovers = cluster
        .runtime
        .block_on(cluster.jobs.list(&ListParams::default().labels(&selector)))
        .map_err(|source| KubernetesError::List {
            namespace: settings.namespace.clone(),
            source,
        })?;
    for job in leftovers.items {
        let name = job.metadata.name.unwrap_or_default();
        eprintln!(
            "campaign: deleting Job {}/{name}, left by an earlier run",
            settings.namespace
        );
        cluster
            .delete_job(&name)
            .map_err(|source| KubernetesError::DeleteLeftover {
                namespace: settings.namespace.clone(),
                name: name.clone(),
                source,
            })?;
    }
    let mut backend = Jobs {
        cluster: &cluster,
        plan,
        ctx,
        settings,
        logs: runner::logs_dir(ctx)?,
        stop,
    };
    Ok(runner::drive(plan, ctx, stop, &mut backend)?)
}

/// Steps as Jobs pinned to the node.
struct Jobs<'a> {
    cluster: &'a Cluster,
    plan: &'a Plan,
    ctx: &'a RunContext,
    settings: &'a Settings,
    logs: PathBuf,
    stop: &'a AtomicBool,
}

impl StepBackend for Jobs<'_> {
    fn run_step(&mut self, step: &Step, bar: &ProgressBar, base: u64) -> Result<Window, RunError> {
        Ok(run_step(
            self.cluster,
            self.plan,
            step,
            self.ctx,
            self.settings,
            &self.logs,
            self.stop,
            bar,
            base,
        ))
    }
}

/// Whether `s` is a valid label value (≤ 63 characters, alphanumeric at both ends, `-_.` inside).
pub fn is_label_value(s: &str) -> bool {
    s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && s.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

/// A DNS-1123 label from `s` (lowercase alphanumerics and `-`), at most `max` characters.
fn dns_label(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out.truncate(max);
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        "x".into()
    } else {
        out
    }
}

/// A step's Job name: `gp-<step>-<5 random>`, short enough for the pod names and labels made
/// from it.
fn job_name(step: &str) -> String {
    let suffix: String = (0..5)
        .map(|_| {
            let n = fastrand::u8(0..36);
            char::from_digit(u32::from(n), 36).unwrap_or('x')
        })
        .collect();
    format!("gp-{}-{suffix}", dns_label(step, 40))
}

/// The container name of each process: its plan name (or `p<k>`) as a DNS label, made unique.
fn container_names(st: &Step) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (k, p) in st.processes.iter().enumerate() {
        let base = dns_label(p.name.as_deref().unwrap_or(&format!("p{k}")), 50);
        let name = if names.contains(&base) {
            format!("{base}-{k}")
        } else {
            base
        };
        names.push(name);
    }
    names
}

/// One container of a step's pod, as the plan says it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerPlan {
    /// Container name.
    pub name: String,
    /// Program.
    pub command: String,
    /// Arguments, placeholders expanded.
    pub args: Vec<String>,
    /// Its `{metrics_address}` port, when it uses one.
    pub metrics_port: Option<u16>,
}

/// The step's containers with their arguments expanded for a pod: `{metrics_address}` is
/// `0.0.0.0:<9912 + k>` (each process its own port in the shared network namespace),
/// `{port:NAME}` `8001`, `8002`, …, `{out}` the scratch volume.
pub fn containers(
    plan: &Plan,
    st: &Step,
    node: &str,
) -> Result<Vec<ContainerPlan>, runner::ExpandError> {
    let mut vars = runner::step_vars(
        plan,
        st,
        node,
        SCRATCH,
        &format!("{SCRATCH}/workload-log.jsonl"),
    );
    for (j, key) in runner::named_ports(st).into_iter().enumerate() {
        vars.insert(key, (NAMED_PORT + j as u16).to_string());
    }
    let names = container_names(st);
    st.processes
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let port = METRICS_PORT + k as u16;
            vars.insert("metrics_address".into(), format!("0.0.0.0:{port}"));
            Ok(ContainerPlan {
                name: names[k].clone(),
                command: p.command.clone(),
                args: runner::expand(&p.args, &vars)?,
                metrics_port: p
                    .args
                    .iter()
                    .any(|a| a.contains("{metrics_address}"))
                    .then_some(port),
            })
        })
        .collect()
}

/// The Job of a step.
pub fn job_manifest(
    plan: &Plan,
    st: &Step,
    name: &str,
    node: &str,
    settings: &Settings,
    containers: &[ContainerPlan],
) -> Value {
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), APP_NAME.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            "workload".to_string(),
        ),
        (
            "app.kubernetes.io/part-of".to_string(),
            "greenpipe".to_string(),
        ),
    ]);
    if is_label_value(&st.name) {
        labels.insert(STEP_KEY.into(), st.name.clone());
    }
    if is_label_value(node) {
        labels.insert(NODE_LABEL.into(), node.to_string());
    }
    let mut pod_labels = st.kubernetes.labels.clone();
    pod_labels.extend(labels.clone());
    pod_labels.insert(JOB_LABEL.into(), name.to_string());
    let mut pod_annotations = st.kubernetes.annotations.clone();
    pod_annotations.insert(STEP_KEY.into(), st.name.clone());
    let measured = Plan::measured(st);
    let s = &plan.campaign;
    let run_seconds = (s.warmup_seconds + plan.seconds(st)).ceil() as u64;
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let ports: Vec<Value> = c
                .metrics_port
                .map(|port| {
                    // Prometheus' greenpipe-workload job keeps the port named `metrics`.
                    let name = if k == measured {
                        "metrics".to_string()
                    } else {
                        format!("metrics-{k}")
                    };
                    json!({"name": name, "containerPort": port})
                })
                .into_iter()
                .collect();
            json!({
                "name": c.name,
                "image": settings.image,
                "command": [c.command],
                "args": c.args,
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "ports": ports,
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH}],
            })
        })
        .collect();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {STEP_KEY: st.name},
        },
        "spec": {
            "backoffLimit": 0,
            // Backstops for a runner that died without deleting its Job: the Job controller
            // stops it well after its window, and removes it once finished.
            "activeDeadlineSeconds": settings.start_timeout.as_secs() + run_seconds + 600,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}
                        ]}]
                    }}},
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": GRACE_SECONDS,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "fsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": containers,
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
                },
            },
        },
    })
}

/// Where a step's pod is, read from its status.
#[derive(Debug, Clone, PartialEq)]
pub enum PodState {
    /// Not every container runs yet; why, when the status says (unschedulable, image pull).
    Waiting(Option<String>),
    /// Every container runs; the last one started at `started` (Unix seconds).
    Running { started: f64 },
    /// A container ended (or the pod failed) at `finished`: why, as the step's error.
    Ended {
        started: Option<f64>,
        finished: f64,
        error: String,
    },
}

fn time(v: &Value) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(v.as_str()?.trim_end_matches('Z')).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// The state of a pod (JSON as the API server gives it), given its containers' names in plan
/// order; `now` stands for a finish time the status does not give.
pub fn pod_state(pod: &Value, names: &[String], now: f64) -> PodState {
    let status = &pod["status"];
    let empty = Vec::new();
    let statuses = status["containerStatuses"].as_array().unwrap_or(&empty);
    let by_name = |n: &str| statuses.iter().find(|c| c["name"] == n);
    // A container that ended: the first in plan order, with its exit code.
    for n in names {
        let Some(c) = by_name(n) else { continue };
        let t = &c["state"]["terminated"];
        if t.is_object() {
            let code = t["exitCode"].as_i64().unwrap_or(-1);
            let reason = t["reason"].as_str().unwrap_or("");
            let error = if code == 0 {
                format!("process {n} ended before the window did")
            } else if reason.is_empty() {
                format!("process {n} exited with code {code}")
            } else {
                format!("process {n} exited with code {code} ({reason})")
            };
            return PodState::Ended {
                started: time(&t["startedAt"]),
                finished: time(&t["finishedAt"]).unwrap_or(now),
                error,
            };
        }
    }
    if status["phase"] == "Failed" || status["phase"] == "Succeeded" {
        let why = [&status["reason"], &status["message"]]
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(": ");
        return PodState::Ended {
            started: time(&status["startTime"]),
            finished: now,
            error: format!(
                "pod {} {}",
                status["phase"].as_str().unwrap_or(""),
                if why.is_empty() { "" } else { &why }
            )
            .trim()
            .to_string(),
        };
    }
    let started: Option<Vec<f64>> = names
        .iter()
        .map(|n| time(&by_name(n)?["state"]["running"]["startedAt"]))
        .collect();
    if let Some(started) = started.filter(|s| !s.is_empty()) {
        return PodState::Running {
            started: started.into_iter().fold(f64::MIN, f64::max),
        };
    }
    // Why it waits: a container's waiting reason (ErrImagePull, …) or an unschedulable pod.
    let waiting = statuses.iter().find_map(|c| {
        let w = &c["state"]["waiting"];
        let reason = w["reason"].as_str()?;
        Some(format!(
            "container {}: {reason} {}",
            c["name"].as_str().unwrap_or("?"),
            w["message"].as_str().unwrap_or("")
        ))
    });
    let unschedulable = status["conditions"].as_array().and_then(|cs| {
        cs.iter().find_map(|c| {
            (c["type"] == "PodScheduled" && c["status"] == "False").then(|| {
                format!(
                    "not scheduled: {} {}",
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                )
            })
        })
    });
    PodState::Waiting(waiting.or(unschedulable).map(|s| s.trim().to_string()))
}

/// The runtime's container id without its `<runtime>://` prefix (what the exporter's cgroup
/// parser reads off the node), per container name.
fn container_ids(pod: &Value) -> BTreeMap<String, String> {
    pod["status"]["containerStatuses"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| {
                    let id = c["containerID"].as_str()?;
                    let id = id.split_once("://").map_or(id, |(_, id)| id);
                    Some((c["name"].as_str()?.to_string(), id.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How a wait inside a step ended.
enum Wait {
    /// The time passed with the pod running (or, waiting for it to run, not yet running).
    Done,
    /// Every container runs.
    Running,
    /// Ctrl-C.
    Stopped,
    /// The pod ended: (started, finished, error).
    Ended(Option<f64>, f64, String),
    /// The API server could not be asked.
    Error(String),
}

#[allow(clippy::too_many_arguments)]
fn run_step(
    cluster: &Cluster,
    plan: &Plan,
    st: &Step,
    ctx: &RunContext,
    settings: &Settings,
    logs: &Path,
    stop: &AtomicBool,
    bar: &ProgressBar,
    base: u64,
) -> Window {
    let mut w = runner::new_window(st, &ctx.node);
    let containers = match containers(plan, st, &ctx.node) {
        Ok(c) => c,
        Err(e) => {
            w.error = Some(greenpipe_common::error_chain(&e));
            return w;
        }
    };
    let names: Vec<String> = containers.iter().map(|c| c.name.clone()).collect();
    let name = job_name(&st.name);
    let manifest = job_manifest(plan, st, &name, &ctx.node, settings, &containers);
    let created = serde_json::from_value::<Job>(manifest)
        .map_err(|e| e.to_string())
        .and_then(|job| {
            cluster
                .runtime
                .block_on(cluster.jobs.create(&PostParams::default(), &job))
                .map_err(|e| greenpipe_common::error_chain(&e))
        });
    if let Err(e) = created {
        w.error = Some(format!("creating Job {}/{name}: {e}", settings.namespace));
        return w;
    }
    let s = &plan.campaign;
    let seconds = plan.seconds(st);
    let measured = Plan::measured(st);
    let mut pod_name = String::new();
    // Polls the pod every second (Ctrl-C every 100 ms) until `until` (Done), or until every
    // container runs (Running) when `until_running`.
    let wait =
        |until: Instant, until_running: bool, pod_name: &mut String, last: &mut Option<Value>| {
            let mut next_poll = Instant::now();
            loop {
                if stop.load(Ordering::SeqCst) {
                    return Wait::Stopped;
                }
                if Instant::now() >= until {
                    return Wait::Done;
                }
                if Instant::now() >= next_poll {
                    next_poll = Instant::now() + Duration::from_secs(1);
                    let pods = match cluster.pods_of(&name) {
                        Ok(pods) => pods,
                        Err(e) => return Wait::Error(greenpipe_common::error_chain(&e)),
                    };
                    if let Some(p) = pods.into_iter().next() {
                        *pod_name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                        let state = pod_state(&p, &names, runner::now());
                        *last = Some(p);
                        match state {
                            PodState::Ended {
                                started,
                                finished,
                                error,
                            } => return Wait::Ended(started, finished, error),
                            PodState::Running { .. } if until_running => return Wait::Running,
                            _ => {}
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        };
    let mut last: Option<Value> = None;
    // 1. Until every container runs (scheduling, image pull, start), within --start-timeout.
    let mut outcome = match wait(
        Instant::now() + settings.start_timeout,
        true,
        &mut pod_name,
        &mut last,
    ) {
        Wait::Running => Wait::Done,
        Wait::Done => {
            let why = match last.as_ref().map(|p| pod_state(p, &names, runner::now())) {
                Some(PodState::Waiting(Some(why))) => why,
                None => "no pod was created (see the Job's events)".into(),
                _ => "still waiting".into(),
            };
            Wait::Error(format!(
                "not running after {}: {why}",
                humantime::format_duration(settings.start_timeout)
            ))
        }
        other => other,
    };
    let observed = Instant::now();
    let mut started: Option<f64> = None;
    if let Some(p) = &last {
        w.pod_uid = p["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let ids = container_ids(p);
        for (k, n) in names.iter().enumerate() {
            let id = ids.get(n).cloned().unwrap_or_default();
            let key = st.processes[k]
                .name
                .clone()
                .unwrap_or_else(|| format!("p{k}"));
            if k == measured {
                w.container_id = id.clone();
            }
            w.containers.insert(key, id);
        }
        if let PodState::Running { started: t } = pod_state(p, &names, runner::now()) {
            started = Some(t);
        }
    }
    let metrics_port = containers[measured].metrics_port;
    let mut first: Option<Reading> = None;
    // 2. Warm-up, then 3. the window, the pod polled throughout.
    if matches!(outcome, Wait::Done) {
        bar.set_position(base);
        outcome = wait(
            observed + Duration::from_secs_f64(s.warmup_seconds),
            false,
            &mut pod_name,
            &mut last,
        );
        if matches!(outcome, Wait::Done) {
            first = metrics_port
                .and_then(|port| cluster.pod_metrics(&pod_name, port))
                .map(|t| workload_metrics::parse(&t));
            bar.set_position(base + s.warmup_seconds as u64);
            outcome = wait(
                observed + Duration::from_secs_f64(s.warmup_seconds + seconds),
                false,
                &mut pod_name,
                &mut last,
            );
        }
    }
    if let Some(t) = started {
        w.start = t + s.warmup_seconds;
        w.end = w.start + seconds;
    }
    match outcome {
        Wait::Done | Wait::Running => {
            let reading = metrics_port.map(|port| {
                cluster
                    .pod_metrics(&pod_name, port)
                    .map(|t| workload_metrics::parse(&t))
            });
            match (reading, &first) {
                (Some(Some(b)), Some(a)) => {
                    let d = workload_metrics::delta(a, &b);
                    w.inferences = d.inferences;
                    w.operations = d.operations;
                    w.latency_p50_seconds = workload_metrics::quantile(&d.buckets, 0.5);
                    w.latency_p95_seconds = workload_metrics::quantile(&d.buckets, 0.95);
                    w.status = Status::Complete;
                }
                (Some(_), _) => {
                    w.error = Some(format!(
                        "the measured process's metrics did not answer through the API server's \
                         pod proxy (pod {pod_name}, port {})",
                        metrics_port.unwrap_or(0)
                    ));
                }
                (None, _) => w.status = Status::Complete,
            }
            w.complete = w.status == Status::Complete;
        }
        Wait::Stopped => {
            w.status = Status::Interrupted;
            w.error = Some("stopped by a signal".into());
            w.end = runner::now();
        }
        Wait::Ended(t0, finished, error) => {
            if let Some(t) = started.or(t0) {
                w.start = t;
            }
            w.end = finished;
            w.error = Some(error);
        }
        Wait::Error(e) => {
            w.end = runner::now();
            w.error = Some(e);
        }
    }
    save_logs(cluster, &pod_name, st, &names, logs);
    if let Err(e) = cluster.delete_job(&name) {
        let e = format!("deleting Job {}/{name}: {}", settings.namespace, e);
        eprintln!("campaign: {e}");
        if w.status == Status::Complete {
            w.status = Status::Failed;
            w.complete = false;
            w.error = Some(e);
        }
        return w;
    }
    // The next idle gap must be idle: wait until the pod is gone (grace period and a margin).
    let gone = Instant::now() + Duration::from_secs(GRACE_SECONDS as u64 + 60);
    while Instant::now() < gone {
        match cluster.pods_of(&name) {
            Ok(p) if p.is_empty() => break,
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    }
    w
}

/// Each container's output into `DIR/logs/<step>__<process>.log`, as local mode writes it (or
/// why it could not be read).
fn save_logs(cluster: &Cluster, pod: &str, st: &Step, names: &[String], logs: &Path) {
    for (k, n) in names.iter().enumerate() {
        let process = st.processes[k]
            .name
            .clone()
            .unwrap_or_else(|| format!("p{k}"));
        let text = if pod.is_empty() {
            "no pod was created\n".to_string()
        } else {
            cluster
                .logs(pod, n)
                .unwrap_or_else(|e| format!("logs of pod {pod} container {n} unavailable: {e}\n"))
        };
        let _ = std::fs::write(logs.join(format!("{}__{process}.log", st.name)), text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
[campaign]
warmup_seconds = 2
idle_seconds = 1
step_seconds = 5

[[step]]
name = "Served_mobilenet.int8"
group = "inference"
tag = "validate"
[step.kubernetes]
annotations = { "sidecar.istio.io/inject" = "false" }
[[step.process]]
name = "server"
command = "greenpipe-workload"
measure = true
args = ["serve", "--grpc.listen-address", "127.0.0.1:{port:grpc}", "--web.listen-address", "{metrics_address}", "--campaign-log", "{campaign_log}"]
[[step.process]]
name = "client"
command = "greenpipe-workload"
args = ["client", "--target", "127.0.0.1:{port:grpc}", "--duration", "{timeout}", "--web.listen-address", "{metrics_address}"]
"#;

    fn settings() -> Settings {
        Settings {
            namespace: "greenpipe".into(),
            image: "img:1".into(),
            start_timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_step_becomes_a_job_pinned_to_the_node() {
        let plan = Plan::parse(PLAN).unwrap();
        let st = &plan.steps[0];
        let cs = containers(&plan, st, "pi-1").unwrap();
        assert_eq!(cs[0].name, "server");
        assert_eq!(
            cs[0].args,
            [
                "serve",
                "--grpc.listen-address",
                "127.0.0.1:8001",
                "--web.listen-address",
                "0.0.0.0:9912",
                "--campaign-log",
                "/scratch/workload-log.jsonl"
            ]
        );
        assert_eq!(cs[1].args[2], "127.0.0.1:8001");
        assert_eq!(cs[1].args[4], "37s");
        assert_eq!(cs[1].metrics_port, Some(9913));
        let name = job_name(&st.name);
        assert!(name.starts_with("gp-served-mobilenet-int8-"), "{name}");
        let job = job_manifest(&plan, st, &name, "pi-1", &settings(), &cs);
        // It is a valid Job.
        serde_json::from_value::<Job>(job.clone()).unwrap();
        let pod = &job["spec"]["template"];
        assert_eq!(
            pod["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                ["matchFields"][0],
            json!({"key": "metadata.name", "operator": "In", "values": ["pi-1"]})
        );
        assert_eq!(
            pod["metadata"]["labels"]["app.kubernetes.io/component"],
            "workload"
        );
        assert_eq!(pod["metadata"]["labels"][JOB_LABEL], name.as_str());
        assert_eq!(pod["metadata"]["labels"][STEP_KEY], "Served_mobilenet.int8");
        assert_eq!(
            pod["metadata"]["annotations"]["sidecar.istio.io/inject"],
            "false"
        );
        let c = &pod["spec"]["containers"];
        assert_eq!(c[0]["command"], json!(["greenpipe-workload"]));
        assert_eq!(
            c[0]["ports"][0],
            json!({"name": "metrics", "containerPort": 9912})
        );
        assert_eq!(c[1]["ports"][0]["name"], "metrics-1");
        assert_eq!(c[0]["image"], "img:1");
    }

    #[test]
    fn pod_states_from_status() {
        let names = vec!["a".to_string(), "b".to_string()];
        let pending = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
        ]}});
        assert_eq!(
            pod_state(&pending, &names, 0.0),
            PodState::Waiting(Some("not scheduled: Unschedulable 0/1 nodes".into()))
        );
        let running = json!({"status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}},
            {"name": "b", "state": {"running": {"startedAt": "2026-12-01T10:00:02Z"}}},
        ]}});
        assert_eq!(
            pod_state(&running, &names, 0.0),
            PodState::Running {
                started: 1_796_119_202.0
            }
        );
        let half = json!({"status": {"phase": "Pending", "containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}},
            {"name": "b", "state": {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}},
        ]}});
        assert_eq!(
            pod_state(&half, &names, 0.0),
            PodState::Waiting(Some("container b: ErrImagePull no such image".into()))
        );
        let failed = json!({"status": {"phase": "Failed", "containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}},
            {"name": "b", "state": {"terminated": {"exitCode": 3, "reason": "Error",
                "startedAt": "2026-12-01T10:00:00Z", "finishedAt": "2026-12-01T10:00:07Z"}}},
        ]}});
        assert_eq!(
            pod_state(&failed, &names, 0.0),
            PodState::Ended {
                started: Some(1_796_119_200.0),
                finished: 1_796_119_207.0,
                error: "process b exited with code 3 (Error)".into()
            }
        );
        assert!(is_label_value("micro-cpu_1.x"));
        assert!(!is_label_value("-x"));
        assert!(!is_label_value(&"a".repeat(64)));
    }
}
