//! `greenpipe-estimator serve` scaled out: replicas `--shard 0/2` and `1/2` against one
//! Prometheus (nodes selected by name from a node-list query, or by a `shard` label that a
//! `hashmod` relabel rule adds) and against two Prometheus servers sharded by `hashmod`
//! (functional sharding, each replica reading its own). Real exporters with distinct node names
//! are scraped; the two sharded servers remote-write what they scraped into a third, so a single
//! replica reading that one sees exactly the samples the pair sees.
//!
//! Every replica reads through a recording proxy and writes into a recording receiver, so the
//! test checks what each replica asked for (each of its queries, run again, selects only its own
//! nodes), not just what it wrote, and that together a pair wrote exactly what the single replica
//! wrote: the same series with the same values at the same ticks, none twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenpipe_common::names::estimate;
use greenpipe_estimator::remote_write;
use greenpipe_estimator::shard::hashmod;
use greenpipe_tests::models::{file_json, linear_test_model};
use greenpipe_tests::{free_port, wait_for, workspace_binary, Guard, Prometheus};

/// The linear model of `estimator_serve.rs`, attributing by CPU alone.
fn model_json() -> String {
    file_json(&[linear_test_model(
        r#"[{"feature": "cpu_seconds_per_second", "watts_per_unit": 2.0}]"#,
    )])
}

type Labels = BTreeMap<String, String>;

/// One sample received: series labels, time, value.
type Written = (Labels, i64, f64);

/// An in-process remote-write receiver that keeps every sample.
struct Recorder {
    url: String,
    samples: Arc<Mutex<Vec<Written>>>,
}

/// Requests a proxy saw: API name (`query`, `query_range`) and form parameters.
type Asked = Arc<Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// A proxy in front of a query API that records every request's form parameters and may answer
/// in its place (as Thanos or Mimir would: limits, warnings, partial answers).
struct QueryProxy {
    url: String,
    requests: Asked,
}

/// What the proxy does with request number `n` (its form): `None` forwards the upstream answer,
/// `Some((status, body))` answers instead; the upstream body is passed for rewriting.
type Meddle =
    Arc<dyn Fn(usize, &[(String, String)], &[u8]) -> Option<(u16, Vec<u8>)> + Send + Sync>;

fn serve(app: axum::Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
    });
    url
}

impl Recorder {
    fn start() -> Recorder {
        let samples: Arc<Mutex<Vec<Written>>> = Arc::default();
        let kept = samples.clone();
        let app = axum::Router::new().route(
            "/api/v1/write",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let request = remote_write::decode(&body).expect("a valid remote-write body");
                    let mut kept = kept.lock().unwrap();
                    for ts in request.timeseries {
                        let labels: Labels = ts
                            .labels
                            .iter()
                            .map(|l| {
                                (
                                    String::from_utf8_lossy(&l.name).into_owned(),
                                    String::from_utf8_lossy(&l.value).into_owned(),
                                )
                            })
                            .collect();
                        for s in &ts.samples {
                            kept.push((labels.clone(), s.timestamp, s.value));
                        }
                    }
                    axum::http::StatusCode::OK
                }
            }),
        );
        Recorder {
            url: format!("{}/api/v1/write", serve(app)),
            samples,
        }
    }

    /// Tick times of the marker series, in arrival order.
    fn ticks(&self) -> Vec<i64> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, _, _)| l["__name__"] == estimate::TICK_TIMESTAMP_SECONDS)
            .map(|(_, t, _)| *t)
            .collect()
    }

    fn snapshot(&self) -> Vec<Written> {
        self.samples.lock().unwrap().clone()
    }
}

impl QueryProxy {
    fn start(upstream: &str) -> QueryProxy {
        QueryProxy::meddling(upstream, Arc::new(|_, _, _| None))
    }

    fn meddling(upstream: &str, meddle: Meddle) -> QueryProxy {
        let requests: Asked = Arc::default();
        let kept = requests.clone();
        let upstream = upstream.to_string();
        let client = reqwest::Client::new();
        let app = axum::Router::new().route(
            "/api/v1/{api}",
            axum::routing::post(
                move |axum::extract::Path(api): axum::extract::Path<String>,
                      body: axum::body::Bytes| {
                    let (kept, upstream, client) = (kept.clone(), upstream.clone(), client.clone());
                    let meddle = meddle.clone();
                    async move {
                        let form: Vec<(String, String)> = reqwest::Url::parse(&format!(
                            "http://x/?{}",
                            String::from_utf8_lossy(&body)
                        ))
                        .unwrap()
                        .query_pairs()
                        .map(|(k, v)| (k.into_owned(), v.into_owned()))
                        .collect();
                        let n = {
                            let mut kept = kept.lock().unwrap();
                            kept.push((api.clone(), form.clone()));
                            kept.len()
                        };
                        let answer = client
                            .post(format!("{upstream}/api/v1/{api}"))
                            .header("Content-Type", "application/x-www-form-urlencoded")
                            .body(body.to_vec())
                            .send()
                            .await
                            .unwrap();
                        let status = answer.status().as_u16();
                        let body = answer.bytes().await.unwrap().to_vec();
                        let (status, body) = meddle(n, &form, &body).unwrap_or((status, body));
                        (axum::http::StatusCode::from_u16(status).unwrap(), body)
                    }
                },
            ),
        );
        QueryProxy {
            url: serve(app),
            requests,
        }
    }

    /// Range queries asked: `(query, start, end, step)`.
    fn range_queries(&self) -> Vec<[String; 4]> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(api, _)| api == "query_range")
            .map(|(_, form)| {
                let get = |k: &str| {
                    form.iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                [get("query"), get("start"), get("end"), get("step")]
            })
            .collect()
    }
}

/// Nodes in the answer of a recorded range query asked again of `base`.
fn nodes_selected(base: &str, [query, start, end, step]: &[String; 4]) -> BTreeSet<String> {
    let body: serde_json::Value = reqwest::blocking::Client::new()
        .post(format!("{base}/api/v1/query_range"))
        .form(&[
            ("query", query),
            ("start", start),
            ("end", end),
            ("step", step),
        ])
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(body["status"], "success", "{body}");
    body["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["metric"]["node"].as_str().map(str::to_string))
        .collect()
}

fn start_estimator(models: &Path, source: &str, receiver: &str, extra: &[&str]) -> Guard {
    start_estimator_on(free_port(), models, source, receiver, extra)
}

fn start_estimator_on(
    port: u16,
    models: &Path,
    source: &str,
    receiver: &str,
    extra: &[&str],
) -> Guard {
    let child = Command::new(workspace_binary("greenpipe-estimator"))
        .arg("serve")
        .arg(format!("--prometheus-url={source}"))
        .arg(format!("--remote-write-url={receiver}"))
        .arg(format!("--models={}", models.display()))
        .args(["--interval=1s", "--rate-window=5s", "--log.level=warn"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .expect("starting the estimator");
    Guard::new("estimator", child)
}

/// Two node names for each of the two shards, chosen with Prometheus' `hashmod`.
fn node_names() -> Vec<String> {
    let mut picked: Vec<String> = Vec::new();
    for shard in 0..2 {
        picked.extend(
            (0..)
                .map(|i| format!("edge-{i}"))
                .filter(|n| hashmod(n, 2) == shard)
                .take(2),
        );
    }
    picked
}

/// A Prometheus scraping `targets` that keeps the series whose `node` hashes to `shard`, labels
/// them `shard="<i>"` (the rule documented in deploy/prometheus) and remote-writes them on.
fn sharded_prometheus(targets: &[String], shard: u32, forward_to: &str) -> Prometheus {
    let targets = targets
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    Prometheus::start_with_config(&format!(
        "global:\n  scrape_interval: 1s\n  external_labels:\n    prometheus: shard-{shard}\n\
         scrape_configs:\n  - job_name: greenpipe-exporter\n    scrape_interval: 1s\n    \
         scrape_timeout: 1s\n    static_configs:\n      - targets: [{targets}]\n    \
         metric_relabel_configs:\n      - source_labels: [node]\n        modulus: 2\n        \
         target_label: shard\n        action: hashmod\n      - source_labels: [shard]\n        \
         regex: \"{shard}\"\n        action: keep\n\
         remote_write:\n  - url: {forward_to}\n    queue_config:\n      \
         batch_send_deadline: 200ms\n"
    ))
    .expect("sharded prometheus")
}

/// Samples of `written` at ticks `range` other than the markers (which carry the shard): power
/// series as they are, energy counters as their increase since the range's first tick (replicas
/// started at different ticks count from different zeros).
fn comparable(written: &[Written], range: (i64, i64)) -> BTreeMap<(Labels, i64), f64> {
    let mut base: BTreeMap<Labels, f64> = BTreeMap::new();
    for (l, t, v) in written {
        if *t == range.0 && l["__name__"].ends_with("_joules_total") {
            base.insert(l.clone(), *v);
        }
    }
    let mut out = BTreeMap::new();
    for (l, t, v) in written {
        if *t < range.0 || *t > range.1 || l["__name__"] == estimate::TICK_TIMESTAMP_SECONDS {
            continue;
        }
        let value = if l["__name__"].ends_with("_joules_total") {
            let Some(b) = base.get(l) else { continue };
            v - b
        } else {
            *v
        };
        if let Some(previous) = out.insert((l.clone(), *t), value) {
            // Sent twice (a retried request): must be the same value.
            assert_eq!(previous, value, "{l:?} at {t} written with two values");
        }
    }
    out
}

fn nodes_of(written: &BTreeMap<(Labels, i64), f64>) -> BTreeSet<String> {
    written.keys().map(|(l, _)| l["node"].clone()).collect()
}

#[test]
fn shard_replicas_read_only_their_nodes_and_together_write_what_one_replica_writes() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(&models, model_json()).unwrap();
    let names = node_names();
    let mut exporters = Vec::new();
    let mut targets = Vec::new();
    for name in &names {
        let port = free_port();
        let child = Command::new(workspace_binary("greenpipe-exporter"))
            .args(["--node-name", name, "--no-collector.ebpf"])
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stderr(Stdio::null())
            .spawn()
            .expect("starting an exporter");
        exporters.push(Guard::new("exporter", child));
        targets.push(format!("127.0.0.1:{port}"));
    }
    // Everything lands in `all` (the single replica's source); `shards[i]` holds shard i only.
    let all = Prometheus::start(&[], "1s").expect("prometheus");
    let shards: Vec<Prometheus> = (0..2)
        .map(|i| sharded_prometheus(&targets, i, &all.remote_write_url()))
        .collect();

    // (name, shard, source, extra flags). A source behind remote write gets a longer delay.
    let plans: Vec<(&str, &str, &str, Vec<&str>)> = vec![
        ("single", "0/1", &all.url, vec!["--delay=6s"]),
        ("by-name 0", "0/2", &all.url, vec!["--delay=6s"]),
        ("by-name 1", "1/2", &all.url, vec!["--delay=6s"]),
        (
            "by-label 0",
            "0/2",
            &all.url,
            vec!["--delay=6s", "--shard.label=shard"],
        ),
        (
            "by-label 1",
            "1/2",
            &all.url,
            vec!["--delay=6s", "--shard.label=shard"],
        ),
        (
            "own prometheus 0",
            "0/2",
            &shards[0].url,
            vec!["--delay=3s"],
        ),
        (
            "own prometheus 1",
            "1/2",
            &shards[1].url,
            vec!["--delay=3s"],
        ),
    ];
    let mut replicas = Vec::new();
    for (name, shard, source, extra) in &plans {
        let proxy = QueryProxy::start(source);
        let recorder = Recorder::start();
        let mut flags = vec![format!("--shard={shard}")];
        flags.extend(extra.iter().map(|s| s.to_string()));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let guard = start_estimator(&models, &proxy.url, &recorder.url, &flags);
        replicas.push((*name, proxy, recorder, guard));
    }

    // Enough ticks everywhere, and enough of them after the single replica had estimated every
    // node: the range compared below is common to all replicas, so it must reach past that time.
    // (Replicas can tick many times before the exporters' second scrapes give every node a rate;
    // counting ticks alone once let the range end before three of four nodes were estimated.)
    wait_for(Duration::from_secs(120), || {
        let single = replicas[0].2.snapshot();
        let mut first_estimate: BTreeMap<&str, i64> = BTreeMap::new();
        for (l, t, _) in single
            .iter()
            .filter(|(l, _, _)| l["__name__"] == estimate::NODE_POWER_WATTS)
        {
            let first = first_estimate.entry(l["node"].as_str()).or_insert(*t);
            *first = (*first).min(*t);
        }
        if first_estimate.len() < names.len() {
            return None;
        }
        let every_node_since = *first_estimate.values().max()?;
        replicas
            .iter()
            .all(|(_, _, r, _)| {
                let ticks = r.ticks();
                ticks.len() >= 15 && ticks.iter().filter(|t| **t >= every_node_since).count() >= 8
            })
            .then_some(())
    })
    .unwrap_or_else(|| {
        let ticks: Vec<(&str, usize)> = replicas
            .iter()
            .map(|(n, _, r, _)| (*n, r.ticks().len()))
            .collect();
        panic!("ticks per replica: {ticks:?}")
    });
    let snapshots: Vec<Vec<Written>> = replicas.iter().map(|(_, _, r, _)| r.snapshot()).collect();
    for (_, _, _, guard) in &mut replicas {
        guard.terminate();
    }

    // The common tick range, leaving out each replica's first tick (it may have started half-way
    // through the scrapes it needs) and the last (maybe not fully received).
    let range = snapshots.iter().fold((i64::MIN, i64::MAX), |(lo, hi), s| {
        let ticks: Vec<i64> = s
            .iter()
            .filter(|(l, _, _)| l["__name__"] == estimate::TICK_TIMESTAMP_SECONDS)
            .map(|(_, t, _)| *t)
            .collect();
        let first = ticks.iter().min().unwrap() + 1000;
        let last = ticks.iter().max().unwrap() - 1000;
        (lo.max(first), hi.min(last))
    });
    assert!(
        range.1 - range.0 >= 5000,
        "at least 6 common ticks: {range:?}"
    );
    let single = comparable(&snapshots[0], range);
    assert_eq!(nodes_of(&single), names.iter().cloned().collect());
    for pair in [1, 3, 5] {
        let (a, b) = (
            comparable(&snapshots[pair], range),
            comparable(&snapshots[pair + 1], range),
        );
        let (nodes_a, nodes_b) = (nodes_of(&a), nodes_of(&b));
        let name = plans[pair].0;
        assert!(
            nodes_a.is_disjoint(&nodes_b) && !nodes_a.is_empty() && !nodes_b.is_empty(),
            "{name}: nodes {nodes_a:?} and {nodes_b:?}"
        );
        for node in &nodes_a {
            assert_eq!(hashmod(node, 2), 0, "{name}: {node} belongs to shard 1");
        }
        let mut together = a.clone();
        together.extend(b.clone());
        assert_eq!(together.len(), a.len() + b.len(), "{name}: no series twice");
        let missing: Vec<_> = single
            .keys()
            .filter(|k| !together.contains_key(*k))
            .collect();
        let extra: Vec<_> = together
            .keys()
            .filter(|k| !single.contains_key(*k))
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: {} missing, e.g. {:?}; {} extra, e.g. {:?}",
            missing.len(),
            missing.first(),
            extra.len(),
            extra.first()
        );
        for (key, v) in &single {
            let w = together[key];
            assert!(
                (v - w).abs() <= 1e-9 * v.abs().max(1.0),
                "{name}: {key:?} single {v}, pair {w}"
            );
        }
        // What each replica asked for: every feature query, asked again of the server that
        // holds the whole fleet, selects only nodes of its own shard.
        for (replica, own) in [(pair, &nodes_a), (pair + 1, &nodes_b)] {
            // A replica catching up reads several ticks per query, so the count of queries
            // varies with the machine's load; what may not vary is whose nodes they select.
            let queries = replicas[replica].1.range_queries();
            let mut read = BTreeSet::new();
            for q in &queries {
                let selected = nodes_selected(&all.url, q);
                assert!(
                    selected.is_subset(own),
                    "{}: query selects {selected:?}, owns {own:?}: {}",
                    plans[replica].0,
                    q[0]
                );
                read.extend(selected);
            }
            assert_eq!(
                &read,
                own,
                "{}: nodes read by its {} range queries",
                plans[replica].0,
                queries.len()
            );
        }
    }
    drop(exporters);
}

/// Sum of an estimator self metric's series whose labels contain `labels`.
fn self_metric(port: u16, name: &str, labels: &str) -> f64 {
    reqwest::blocking::get(format!("http://127.0.0.1:{port}/metrics"))
        .and_then(|r| r.text())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `body` with `field` added as the first member of its top-level object.
fn with_field(body: &[u8], field: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    format!("{{{field},{}", text.strip_prefix('{').unwrap_or(&text)).into_bytes()
}

#[test]
fn query_engine_limits_warnings_and_partial_answers_are_handled_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(&models, model_json()).unwrap();
    let port = free_port();
    let exporter = Command::new(workspace_binary("greenpipe-exporter"))
        .args(["--node-name", "engine-node", "--no-collector.ebpf"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stderr(Stdio::null())
        .spawn()
        .expect("starting an exporter");
    let _exporter = Guard::new("exporter", exporter);
    let prom = Prometheus::start(&[format!("127.0.0.1:{port}")], "1s").expect("prometheus");
    // In front of the real Prometheus, answers as Thanos/Mimir give them: a range of more than
    // 5 ticks exceeds the sample limit (422), every 5th answer carries a warning, every 7th is
    // flagged partial.
    let meddle: Meddle = Arc::new(|n, form, body| {
        let get = |k: &str| {
            form.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<f64>().ok())
        };
        if let (Some(start), Some(end), Some(step)) = (get("start"), get("end"), get("step")) {
            if ((end - start) / step).round() as i64 + 1 > 5 {
                return Some((
                    422,
                    br#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#.to_vec(),
                ));
            }
        }
        if n % 7 == 0 {
            return Some((200, with_field(body, r#""isPartial":true"#)));
        }
        if n % 5 == 0 {
            return Some((
                200,
                with_field(body, r#""warnings":["store 10.0.0.3:10901 is slow"]"#),
            ));
        }
        None
    });
    let proxy = QueryProxy::meddling(&prom.url, meddle);
    let metrics_port = free_port();
    let flags = [
        "--delay=2s",
        "--prometheus.engine=thanos",
        &format!("--progress-url={}", prom.url),
    ];
    let start = || {
        start_estimator_on(
            metrics_port,
            &models,
            &proxy.url,
            &prom.remote_write_url(),
            &flags,
        )
    };
    let ticks = || {
        greenpipe_tests::raw_samples(
            &prom.url,
            &format!("{}{{node=\"engine-node\"}}", estimate::NODE_POWER_WATTS),
            "10m",
        )
        .ok()
        .and_then(|s| s.first().map(|s| s.samples.clone()))
        .unwrap_or_default()
    };
    let mut est = start();
    wait_for(Duration::from_secs(90), || {
        (ticks().len() >= 5).then_some(())
    })
    .expect("first ticks through the proxy");
    // Down for 20 s: the catch-up asks for 20+ ticks at once and is refused until it asks for
    // at most 5.
    est.terminate();
    std::thread::sleep(Duration::from_secs(20));
    let restarted = greenpipe_tests::now_ms();
    let est = start();
    wait_for(Duration::from_secs(90), || {
        (ticks().last()?.0 >= restarted).then_some(())
    })
    .expect("the restarted estimator catches up in small chunks");
    let times: Vec<i64> = ticks().iter().map(|s| s.0).collect();
    for w in times.windows(2) {
        assert_eq!(w[1] - w[0], 1000, "gap or duplicate at {}", w[1]);
    }
    assert!(times.len() >= 25, "{} ticks", times.len());
    let m = |name: &str, labels: &str| self_metric(metrics_port, name, labels);
    use greenpipe_common::names::estimator as n;
    let ranges: Vec<f64> = proxy
        .range_queries()
        .iter()
        .filter_map(|[_, start, end, step]| {
            Some(
                (end.parse::<f64>().ok()? - start.parse::<f64>().ok()?)
                    / step.parse::<f64>().ok()?
                    + 1.0,
            )
        })
        .collect();
    assert!(
        ranges.iter().any(|r| *r > 5.0),
        "the catch-up asked for more than 5 ticks at once: {ranges:?}"
    );
    assert!(
        m(n::QUERIES_TOTAL, "outcome=\"http_422\"") > 0.0,
        "422 counted: {}",
        reqwest::blocking::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
            .and_then(|r| r.text())
            .unwrap_or_default()
    );
    assert!(
        m(n::QUERIES_TOTAL, "outcome=\"partial\"") > 0.0,
        "partial counted"
    );
    assert!(m(n::QUERY_WARNINGS_TOTAL, "") > 0.0, "warnings counted");
    assert!(m(n::TICKS_BACKFILLED_TOTAL, "") >= 15.0);
    // Thanos is asked not to answer partially; every request gives the engine a deadline.
    let asked = proxy.requests.lock().unwrap().clone();
    assert!(asked.iter().all(|(_, form)| form
        .iter()
        .any(|(k, v)| k == "partial_response" && v == "false")
        && form.iter().any(|(k, _)| k == "timeout")));
    drop(est);
}
