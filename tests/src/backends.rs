//! The storage engines the estimator is tested against beyond Debian's Prometheus 2 and
//! VictoriaMetrics: Prometheus 3, Thanos and Mimir, built from Go source by
//! `scripts/backends.sh build ENGINE` (cached per machine), started here on loopback ports with
//! state in a temporary directory, ready when their readiness endpoints answer, and stopped in
//! the reverse order of their start when dropped. Their tests are ignored unless asked for
//! (scripts/test-backends.sh runs them); scripts/scale-bench.sh starts one through the
//! `greenpipe-backend` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::{daemon, free_port, workspace_root, Guard};

/// How long an engine may take to answer its readiness endpoint (Mimir joins its rings first).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A storage engine built from source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Prometheus 3: remote-write 1.0 and 2.0 receiver, OTLP receiver.
    Prometheus3,
    /// Thanos receive + query, multi-tenant by the `THANOS-TENANT` header, tenancy enforced on
    /// queries.
    Thanos,
    /// Mimir monolithic (`-target=all`), multi-tenant by `X-Scope-OrgID`, blocks on the
    /// filesystem.
    Mimir,
}

impl Engine {
    /// Every engine, by [`Engine::name`].
    pub const ALL: [Engine; 3] = [Engine::Prometheus3, Engine::Thanos, Engine::Mimir];

    /// The name `scripts/backends.sh build` takes.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Prometheus3 => "prometheus3",
            Engine::Thanos => "thanos",
            Engine::Mimir => "mimir",
        }
    }

    /// The engine named `name`; the error lists the known names.
    pub fn parse(name: &str) -> anyhow::Result<Engine> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .with_context(|| {
                let known: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
                format!("unknown engine {name:?} (known: {})", known.join(", "))
            })
    }

    /// The value of the estimator's `--prometheus.engine` for it.
    pub fn estimator_engine(self) -> &'static str {
        match self {
            Engine::Prometheus3 => "prometheus",
            Engine::Thanos => "thanos",
            Engine::Mimir => "mimir",
        }
    }
}

/// The path of `program` in `engine`'s build (built on first use by `scripts/backends.sh build`,
/// which prints the binary directory).
pub fn binary(engine: Engine, program: &str) -> anyhow::Result<PathBuf> {
    let out = Command::new(workspace_root().join("scripts/backends.sh"))
        .args(["build", engine.name()])
        .stderr(Stdio::inherit())
        .output()
        .context("running scripts/backends.sh")?;
    if !out.status.success() {
        bail!("scripts/backends.sh build {} failed", engine.name());
    }
    let dir = String::from_utf8(out.stdout).context("a UTF-8 binary directory")?;
    Ok(PathBuf::from(dir.trim()).join(program))
}

/// A running engine.
pub struct Backend {
    /// Which engine.
    pub engine: Engine,
    /// A Prometheus-compatible query root.
    pub read_url: String,
    /// The remote-write URL.
    pub write_url: String,
    /// The OTLP/HTTP metrics URL, where the engine takes OTLP.
    pub otlp_url: Option<String>,
    /// The tenant header and the tenant the tests write as, where the engine has tenants.
    pub tenant: Option<(&'static str, &'static str)>,
    /// State and logs (`logs/NAME.log`).
    pub dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    /// In start order; stopped in reverse.
    daemons: Vec<Guard>,
}

impl Backend {
    /// Starts `engine` with its state in a temporary directory; panics, with the logs, when it
    /// does not come up.
    pub fn up(engine: &str) -> Backend {
        let engine = Engine::parse(engine).unwrap_or_else(|e| panic!("{e:#}"));
        let temp = tempfile::tempdir().expect("a temporary directory");
        let mut backend = Backend::start_in(engine, temp.path())
            .unwrap_or_else(|e| panic!("starting {}: {e:#}", engine.name()));
        backend._temp = Some(temp);
        backend
    }

    /// Starts `engine` with its state in `dir` (created), and waits until it answers queries
    /// and takes remote writes.
    pub fn start_in(engine: Engine, dir: &Path) -> anyhow::Result<Backend> {
        std::fs::create_dir_all(dir.join("logs"))?;
        let mut backend = Backend {
            engine,
            read_url: String::new(),
            write_url: String::new(),
            otlp_url: None,
            tenant: None,
            dir: dir.to_path_buf(),
            _temp: None,
            daemons: Vec::new(),
        };
        match engine {
            Engine::Prometheus3 => backend.start_prometheus3()?,
            Engine::Thanos => backend.start_thanos()?,
            Engine::Mimir => backend.start_mimir()?,
        }
        Ok(backend)
    }

    /// Starts one daemon of the engine and waits for `ready_url`.
    fn daemon(&mut self, name: &str, command: Command, ready_url: &str) -> anyhow::Result<()> {
        let log = self.dir.join("logs").join(format!("{name}.log"));
        let guard = daemon::start(name, command, &log, ready_url, READY_TIMEOUT)?;
        self.daemons.push(guard);
        Ok(())
    }

    /// Prometheus 3 that only receives: remote write 1.0 and 2.0, OTLP. The out-of-order window
    /// lets a restarted estimator write back the ticks it missed, older than the newest stored.
    fn start_prometheus3(&mut self) -> anyhow::Result<()> {
        let config = self.dir.join("prometheus.yml");
        std::fs::write(
            &config,
            "global:\n  scrape_interval: 15s\nstorage:\n  tsdb:\n    out_of_order_time_window: 2h\n",
        )?;
        let url = format!("http://127.0.0.1:{}", free_port());
        let mut command = Command::new(binary(Engine::Prometheus3, "prometheus")?);
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={}", &url["http://".len()..]))
            .arg("--web.enable-remote-write-receiver")
            .arg("--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest")
            .arg(
                "--web.remote-write-receiver.accepted-protobuf-messages=\
                 io.prometheus.write.v2.Request",
            )
            .arg("--web.enable-otlp-receiver")
            .arg("--log.level=warn");
        self.daemon("prometheus", command, &format!("{url}/-/ready"))?;
        self.write_url = format!("{url}/api/v1/write");
        self.otlp_url = Some(format!("{url}/api/v1/otlp/v1/metrics"));
        self.read_url = url;
        Ok(())
    }

    /// Thanos receive (one ingesting receiver, tenants by `THANOS-TENANT`, stored with a
    /// `tenant_id` label) and Thanos query over it, enforcing tenancy: a query sees only its
    /// tenant's series.
    fn start_thanos(&mut self) -> anyhow::Result<()> {
        let thanos = binary(Engine::Thanos, "thanos")?;
        let [rw, http, grpc, qhttp, qgrpc] = std::array::from_fn(|_| free_port());
        let mut receive = Command::new(&thanos);
        receive
            .arg("receive")
            .arg(format!(
                "--tsdb.path={}",
                self.dir.join("receive").display()
            ))
            .arg(format!("--remote-write.address=127.0.0.1:{rw}"))
            .arg(format!("--http-address=127.0.0.1:{http}"))
            .arg(format!("--grpc-address=127.0.0.1:{grpc}"))
            .arg("--label=receive_replica=\"0\"")
            .arg("--receive.tenant-header=THANOS-TENANT")
            .arg("--tsdb.out-of-order.time-window=2h")
            .arg("--log.level=warn");
        self.daemon(
            "thanos-receive",
            receive,
            &format!("http://127.0.0.1:{http}/-/ready"),
        )?;
        let mut query = Command::new(&thanos);
        query
            .arg("query")
            .arg(format!("--http-address=127.0.0.1:{qhttp}"))
            .arg(format!("--grpc-address=127.0.0.1:{qgrpc}"))
            .arg(format!("--endpoint=127.0.0.1:{grpc}"))
            .arg("--query.enforce-tenancy")
            .arg("--query.tenant-header=THANOS-TENANT")
            .arg("--log.level=warn");
        self.daemon(
            "thanos-query",
            query,
            &format!("http://127.0.0.1:{qhttp}/-/ready"),
        )?;
        self.read_url = format!("http://127.0.0.1:{qhttp}");
        self.write_url = format!("http://127.0.0.1:{rw}/api/v1/receive");
        self.tenant = Some(("THANOS-TENANT", "tenant-a"));
        Ok(())
    }

    /// Mimir in one process (distributor, ingester, querier, query-frontend, store-gateway,
    /// compactor), multi-tenant (`X-Scope-OrgID` required), blocks on the local filesystem, its
    /// rings gossiped by memberlist on loopback only. Queries go through the query frontend
    /// under `/prometheus`, writes to `/api/v1/push`.
    fn start_mimir(&mut self) -> anyhow::Result<()> {
        let [http, grpc, gossip] = std::array::from_fn(|_| free_port());
        let state = self.dir.join("mimir");
        std::fs::create_dir_all(&state)?;
        let s = state.display();
        let config = self.dir.join("mimir.yaml");
        std::fs::write(
            &config,
            format!(
                "target: all
multitenancy_enabled: true
server:
  http_listen_address: 127.0.0.1
  http_listen_port: {http}
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: {grpc}
  log_level: warn
memberlist:
  bind_addr: [127.0.0.1]
  bind_port: {gossip}
  advertise_addr: 127.0.0.1
  advertise_port: {gossip}
distributor:
  ring:
    instance_addr: 127.0.0.1
ingester:
  ring:
    instance_addr: 127.0.0.1
    replication_factor: 1
    # One ingester: ready as soon as it has joined, nothing to hand over on stop.
    min_ready_duration: 0s
    final_sleep: 0s
store_gateway:
  sharding_ring:
    instance_addr: 127.0.0.1
    replication_factor: 1
compactor:
  data_dir: {s}/compactor
  sharding_ring:
    instance_addr: 127.0.0.1
frontend:
  address: 127.0.0.1
blocks_storage:
  backend: filesystem
  filesystem:
    dir: {s}/blocks
  tsdb:
    dir: {s}/tsdb
  bucket_store:
    sync_dir: {s}/tsdb-sync
ruler_storage:
  backend: filesystem
  filesystem:
    dir: {s}/rules
# Their defaults are relative to the working directory (./metrics-activity.log, ./data-ruler/).
activity_tracker:
  filepath: {s}/metrics-activity.log
ruler:
  rule_path: {s}/data-ruler
limits:
  # A restarted estimator writes back the ticks it missed, older than the newest ones stored.
  out_of_order_time_window: 2h
"
            ),
        )?;
        let mut mimir = Command::new(binary(Engine::Mimir, "mimir")?);
        // In its state directory, so that any other relative default path lands there too.
        mimir
            .arg(format!("-config.file={}", config.display()))
            .current_dir(&state);
        self.daemon("mimir", mimir, &format!("http://127.0.0.1:{http}/ready"))?;
        self.read_url = format!("http://127.0.0.1:{http}/prometheus");
        self.write_url = format!("http://127.0.0.1:{http}/api/v1/push");
        self.tenant = Some(("X-Scope-OrgID", "tenant-a"));
        Ok(())
    }

    /// The tenant header, empty when the engine has none.
    pub fn tenant_header(&self) -> &'static str {
        self.tenant.map_or("", |(h, _)| h)
    }

    /// The daemons' process ids, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.daemons.iter().map(Guard::pid).collect()
    }

    /// Shell assignments of the URLs and the tenant (`READ_URL`, `WRITE_URL`, `OTLP_URL`,
    /// `TENANT_HEADER`, `TENANT`, `ENGINE`), for scripts.
    pub fn env(&self) -> String {
        let (header, tenant) = self.tenant.unwrap_or(("", ""));
        format!(
            "READ_URL={}\nWRITE_URL={}\nOTLP_URL={}\nTENANT_HEADER={header}\nTENANT={tenant}\n\
             ENGINE={}\n",
            self.read_url,
            self.write_url,
            self.otlp_url.as_deref().unwrap_or(""),
            self.engine.estimator_engine()
        )
    }

    /// The last lines of each daemon's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("logs")) {
            for entry in entries.flatten() {
                let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                text.push_str(&format!("== {}\n", entry.path().display()));
                for line in tail.into_iter().rev() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // Query before receive: a query front never outlives what it reads.
        while let Some(daemon) = self.daemons.pop() {
            drop(daemon);
        }
    }
}
