//! A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok (fake kubelets), built from Go source by `scripts/control-plane.sh
//! build` (cached per machine) and started here on loopback ports with their own certificates
//! and Pod Security admission on. Stopped when dropped, in the reverse order of the start (the
//! API server's graceful shutdown is quick while etcd is still up), so nothing is left running
//! even when a test panics. `greenpipe-control-plane DIR` starts one for use by hand.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine as _;
use serde_json::Value;

use crate::pki::{self, Issued};
use crate::{daemon, free_port, wait_for, workspace_root, Guard};

/// How long the API server may take to be ready, and the controllers to create the default
/// ServiceAccount.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Audit log of pod and node writes: tests read exact (µs) server-side times of evictions,
/// bindings and patches from it.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "delete", "patch", "update"]
    resources: [{group: "", resources: ["pods", "pods/binding", "nodes"]}]
  - level: None
"#;

/// One running control plane.
pub struct ControlPlane {
    /// State directory: certificates (`pki/`), logs (`logs/`), etcd data, kubeconfigs.
    pub dir: PathBuf,
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// API server URL, `https://127.0.0.1:PORT`.
    pub server: String,
    http: reqwest::blocking::Client,
    ca_pem: Vec<u8>,
    identity_pem: Vec<u8>,
    _temp: Option<tempfile::TempDir>,
    /// In start order; stopped in reverse.
    daemons: Vec<Guard>,
}

/// The events of one watch (`?watch=1`), each with the instant it arrived, collected by a
/// background thread until the API server ends the stream.
pub struct Watch {
    events: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, Value)>>>,
}

impl Watch {
    /// Every event so far: `(arrival, {"type": ADDED|MODIFIED|DELETED, "object": {...}})`.
    pub fn events(&self) -> Vec<(std::time::Instant, Value)> {
        self.events.lock().expect("watch events").clone()
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The binaries' directory and kwok's stage file, built on first use by
/// `scripts/control-plane.sh build`, which prints them one per line.
fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let out = Command::new(workspace_root().join("scripts/control-plane.sh"))
        .arg("build")
        .stdin(Stdio::null())
        .output()
        .context("running scripts/control-plane.sh build")?;
    if !out.status.success() {
        bail!("scripts/control-plane.sh build failed:\n{}", text(&out));
    }
    let stdout = String::from_utf8(out.stdout).context("UTF-8 paths")?;
    let mut lines = stdout.lines().map(PathBuf::from);
    match (lines.next(), lines.next()) {
        (Some(bin), Some(stages)) => Ok((bin, stages)),
        _ => bail!("scripts/control-plane.sh build printed {stdout:?}, not two paths"),
    }
}

/// The certificates: one CA; the API server's serving certificate for 127.0.0.1 and the
/// in-cluster names; client certificates for the admin (`system:masters`), the controller
/// manager and the scheduler (their RBAC bootstrap identities); the service-account signing
/// key pair (`sa.key`, `sa.pub`).
struct Pki {
    ca: Issued,
    apiserver: Issued,
    sa_key: PathBuf,
    sa_pub: PathBuf,
}

impl Pki {
    fn make(dir: &Path) -> anyhow::Result<Pki> {
        std::fs::create_dir_all(dir)?;
        let ca = pki::ca(dir, "ca");
        let apiserver = pki::issue_with(
            dir,
            &ca,
            "apiserver",
            "/CN=kube-apiserver",
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,\
             DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        );
        for (name, subject) in [
            ("admin", "/O=system:masters/CN=greenpipe-admin"),
            ("controller-manager", "/CN=system:kube-controller-manager"),
            ("scheduler", "/CN=system:kube-scheduler"),
        ] {
            pki::issue_with(
                dir,
                &ca,
                name,
                subject,
                "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
            );
        }
        let (sa_key, sa_pub) = pki::key_pair(dir, "sa");
        Ok(Pki {
            ca,
            apiserver,
            sa_key,
            sa_pub,
        })
    }

    /// A kubeconfig for `server` with `name`'s client certificate embedded.
    fn kubeconfig(&self, dir: &Path, name: &str, server: &str) -> anyhow::Result<String> {
        let b64 = |path: PathBuf| -> anyhow::Result<String> {
            let bytes = std::fs::read(&path).with_context(|| format!("{}", path.display()))?;
            Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
        };
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "greenpipe-test", "cluster": {
                "server": server,
                "certificate-authority-data": b64(self.ca.cert.clone())?,
            }}],
            "users": [{"name": name, "user": {
                "client-certificate-data": b64(dir.join(format!("{name}.pem")))?,
                "client-key-data": b64(dir.join(format!("{name}.key")))?,
            }}],
            "contexts": [{"name": "greenpipe-test",
                "context": {"cluster": "greenpipe-test", "user": name}}],
            "current-context": "greenpipe-test",
        });
        Ok(serde_json::to_string_pretty(&config)?)
    }
}

impl ControlPlane {
    /// Builds (first time on the machine) or reuses the binaries, starts everything with its
    /// state in a temporary directory and waits until the API server is ready and the
    /// controllers run.
    pub fn start() -> anyhow::Result<ControlPlane> {
        let temp = tempfile::Builder::new()
            .prefix("greenpipe-control-plane-")
            .tempdir()?;
        let mut cp = ControlPlane::start_in(temp.path())?;
        cp._temp = Some(temp);
        Ok(cp)
    }

    /// [`ControlPlane::start`] with the state in `dir` (created).
    pub fn start_in(dir: &Path) -> anyhow::Result<ControlPlane> {
        let (bin, stages) = binaries()?;
        std::fs::create_dir_all(dir.join("logs"))?;
        std::fs::create_dir_all(dir.join("etcd"))?;
        let pki_dir = dir.join("pki");
        let pki = Pki::make(&pki_dir)?;
        let [etcd_port, peer_port, api_port, kwok_port] = std::array::from_fn(|_| free_port());
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = |name: &str, file: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(file);
            std::fs::write(&path, pki.kubeconfig(&pki_dir, name, &server)?)?;
            Ok(path)
        };
        let admin = kubeconfig("admin", "kubeconfig")?;
        let cm = kubeconfig("controller-manager", "controller-manager.kubeconfig")?;
        let scheduler = kubeconfig("scheduler", "scheduler.kubeconfig")?;
        let mut identity_pem = std::fs::read(pki_dir.join("admin.pem"))?;
        identity_pem.extend(std::fs::read(pki_dir.join("admin.key"))?);
        let mut cp = ControlPlane {
            dir: dir.to_path_buf(),
            kubeconfig: admin,
            server: server.clone(),
            http: reqwest::blocking::Client::new(),
            ca_pem: std::fs::read(&pki.ca.cert)?,
            identity_pem,
            _temp: None,
            daemons: Vec::new(),
        };
        cp.http = cp.client(Some(Duration::from_secs(30)))?;
        let path = |p: &Path| p.display().to_string();

        // fsync off: throw-away test data, and the shared machine's disk would otherwise dominate.
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(bin.join("etcd"));
        etcd.arg("--name=default")
            .arg(format!("--data-dir={}", path(&dir.join("etcd"))))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=default={peer_url}"))
            .args(["--unsafe-no-fsync", "--log-level=warn"]);
        let log = cp.log_path("etcd");
        cp.daemons.push(daemon::start(
            "etcd",
            etcd,
            &log,
            &format!("{etcd_url}/health"),
            READY_TIMEOUT,
        )?);

        let audit_policy = dir.join("audit-policy.yaml");
        std::fs::write(&audit_policy, AUDIT_POLICY)?;
        // Pod Security admission is in the default plugin set; named here so it cannot go
        // missing.
        let mut apiserver = Command::new(bin.join("kube-apiserver"));
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
            .arg(format!("--secure-port={api_port}"))
            .arg("--endpoint-reconciler-type=none")
            .arg(format!("--tls-cert-file={}", path(&pki.apiserver.cert)))
            .arg(format!(
                "--tls-private-key-file={}",
                path(&pki.apiserver.key)
            ))
            .arg(format!("--client-ca-file={}", path(&pki.ca.cert)))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--enable-admission-plugins=NodeRestriction,PodSecurity")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!("--service-account-key-file={}", path(&pki.sa_pub)))
            .arg(format!(
                "--service-account-signing-key-file={}",
                path(&pki.sa_key)
            ))
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg(format!("--audit-policy-file={}", path(&audit_policy)))
            .arg(format!(
                "--audit-log-path={}",
                path(&dir.join("logs/audit.log"))
            ))
            .args(["--allow-privileged=true", "--profiling=false"]);
        cp.spawn("kube-apiserver", apiserver)?;
        cp.wait_until("the API server's /readyz", |cp| {
            cp.http
                .get(format!("{}/readyz", cp.server))
                .send()
                .is_ok_and(|r| r.status().is_success())
        })?;

        // The taint-eviction controller (NoExecute taint → evict after tolerationSeconds) is in
        // the default set; each controller uses its own service account, as in a real cluster.
        let mut controllers = Command::new(bin.join("kube-controller-manager"));
        controllers
            .arg(format!("--kubeconfig={}", path(&cm)))
            .arg(format!("--authentication-kubeconfig={}", path(&cm)))
            .arg(format!("--authorization-kubeconfig={}", path(&cm)))
            .args([
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
            ])
            .arg(format!(
                "--service-account-private-key-file={}",
                path(&pki.sa_key)
            ))
            .arg(format!("--root-ca-file={}", path(&pki.ca.cert)))
            .arg("--controllers=*");
        cp.spawn("kube-controller-manager", controllers)?;
        let mut sched = Command::new(bin.join("kube-scheduler"));
        sched
            .arg(format!("--kubeconfig={}", path(&scheduler)))
            .arg(format!("--authentication-kubeconfig={}", path(&scheduler)))
            .arg(format!("--authorization-kubeconfig={}", path(&scheduler)))
            .args([
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
            ]);
        cp.spawn("kube-scheduler", sched)?;
        // Fake kubelets for the Nodes annotated kwok.x-k8s.io/node=fake (kwok's default),
        // nothing else. Node and pod IPs are status fields only: no traffic goes to them.
        let mut kwok = Command::new(bin.join("kwok"));
        kwok.arg(format!("--config={}", path(&stages)))
            .arg(format!("--kubeconfig={}", path(&cp.kubeconfig)))
            .args([
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
            ])
            .arg(format!("--server-address=127.0.0.1:{kwok_port}"))
            .args([
                "--node-lease-duration-seconds=40",
                "--cidr=10.244.0.1/16",
                "--node-ip=10.0.0.1",
            ]);
        cp.spawn("kwok", kwok)?;
        // Usable means: the controllers run (the default ServiceAccount exists) and nothing died.
        cp.wait_until("the default ServiceAccount", |cp| {
            cp.get("/api/v1/namespaces/default/serviceaccounts/default")
                .is_ok_and(|sa| sa.is_some())
        })?;
        Ok(cp)
    }

    fn log_path(&self, daemon: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{daemon}.log"))
    }

    /// Starts a daemon whose readiness [`ControlPlane::wait_until`] checks.
    fn spawn(&mut self, name: &str, command: Command) -> anyhow::Result<()> {
        let log = self.log_path(name);
        self.daemons.push(daemon::spawn(name, command, &log)?);
        Ok(())
    }

    /// Polls `ready` until it holds, failing with the daemon's log when one exits first or
    /// after [`READY_TIMEOUT`].
    fn wait_until(
        &mut self,
        what: &str,
        ready: impl Fn(&ControlPlane) -> bool,
    ) -> anyhow::Result<()> {
        let mut dead = None;
        let ok = wait_for(READY_TIMEOUT, || {
            if let Some((name, status)) = self
                .daemons
                .iter_mut()
                .find_map(|d| Some((d.name().to_string(), d.exited()?)))
            {
                dead = Some(format!("{name} exited ({status})"));
                return Some(false);
            }
            ready(self).then_some(true)
        });
        match (ok, dead) {
            (Some(true), _) => Ok(()),
            (_, Some(dead)) => {
                let name = dead.split(' ').next().unwrap_or_default().to_string();
                bail!("{dead}; last lines of its log:\n{}", self.log_tail(&name))
            }
            _ => bail!(
                "{what} not there after {READY_TIMEOUT:?}; logs in {}",
                self.dir.join("logs").display()
            ),
        }
    }

    /// An HTTP client that trusts the test CA and presents the admin certificate.
    fn client(&self, timeout: Option<Duration>) -> anyhow::Result<reqwest::blocking::Client> {
        Ok(reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&self.ca_pem)?)
            .identity(reqwest::Identity::from_pem(&self.identity_pem)?)
            .timeout(timeout)
            .build()?)
    }

    /// Starts watching a collection (e.g. `/api/v1/namespaces/demo/pods`) as the admin. The
    /// initial state arrives as ADDED events.
    pub fn watch(&self, path: &str) -> anyhow::Result<Watch> {
        use std::io::BufRead;
        let client = self.client(None)?;
        let response = client
            .get(format!("{}{path}?watch=1&timeoutSeconds=900", self.server))
            .send()?
            .error_for_status()?;
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(response).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock()
                        .expect("watch events")
                        .push((std::time::Instant::now(), v));
                }
            }
        });
        Ok(Watch { events })
    }

    /// The CA certificate that signed the API server's serving certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("pki/ca.pem")
    }

    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c
    }

    /// Runs admin `kubectl ARGS`, failing with its output if it fails; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        run_ok(self.kubectl().args(args))
    }

    /// `kubectl apply --server-side` of a YAML document stream, as the admin.
    pub fn apply(&self, yaml: &str) -> anyhow::Result<String> {
        run_with_stdin(
            self.kubectl().args([
                "apply",
                "--server-side",
                "--field-manager=greenpipe-tests",
                "-f",
                "-",
            ]),
            yaml,
        )
    }

    /// Server-side apply of objects (sent as one `v1` List), as the admin.
    pub fn apply_objects(&self, objects: &[Value]) -> anyhow::Result<String> {
        self.apply(&list(objects).to_string())
    }

    /// GET an API path (e.g. `/api/v1/nodes/x`) as the admin; `None` on 404.
    pub fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        let r = self.http.get(format!("{}{path}", self.server)).send()?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let status = r.status();
        if !status.is_success() {
            bail!("GET {path}: HTTP {status}: {}", r.text()?);
        }
        Ok(Some(r.json()?))
    }

    /// A kubeconfig that authenticates as ServiceAccount `namespace/name` with a bound token
    /// from the TokenRequest API (what a pod's projected token is), written into the state
    /// directory.
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<PathBuf> {
        let token =
            self.kubectl_ok(&["create", "token", name, "-n", namespace, "--duration=2h"])?;
        let path = self.dir.join(format!("sa-{namespace}-{name}.kubeconfig"));
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {
                "server": self.server,
                "certificate-authority": self.ca_file(),
            }}],
            "users": [{"name": name, "user": {"token": token.trim()}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": name, "namespace": namespace}}],
            "current-context": "test",
        });
        std::fs::write(&path, serde_json::to_string_pretty(&config)?)?;
        Ok(path)
    }

    /// Whether the holder of `kubeconfig` (one [`Self::service_account_kubeconfig`] wrote) may
    /// VERB RESOURCE[/SUBRESOURCE] in `namespace` (`None`: in every namespace), as the API server
    /// answers a SelfSubjectAccessReview sent with that kubeconfig's token: the question
    /// `kubectl auth can-i` asks, without a kubectl process per question. The deploy tests ask
    /// hundreds, and a kubectl process each was most of their time on 2 cores.
    /// A resource outside the core group is named `resource.group` (`deployments.apps`), as
    /// kubectl takes it; a bare name must be a core resource, so a misspelt or non-core one is an
    /// error rather than a silent "no".
    pub fn can_i(
        &self,
        kubeconfig: &Path,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<bool> {
        let config: Value = serde_json::from_slice(&std::fs::read(kubeconfig)?)
            .with_context(|| format!("{}: not a JSON kubeconfig", kubeconfig.display()))?;
        let token = config["users"][0]["user"]["token"]
            .as_str()
            .with_context(|| format!("{}: no token", kubeconfig.display()))?;
        let (name, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let (name, group) = name.split_once('.').unwrap_or((name, ""));
        if group.is_empty() {
            let core = self.get("/api/v1")?.context("GET /api/v1: not found")?;
            let known = core["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["name"] == name));
            if !known {
                bail!("{resource}: not a core resource; name another group's as resource.group");
            }
        }
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {
                "namespace": namespace.unwrap_or(""),
                "verb": verb,
                "group": group,
                "resource": name,
                "subresource": subresource,
            }},
        });
        let client = reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&self.ca_pem)?)
            .build()?;
        let r = client
            .post(format!(
                "{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                self.server
            ))
            .bearer_auth(token)
            .json(&review)
            .send()?;
        let status = r.status();
        if !status.is_success() {
            bail!("can-i {verb} {resource}: HTTP {status}: {}", r.text()?);
        }
        let answer: Value = r.json()?;
        answer["status"]["allowed"]
            .as_bool()
            .with_context(|| format!("can-i {verb} {resource}: no status.allowed in {answer}"))
    }

    /// Creates Nodes that kwok manages (annotation `kwok.x-k8s.io/node: fake`), labelled like a
    /// kubelet labels its node (hostname, os linux, arch amd64) and with `labels`, and waits
    /// until each is Ready.
    pub fn add_fake_nodes(&self, nodes: &[(&str, &[(&str, &str)])]) -> anyhow::Result<()> {
        let mut objects = Vec::new();
        for (name, labels) in nodes {
            let mut l = serde_json::Map::new();
            l.insert("kubernetes.io/hostname".into(), Value::from(*name));
            l.insert("kubernetes.io/os".into(), Value::from("linux"));
            // What a kubelet on this machine would report; `labels` may name another.
            l.insert("kubernetes.io/arch".into(), Value::from("amd64"));
            l.insert("type".into(), Value::from("kwok"));
            for (k, v) in *labels {
                l.insert((*k).into(), Value::from(*v));
            }
            let node = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": l,
                },
            });
            objects.push(node);
        }
        self.apply_objects(&objects)?;
        for (name, _) in nodes {
            let ready = crate::wait_for(Duration::from_secs(60), || {
                let n = self.get(&format!("/api/v1/nodes/{name}")).ok()??;
                n["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    .then_some(())
            });
            if ready.is_none() {
                bail!(
                    "node {name} did not become Ready (is kwok running? {})",
                    self.log_tail("kwok")
                );
            }
        }
        Ok(())
    }

    /// The API server's audit events so far (pod and node writes, stage ResponseComplete).
    pub fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("logs/audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// The last lines of a daemon's log (`etcd`, `kube-apiserver`, ..., `kwok`).
    pub fn log_tail(&self, daemon: &str) -> String {
        let log = std::fs::read_to_string(self.dir.join(format!("logs/{daemon}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        while let Some(daemon) = self.daemons.pop() {
            drop(daemon);
        }
    }
}

/// A `v1` List of `objects`: how kubectl takes several JSON objects in one document.
pub fn list(objects: &[Value]) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})
}

/// Runs a command, failing with its output unless it succeeds; returns stdout.
pub fn run_ok(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", text(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with `input` on stdin; returns stdout and stderr, or fails with both.
pub fn run_with_stdin(cmd: &mut Command, input: &str) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {cmd:?}"))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", text(&out));
    }
    Ok(text(&out))
}
