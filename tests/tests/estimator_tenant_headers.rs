//! `--prometheus.header` and `--remote-write.header` (and their `--config.file` keys) reach the
//! server: `greenpipe-estimator serve` reads from and writes to a real Prometheus through a
//! loopback tenant gate in this test that, like Mimir's, answers 401 to any request without the
//! expected `X-Scope-OrgID` (and, on writes, an API key). The estimator's ticks land only if
//! every request carried them; its debug log must not show the values.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenpipe_common::names::estimator as own;
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::{
    free_port, marker_ticks, now_ms, one_container_node, remote_write, self_metric, test_binary,
    wait_for, Guard, Prometheus,
};

const QUERY_TENANT: &str = "tenant-query-7f3a";
const WRITE_TENANT: &str = "tenant-write-91c2";
const API_KEY: &str = "key-5d8e0b6a4c";

/// What the gate saw: (path, X-Scope-OrgID, X-Api-Key) of every request, and how many it refused.
#[derive(Default)]
struct Seen {
    requests: Vec<(String, Option<String>, Option<String>)>,
    refused: usize,
}

/// Forwards to `upstream` the requests whose headers are right; answers 401 to the others.
fn start_gate(upstream: String, seen: Arc<Mutex<Seen>>) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let client = reqwest::Client::new();
            let app = axum::Router::new().fallback(
                move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                    let (client, upstream, seen) = (client.clone(), upstream.clone(), seen.clone());
                    async move {
                        let get = |name: &str| {
                            headers
                                .get(name)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string)
                        };
                        let (tenant, key) = (get("x-scope-orgid"), get("x-api-key"));
                        let is_write = uri.path() == "/api/v1/write";
                        let allowed = if is_write {
                            tenant.as_deref() == Some(WRITE_TENANT)
                                && key.as_deref() == Some(API_KEY)
                        } else {
                            tenant.as_deref() == Some(QUERY_TENANT) && key.is_none()
                        };
                        {
                            let mut seen = seen.lock().unwrap();
                            seen.requests.push((
                                uri.path().to_string(),
                                tenant.clone(),
                                key.clone(),
                            ));
                            seen.refused += usize::from(!allowed);
                        }
                        if !allowed {
                            return (StatusCode::UNAUTHORIZED, Bytes::from_static(b"no org id"));
                        }
                        let target = format!(
                            "{upstream}{}",
                            uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
                        );
                        let mut request = client.request(method, target).body(body);
                        for (k, v) in &headers {
                            if k != "host" && k != "content-length" {
                                request = request.header(k, v);
                            }
                        }
                        match request.send().await {
                            Ok(answer) => {
                                let status = answer.status();
                                (status, answer.bytes().await.unwrap_or_default())
                            }
                            Err(_) => (StatusCode::BAD_GATEWAY, Bytes::new()),
                        }
                    }
                },
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    url
}

#[test]
fn headers_from_flags_and_config_file_reach_the_server_and_are_not_logged() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 300_000, 1000);
    let labels = [("node", "h1"), ("container_id", "k1"), ("pod_uid", "p1")];
    remote_write(
        &prom.remote_write_url(),
        one_container_node("h1", &labels, span),
    )
    .expect("pushing features");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let gate = start_gate(prom.url.clone(), seen.clone());
    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("linear-headers")])).unwrap();
    // The write tenant from a flag, the API key from the file (a secret kept off the command
    // line), the query tenant from a flag.
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!("[remote_write.header]\n\"X-Api-Key\" = \"{API_KEY}\"\n"),
    )
    .unwrap();
    let log = dir.path().join("estimator.log");
    let port = free_port();
    let mut estimator = Guard::new(
        "estimator",
        Command::new(test_binary("greenpipe-estimator"))
            .arg("serve")
            .arg(format!("--prometheus-url={gate}"))
            .arg(format!("--remote-write-url={gate}/api/v1/write"))
            .arg(format!("--prometheus.header=X-Scope-OrgID={QUERY_TENANT}"))
            .arg(format!(
                "--remote-write.header=X-Scope-OrgID={WRITE_TENANT}"
            ))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--models={}", models.display()))
            .args(["--interval=1s", "--delay=1s", "--rate-window=5s"])
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting the estimator"),
    );
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    wait_for(Duration::from_secs(60), || {
        (marker_ticks(&prom.url).len() >= 5).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "no ticks through the tenant gate; estimator log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let ok_queries = self_metric(&metrics, own::QUERIES_TOTAL, "outcome=\"ok\"");
    estimator.terminate();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.refused, 0, "requests without the right headers");
    let writes = seen
        .requests
        .iter()
        .filter(|(path, ..)| path == "/api/v1/write")
        .count();
    let queries = seen
        .requests
        .iter()
        .filter(|(path, ..)| path.starts_with("/api/v1/query"))
        .count();
    assert!(writes >= 5, "{writes} remote writes through the gate");
    assert!(
        queries as f64 >= ok_queries && ok_queries >= 5.0,
        "{queries} queries through the gate, {ok_queries} counted ok"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines().count() > 10,
        "the debug log is too short to mean anything:\n{text}"
    );
    for secret in [QUERY_TENANT, WRITE_TENANT, API_KEY] {
        assert!(!text.contains(secret), "{secret} in the estimator's log");
    }
}
