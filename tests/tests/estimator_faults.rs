//! Fault injection: `greenpipe-estimator serve` reads from and writes to a real Prometheus through
//! a loopback proxy in this test that misbehaves on command — answers slower than the tick and
//! the HTTP timeout, truncated and non-JSON bodies, NaN/+Inf/-Inf in every result, and a receiver
//! that accepts the connection and never answers. Each fault must show as counted errors within
//! bounded time, never as `outcome="ok"` or an absurd abandoned-tick count, and once the proxy
//! behaves again every tick from the first to the last is in Prometheus.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenpipe_common::names::estimator as self_metric;
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::{
    free_port, marker_ticks, now_ms, one_container_node, remote_write, wait_for, workspace_binary,
    Guard, Prometheus,
};

/// What the proxy does to each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Fault {
    None = 0,
    /// Waits 4 s (beyond the 1 s tick and the 2 s --http.timeout), then forwards.
    Slow,
    /// Forwards and cuts the answer body in half.
    Truncated,
    /// Answers queries with 200 and an HTML page (writes pass: a receiver that answers 200
    /// without storing cannot be told apart from one that stores).
    NotJson,
    /// Forwards and replaces every sample value with NaN, +Inf or -Inf.
    NonFinite,
    /// Query answers pass; remote-write requests are accepted and never answered.
    WritesHang,
    /// Every request is accepted and never answered.
    Hang,
}

/// Starts the proxy; also returns how many well-formed query answers it has passed on (forwarded
/// bodies and their NaN/Inf rewrites, never truncated, HTML or unanswered ones): the estimator
/// can have counted at most that many queries `ok`.
fn start_proxy(upstream: String, fault: Arc<AtomicU8>) -> (String, Arc<AtomicU64>) {
    let well_formed = Arc::new(AtomicU64::new(0));
    let counted = well_formed.clone();
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
                    let (client, upstream, fault, counted) = (
                        client.clone(),
                        upstream.clone(),
                        fault.clone(),
                        counted.clone(),
                    );
                    async move {
                        let f = fault.load(Ordering::SeqCst);
                        let is_write = uri.path() == "/api/v1/write";
                        if f == Fault::Hang as u8 || (f == Fault::WritesHang as u8 && is_write) {
                            std::future::pending::<()>().await;
                        }
                        if f == Fault::Slow as u8 {
                            tokio::time::sleep(Duration::from_secs(4)).await;
                        }
                        if f == Fault::NotJson as u8 && !is_write {
                            return (
                                StatusCode::OK,
                                [("content-type", "text/html")],
                                Bytes::from_static(b"<html><body>502 upstream sad</body></html>"),
                            );
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
                        let Ok(answer) = request.send().await else {
                            return (
                                StatusCode::BAD_GATEWAY,
                                [("content-type", "text/plain")],
                                Bytes::new(),
                            );
                        };
                        let status = answer.status();
                        let mut body = answer.bytes().await.unwrap_or_default();
                        if f == Fault::Truncated as u8 {
                            body = body.slice(..body.len() / 2);
                        } else if f == Fault::NonFinite as u8 && !is_write {
                            body = Bytes::from(non_finite(&body));
                        }
                        if !is_write && f != Fault::Truncated as u8 {
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                        (status, [("content-type", "application/json")], body)
                    }
                },
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (url, well_formed)
}

/// The answer with every sample value replaced by NaN, +Inf or -Inf in turn.
fn non_finite(body: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return body.to_vec();
    };
    let specials = ["NaN", "+Inf", "-Inf"];
    let mut k = 0;
    let mut set = |point: &mut serde_json::Value| {
        point[1] = serde_json::Value::from(specials[k % 3]);
        k += 1;
    };
    if let Some(result) = v["data"]["result"].as_array_mut() {
        for series in result {
            if let Some(points) = series["values"].as_array_mut() {
                points.iter_mut().for_each(&mut set);
            }
            if series["value"].is_array() {
                set(&mut series["value"]);
            }
        }
    }
    serde_json::to_vec(&v).unwrap()
}

struct Estimator {
    guard: Guard,
    metrics_url: String,
}

impl Estimator {
    fn start(models: &Path, proxy: &str, log: &Path) -> Estimator {
        let port = free_port();
        let child = Command::new(workspace_binary("greenpipe-estimator"))
            .arg("serve")
            .arg(format!("--prometheus-url={proxy}"))
            .arg(format!("--remote-write-url={proxy}/api/v1/write"))
            .arg(format!("--models={}", models.display()))
            .args(["--interval=1s", "--delay=1s", "--rate-window=5s"])
            .args(["--http.timeout=2s", "--remote-write.max-backoff=1s"])
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("starting the estimator");
        Estimator {
            guard: Guard::new("estimator", child),
            metrics_url: format!("http://127.0.0.1:{port}/metrics"),
        }
    }

    /// Sum of a self metric's series carrying every `k="v"` pair of `labels` (comma-separated,
    /// any order).
    fn metric(&self, name: &str, labels: &str) -> f64 {
        let text = reqwest::blocking::get(&self.metrics_url)
            .and_then(|r| r.text())
            .unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter(|l| labels.split(',').all(|pair| l.contains(pair)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Queries of `query` (all when empty) whose outcome was not `ok`: `error` for answers that
    /// do not decode or hold impossible values, `timeout`, `network_error`, `http_<code>`.
    fn failures(&self, query: &str) -> f64 {
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("query=\"{query}\",")
        };
        self.metric(self_metric::QUERIES_TOTAL, q.trim_end_matches(','))
            - self.metric(self_metric::QUERIES_TOTAL, &format!("{q}outcome=\"ok\""))
    }

    /// Waits until the failures of `query` have grown past `before`.
    fn failures_grow(&self, query: &str, before: f64, what: &str) {
        wait_for(Duration::from_secs(30), || {
            (self.failures(query) > before).then_some(())
        })
        .unwrap_or_else(|| panic!("{what}: failed {query:?} queries stayed at {before}"))
    }

    /// Waits until `name{labels}` has grown past `before`.
    fn grows(&self, name: &str, labels: &str, before: f64, what: &str) -> f64 {
        wait_for(Duration::from_secs(30), || {
            let now = self.metric(name, labels);
            (now > before).then_some(now)
        })
        .unwrap_or_else(|| panic!("{what}: {name}{{{labels}}} stayed at {before}"))
    }
}

#[test]
fn a_misbehaving_prometheus_gives_counted_errors_and_loses_no_tick() {
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    let now = now_ms() / 1000 * 1000;
    let span = (now - 120_000, now + 400_000, 1000);
    let labels = [("node", "f1"), ("container_id", "k1"), ("pod_uid", "p1")];
    remote_write(
        &prom.remote_write_url(),
        one_container_node("f1", &labels, span),
    )
    .expect("pushing features");
    let models = dir.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("linear-faults")])).unwrap();
    let fault = Arc::new(AtomicU8::new(Fault::None as u8));
    let (proxy, well_formed) = start_proxy(prom.url.clone(), fault.clone());
    let well_formed = || well_formed.load(Ordering::SeqCst) as f64;
    let set = |f: Fault| fault.store(f as u8, Ordering::SeqCst);

    let mut a = Estimator::start(&models, &proxy, &dir.path().join("a.log"));
    wait_for(Duration::from_secs(60), || {
        (marker_ticks(&prom.url).len() >= 3).then_some(())
    })
    .expect("first ticks through the proxy");
    let first_tick = *marker_ticks(&prom.url).first().unwrap();

    for (f, what) in [
        (Fault::Slow, "answers slower than --http.timeout"),
        (Fault::Truncated, "truncated answers"),
        (Fault::NotJson, "non-JSON answers"),
    ] {
        let before = a.failures("");
        set(f);
        a.failures_grow("", before, what);
        std::thread::sleep(Duration::from_secs(3));
        // Nothing that failed was counted as a success: every `ok` needs a well-formed answer
        // (read in this order, the bound holds whatever is in flight).
        let ok = a.metric(self_metric::QUERIES_TOTAL, "outcome=\"ok\"");
        let passed = well_formed();
        assert!(
            ok <= passed,
            "{what}: {ok} queries counted ok, {passed} well-formed answers"
        );
        set(Fault::None);
        let resumed = now_ms();
        wait_for(Duration::from_secs(30), || {
            (*marker_ticks(&prom.url).last()? >= resumed).then_some(())
        })
        .unwrap_or_else(|| panic!("ticks resume after {what}"));
    }

    let skipped = a.metric(
        self_metric::NODES_SKIPPED_TOTAL,
        "reason=\"non_finite_feature\"",
    );
    set(Fault::NonFinite);
    a.grows(
        self_metric::NODES_SKIPPED_TOTAL,
        "reason=\"non_finite_feature\"",
        skipped,
        "NaN/Inf feature values",
    );
    set(Fault::None);

    let retried = a.metric(self_metric::SAMPLES_RETRIED_TOTAL, "");
    set(Fault::WritesHang);
    a.grows(
        self_metric::SAMPLES_RETRIED_TOTAL,
        "",
        retried,
        "a receiver that never answers",
    );
    set(Fault::None);
    assert_eq!(a.metric(self_metric::TICKS_ABANDONED_TOTAL, ""), 0.0);

    // A restart while the answers hold NaN/Inf: the resume point must not be trusted (this was
    // 1.8e19 abandoned ticks), then while nothing answers at all.
    let ok = a.metric(self_metric::QUERIES_TOTAL, "outcome=\"ok\"");
    assert!(ok <= well_formed(), "{ok} queries counted ok");
    a.guard.terminate();
    set(Fault::NonFinite);
    let passed_before_b = well_formed();
    let b = Estimator::start(&models, &proxy, &dir.path().join("b.log"));
    b.grows(
        self_metric::QUERIES_TOTAL,
        "query=\"progress\",outcome=\"error\"",
        0.0,
        "a NaN/Inf resume point",
    );
    assert_eq!(
        b.metric(self_metric::TICKS_TOTAL, ""),
        0.0,
        "nothing written from a bogus resume point"
    );
    set(Fault::Hang);
    let before = b.failures("progress");
    b.failures_grow("progress", before, "a Prometheus that never answers");
    set(Fault::None);
    let recovered = now_ms();
    wait_for(Duration::from_secs(60), || {
        (*marker_ticks(&prom.url).last()? >= recovered).then_some(())
    })
    .expect("the restarted estimator catches up");

    assert_eq!(b.metric(self_metric::TICKS_ABANDONED_TOTAL, ""), 0.0);
    let ok = b.metric(self_metric::QUERIES_TOTAL, "outcome=\"ok\"");
    assert!(
        ok <= well_formed() - passed_before_b,
        "restarted: {ok} queries counted ok"
    );
    assert!(b.metric(self_metric::TICKS_BACKFILLED_TOTAL, "") >= 1.0);
    let ticks = marker_ticks(&prom.url);
    let last = *ticks.last().unwrap();
    let missing: Vec<i64> = (0..=(last - first_tick) / 1000)
        .map(|k| first_tick + k * 1000)
        .filter(|t| !ticks.contains(t))
        .collect();
    assert!(missing.is_empty(), "ticks lost: {missing:?}");
}
