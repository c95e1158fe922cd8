//! A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok (fake kubelets), built from source and started by
//! `scripts/control-plane.sh`, on loopback ports with their own certificates. Stopped when
//! dropped (the script's `down`, then SIGKILL to the daemons' process group), so nothing is
//! left running even when a test panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::workspace_root;

/// One running control plane.
pub struct ControlPlane {
    /// State directory: certificates (`pki/`), logs (`logs/`), etcd data, kubeconfigs.
    pub dir: tempfile::TempDir,
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// API server URL, `https://127.0.0.1:PORT`.
    pub server: String,
    http: reqwest::blocking::Client,
    ca_pem: Vec<u8>,
    identity_pem: Vec<u8>,
    pgid: Option<libc::pid_t>,
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

fn script() -> PathBuf {
    workspace_root().join("scripts/control-plane.sh")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl ControlPlane {
    /// Builds (first time on the machine) or reuses the binaries, starts everything and waits
    /// until the API server is ready and the controllers run.
    pub fn start() -> anyhow::Result<ControlPlane> {
        let dir = tempfile::Builder::new()
            .prefix("greenpipe-control-plane-")
            .tempdir()?;
        let out = Command::new(script())
            .arg("up")
            .arg(dir.path())
            .stdin(Stdio::null())
            .output()
            .context("running scripts/control-plane.sh up")?;
        let pgid = std::fs::read_to_string(dir.path().join("pgid"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let mut cp = ControlPlane {
            kubeconfig: dir.path().join("kubeconfig"),
            server: String::new(),
            http: reqwest::blocking::Client::new(),
            ca_pem: Vec::new(),
            identity_pem: Vec::new(),
            pgid,
            dir,
        };
        if !out.status.success() {
            bail!("scripts/control-plane.sh up failed:\n{}", text(&out));
        }
        let env = std::fs::read_to_string(cp.dir.path().join("env"))?;
        cp.server = env
            .lines()
            .find_map(|l| l.strip_prefix("APISERVER="))
            .context("no APISERVER in env")?
            .to_string();
        let pki = cp.dir.path().join("pki");
        cp.identity_pem = std::fs::read(pki.join("admin.crt"))?;
        cp.identity_pem
            .extend(std::fs::read(pki.join("admin.key"))?);
        cp.ca_pem = std::fs::read(pki.join("ca.crt"))?;
        cp.http = cp.client(Some(Duration::from_secs(30)))?;
        Ok(cp)
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
        self.dir.path().join("pki/ca.crt")
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
        let path = self
            .dir
            .path()
            .join(format!("sa-{namespace}-{name}.kubeconfig"));
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

    /// `kubectl auth can-i VERB RESOURCE[/SUBRESOURCE] [-n NS]` as the holder of `kubeconfig` (a
    /// SelfSubjectAccessReview): whether the API server allows it.
    pub fn can_i(
        &self,
        kubeconfig: &Path,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<bool> {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["auth", "can-i", verb]);
        // `kubectl auth can-i VERB a/b` means resource a, object b: a subresource needs its flag.
        match resource.split_once('/') {
            Some((resource, sub)) => c.arg(resource).arg(format!("--subresource={sub}")),
            None => c.arg(resource),
        };
        match namespace {
            Some(ns) => c.args(["-n", ns]),
            None => c.arg("--all-namespaces"),
        };
        let out = c.output()?;
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match answer.as_str() {
            "yes" => Ok(true),
            "no" => Ok(false),
            _ => bail!("kubectl auth can-i {verb} {resource}: {}", text(&out)),
        }
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
        std::fs::read_to_string(self.dir.path().join("logs/audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// The last lines of a daemon's log (`etcd`, `kube-apiserver`, ..., `kwok`).
    pub fn log_tail(&self, daemon: &str) -> String {
        let log = std::fs::read_to_string(self.dir.path().join(format!("logs/{daemon}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("down")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .status();
        // Belt and braces: whatever is left in the daemons' group goes now.
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) on the process group our script created for its daemons.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
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
