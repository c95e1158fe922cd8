//! Edge push (`--push.remote-write-url`): the exporter pushes its own samples to a real
//! Prometheus (`--web.enable-remote-write-receiver`) through a slow link the test cuts
//! ([`Link`]). After a cut of 300 ticks, shorter than `--push.buffer.max-age`, every sample is
//! stored, once (at 100 ms ticks, so that the cut takes 30 s, not the 5 minutes it takes at the
//! default 1 s); past max-age the loss is counted and later samples still arrive; a restart
//! resends the buffer; the estimator reads pushed series as it reads scraped ones.
//!
//! The series checked is `greenpipe_exporter_collections_total`: it counts the exporter's ticks,
//! so its stored values must be 1, 2, 3, … without a hole, each at its own timestamp.

use std::path::Path;
use std::time::{Duration, Instant};

use greenpipe_common::names::{estimate, exporter};
use greenpipe_tests::link::Link;
use greenpipe_tests::models::{cpu_linear_model, file_json};
use greenpipe_tests::{
    free_port, query_api, raw_samples, self_metric, spawn_exporter, wait_for, workspace_binary,
    Guard, Prometheus, StoredSeries,
};

/// A link with 25 ms each way per chunk: a slow uplink, not a loopback.
const LATENCY: Duration = Duration::from_millis(25);

struct Pusher {
    guard: Guard,
    metrics: String,
    buffer: tempfile::TempDir,
}

/// An exporter for `node` sampling every `interval` and pushing each tick to `url` (a
/// receiver's write URL), with `extra` flags; its log goes to `log`.
fn start_pusher(node: &str, interval: &str, url: &str, extra: &[&str], log: &Path) -> Pusher {
    start_pusher_in(
        tempfile::tempdir().unwrap(),
        node,
        interval,
        url,
        extra,
        log,
    )
}

/// [`start_pusher`] with its buffer under `buffer` (an earlier exporter's, after a restart).
fn start_pusher_in(
    buffer: tempfile::TempDir,
    node: &str,
    interval: &str,
    url: &str,
    extra: &[&str],
    log: &Path,
) -> Pusher {
    let port = free_port();
    let dir = buffer.path().join("push");
    let mut args = vec![
        "--collection.interval",
        interval,
        "--push.remote-write-url",
        url,
        "--push.buffer.dir",
        dir.to_str().unwrap(),
        "--push.max-backoff",
        "2s",
        "--push.timeout",
        "5s",
    ];
    args.extend_from_slice(extra);
    Pusher {
        guard: spawn_exporter(node, port, &args, Some(log)),
        metrics: format!("http://127.0.0.1:{port}/metrics"),
        buffer,
    }
}

impl Pusher {
    fn metric(&self, name: &str, labels: &str) -> f64 {
        self_metric(&self.metrics, name, labels)
    }

    /// The exporter's ticks so far (the value its next pushed sample of `collections_total`
    /// will exceed).
    fn ticks(&self) -> f64 {
        self.metric(exporter::COLLECTIONS_TOTAL, "")
    }

    /// Waits until the exporter has ticked `n` times more than `from`.
    fn wait_ticks(&self, from: f64, n: f64, timeout: Duration) {
        wait_for(timeout, || (self.ticks() >= from + n).then_some(()))
            .unwrap_or_else(|| panic!("{n} ticks after tick {from} within {timeout:?}"));
    }
}

/// How long the link stays cut: a wall-clock time (the buffer's max-age is one), or a number
/// of the exporter's ticks, whatever time they take on a loaded machine.
#[derive(Clone, Copy)]
enum Cut {
    Time(Duration),
    Ticks(f64),
}

/// A cut and what it covered.
struct CutOutcome {
    stored: StoredSeries,
    /// Wall-clock start and end of the cut (ms).
    start_ms: i64,
    end_ms: i64,
    /// The exporter's ticks when the link was cut and when it came back.
    first_tick: f64,
    last_tick: f64,
}

fn upstream(prom: &Prometheus) -> std::net::SocketAddr {
    prom.url
        .trim_start_matches("http://")
        .parse()
        .expect("Prometheus listens on an IP address")
}

/// The one stored `collections_total` series of `node`.
fn cycles(prom: &Prometheus, node: &str) -> StoredSeries {
    let mut series = raw_samples(
        &prom.url,
        &format!("{}{{node=\"{node}\"}}", exporter::COLLECTIONS_TOTAL),
        "30m",
    )
    .expect("querying Prometheus");
    assert_eq!(series.len(), 1, "one series of {node}: {series:?}");
    series.remove(0)
}

/// Waits until the exporter's buffer is empty and what it sent is stored up to `after_ms`.
fn wait_drained(prom: &Prometheus, pusher: &Pusher, node: &str, after_ms: i64, timeout: Duration) {
    wait_for(timeout, || {
        let empty = pusher.metric(exporter::PUSH_BUFFER_SEGMENTS, "") == 0.0;
        let stored = cycles_if_any(prom, node)?;
        (empty && stored.samples.last()?.0 > after_ms).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "the buffer drains within {timeout:?} (segments {}, bytes {})",
            pusher.metric(exporter::PUSH_BUFFER_SEGMENTS, ""),
            pusher.metric(exporter::PUSH_BUFFER_BYTES, "")
        )
    });
}

fn cycles_if_any(prom: &Prometheus, node: &str) -> Option<StoredSeries> {
    raw_samples(
        &prom.url,
        &format!("{}{{node=\"{node}\"}}", exporter::COLLECTIONS_TOTAL),
        "30m",
    )
    .ok()?
    .into_iter()
    .next()
}

fn now_ms() -> i64 {
    greenpipe_tests::now_ms()
}

/// Largest step between stored timestamps, and the values missing from 1, 2, 3, ….
fn gaps(samples: &[(i64, f64)]) -> (i64, Vec<u64>) {
    let mut widest = 0;
    let mut missing = Vec::new();
    for pair in samples.windows(2) {
        let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
        assert!(t1 > t0, "timestamps strictly increase: {t0} then {t1}");
        assert!(
            v1 > v0,
            "no duplicate or reordered sample: {v0} at {t0}, {v1} at {t1}"
        );
        widest = widest.max(t1 - t0);
        missing.extend((v0 as u64 + 1)..(v1 as u64));
    }
    (widest, missing)
}

/// Lets the exporter push 10 ticks, cuts the link for `cut`, restores it and waits until the
/// buffer has drained.
fn cut_and_restore(
    prom: &Prometheus,
    link: &Link,
    pusher: &Pusher,
    node: &str,
    cut: Cut,
) -> CutOutcome {
    wait_for(Duration::from_secs(60), || cycles_if_any(prom, node))
        .expect("pushed samples reach Prometheus");
    pusher.wait_ticks(0.0, 10.0, Duration::from_secs(60));
    let cut_start = now_ms();
    link.cut();
    let first_tick = pusher.ticks();
    let started = Instant::now();
    // Mid-cut the exporter knows the receiver is gone and keeps samples on disk.
    match cut {
        Cut::Time(cut) => std::thread::sleep(cut.min(Duration::from_secs(15))),
        Cut::Ticks(n) => pusher.wait_ticks(first_tick, n / 2.0, Duration::from_secs(300)),
    }
    assert_eq!(pusher.metric(exporter::PUSH_RECEIVER_UP, ""), 0.0);
    assert!(pusher.metric(exporter::PUSH_BUFFER_BYTES, "") > 0.0);
    assert!(pusher.metric(exporter::PUSH_FAILURES_TOTAL, "") >= 1.0);
    match cut {
        Cut::Time(cut) => std::thread::sleep(cut.saturating_sub(started.elapsed())),
        Cut::Ticks(n) => pusher.wait_ticks(first_tick, n, Duration::from_secs(600)),
    }
    let cut_end = now_ms();
    let last_tick = pusher.ticks();
    let buffered = pusher.metric(exporter::PUSH_BUFFER_BYTES, "");
    let oldest = pusher.metric(exporter::PUSH_OLDEST_UNSENT_TIMESTAMP_SECONDS, "");
    eprintln!(
        "cut {:.0} s: buffer {buffered} bytes, oldest unsent {:.1} s old, {} connections dropped",
        (cut_end - cut_start) as f64 / 1000.0,
        cut_end as f64 / 1000.0 - oldest,
        link.refused()
    );
    assert!(
        link.refused() > 0,
        "the exporter kept trying through the cut"
    );
    link.restore();
    let restored = Instant::now();
    wait_drained(
        prom,
        pusher,
        node,
        cut_end + 5_000,
        Duration::from_secs(240),
    );
    eprintln!(
        "drained {:.1} s after the link came back",
        restored.elapsed().as_secs_f64()
    );
    assert_eq!(pusher.metric(exporter::PUSH_RECEIVER_UP, ""), 1.0);
    CutOutcome {
        stored: cycles(prom, node),
        start_ms: cut_start,
        end_ms: cut_end,
        first_tick,
        last_tick,
    }
}

/// A receiving Prometheus, a slow link to it and an exporter for `node` ticking every
/// `interval` and pushing through the link with `extra` flags (its log in the returned
/// directory).
fn behind_a_link(
    node: &str,
    interval: &str,
    extra: &[&str],
) -> (Prometheus, Link, Pusher, tempfile::TempDir) {
    let prom = Prometheus::start(&[], "1s").expect("prometheus");
    let link = Link::start(upstream(&prom), LATENCY).expect("link");
    let logs = tempfile::tempdir().unwrap();
    let pusher = start_pusher(
        node,
        interval,
        &format!("{}/api/v1/write", link.url()),
        extra,
        &logs.path().join("exporter.log"),
    );
    (prom, link, pusher, logs)
}

/// 300 ticks cut: five minutes at the default 1 s interval, here 30 s at the shortest interval
/// the exporter takes (100 ms), each tick still its own pushed segment.
#[test]
fn every_sample_arrives_after_a_300_tick_cut() {
    let node = "push-cut";
    let (prom, link, pusher, _logs) = behind_a_link(node, "100ms", &[]);
    let cut = cut_and_restore(&prom, &link, &pusher, node, Cut::Ticks(300.0));
    let (stored, cut_start, cut_end) = (cut.stored, cut.start_ms, cut.end_ms);

    let (widest, missing) = gaps(&stored.samples);
    assert!(
        missing.is_empty(),
        "ticks missing from Prometheus: {missing:?}"
    );
    let first = stored.samples[0].1;
    assert_eq!(first, 1.0, "the first tick is stored");
    let during = stored
        .samples
        .iter()
        .filter(|(t, _)| (cut_start..cut_end).contains(t))
        .count();
    eprintln!(
        "{} samples stored, {during} from the cut, widest step {widest} ms",
        stored.samples.len()
    );
    // Every tick of the cut (its ticks counted by the exporter itself) was stored, stamped
    // with a time inside the cut.
    let ticks = cut.last_tick - cut.first_tick;
    assert!(ticks >= 300.0, "{ticks} ticks in the cut");
    assert!(
        during as f64 >= ticks - 2.0,
        "{during} samples stored from a cut of {ticks} ticks ({} ms)",
        cut_end - cut_start
    );
    assert!(widest < 2_000, "a step of {widest} ms between ticks");
    assert_eq!(stored.labels["job"], "greenpipe-exporter");
    assert_eq!(stored.labels["instance"], node);
    for reason in greenpipe_common::contract::reason::PushDropped::VALUES {
        assert_eq!(
            pusher.metric(
                exporter::PUSH_SAMPLES_DROPPED_TOTAL,
                &format!("reason=\"{reason}\"")
            ),
            0.0,
            "nothing dropped ({reason})"
        );
    }
    let text = greenpipe_tests::scrape::fetch(&pusher.metrics).unwrap();
    greenpipe_tests::scrape::promtool_check(&text).expect("promtool check metrics");
}

/// A cut of twice max-age at 500 ms ticks: half the cut's ticks are lost (at 1 s ticks, a 20 s
/// max-age and a 40 s cut the test took 56 s under the test command's load, 2026-12-07).
#[test]
fn past_max_age_the_loss_is_counted_and_later_samples_arrive() {
    let node = "push-max-age";
    let (prom, link, pusher, _logs) =
        behind_a_link(node, "500ms", &["--push.buffer.max-age", "10s"]);
    let cut = cut_and_restore(
        &prom,
        &link,
        &pusher,
        node,
        Cut::Time(Duration::from_secs(20)),
    );
    let (stored, cut_start, cut_end) = (cut.stored, cut.start_ms, cut.end_ms);
    let (_, missing) = gaps(&stored.samples);
    let dropped = pusher.metric(exporter::PUSH_SAMPLES_DROPPED_TOTAL, "reason=\"max_age\"");
    eprintln!(
        "{} ticks lost, {dropped} samples counted dropped",
        missing.len()
    );
    // About (cut − max-age) / interval = 20 ticks lost, every one of them counted.
    assert!((12..=28).contains(&missing.len()), "lost ticks {missing:?}");
    assert!(
        dropped >= missing.len() as f64,
        "{dropped} samples counted for {} lost ticks",
        missing.len()
    );
    // The last max-age of the cut, less 5 s of margin, and everything after it arrived.
    let kept_from = cut_end - 5_000;
    let after: Vec<f64> = stored
        .samples
        .iter()
        .filter(|(t, _)| *t >= kept_from)
        .map(|(_, v)| *v)
        .collect();
    assert!(
        after.windows(2).all(|w| w[1] == w[0] + 1.0),
        "samples from the cut's last 5 s on are all there: {after:?}"
    );
    assert!(
        stored.samples.iter().any(|(t, _)| *t < cut_start),
        "samples from before the cut were kept"
    );
    assert!(
        stored
            .samples
            .iter()
            .any(|(t, _)| (kept_from..cut_end).contains(t)),
        "samples from the cut arrived after it"
    );
}

/// The label sets of the series of `name` for `node`, from `base`.
fn label_sets(base: &str, selector: &str) -> Vec<String> {
    let mut sets: Vec<String> = query_api(base, selector)
        .unwrap_or_default()
        .iter()
        .map(|s| s["metric"].to_string())
        .collect();
    sets.sort();
    sets
}

#[test]
fn pushed_series_are_the_scraped_ones_and_the_estimator_reads_them() {
    let node = "push-like-scrape";
    let receiver = Prometheus::start(&[], "1s").expect("receiving prometheus");
    let logs = tempfile::tempdir().unwrap();
    let port = free_port();
    let buffer = tempfile::tempdir().unwrap();
    let instance = format!("127.0.0.1:{port}");
    let _exporter = spawn_exporter(
        node,
        port,
        &[
            "--collection.interval",
            "1s",
            "--push.remote-write-url",
            &receiver.remote_write_url(),
            "--push.buffer.dir",
            buffer.path().to_str().unwrap(),
            "--push.instance",
            &instance,
        ],
        Some(&logs.path().join("exporter.log")),
    );
    // The same exporter, scraped as the deployed Prometheus scrapes it.
    let scraper =
        Prometheus::start(std::slice::from_ref(&instance), "1s").expect("scraping prometheus");
    let names = |base: &str| {
        let mut n: Vec<String> =
            query_api(base, &format!("count by (__name__) ({{node=\"{node}\"}})"))
                .unwrap_or_default()
                .iter()
                .filter_map(|s| s["metric"]["__name__"].as_str().map(String::from))
                .collect();
        n.sort();
        n
    };
    let scraped = wait_for(Duration::from_secs(60), || {
        let n = names(&scraper.url);
        (!n.is_empty() && names(&receiver.url).len() >= n.len()).then_some(n)
    })
    .expect("both Prometheus servers have the exporter's series");
    let pushed = names(&receiver.url);
    let own: Vec<&String> = pushed.iter().filter(|n| n.contains("_push_")).collect();
    assert!(!own.is_empty(), "the push's own families are pushed too");
    assert_eq!(pushed, scraped, "the same metric names");
    // Label sets, job and instance included, are those of the scraped series.
    for name in [
        "greenpipe_node_cpu_seconds_total",
        "greenpipe_node_memory_bytes",
        "greenpipe_container_cpu_seconds_total",
        exporter::COLLECTIONS_TOTAL,
    ] {
        let selector = format!("{name}{{node=\"{node}\"}}");
        let a = label_sets(&receiver.url, &selector);
        assert!(!a.is_empty(), "{name} pushed");
        assert_eq!(a, label_sets(&scraper.url, &selector), "{name}");
    }

    // The estimator, reading only the pushed series, predicts this node.
    let models = logs.path().join("models.json");
    std::fs::write(&models, file_json(&[cpu_linear_model("push-test")])).unwrap();
    let child = std::process::Command::new(workspace_binary("greenpipe-estimator"))
        .args([
            "serve".to_string(),
            format!("--prometheus-url={}", receiver.url),
            format!("--remote-write-url={}", receiver.remote_write_url()),
            format!("--models={}", models.display()),
            "--interval=1s".into(),
            "--delay=2s".into(),
            "--rate-window=5s".into(),
            format!("--web.listen-address=127.0.0.1:{}", free_port()),
            "--log.level=warn".into(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starting the estimator");
    let _estimator = Guard::new("estimator", child);
    let watts = wait_for(Duration::from_secs(90), || {
        receiver
            .query_scalar(&format!(
                "{}{{node=\"{node}\",model=\"push-test\"}}",
                estimate::NODE_POWER_WATTS
            ))
            .ok()
            .flatten()
    })
    .expect("the estimator predicts the pushing node's power");
    // 3 W idle + 2 W per busy CPU second per second.
    assert!(watts >= 3.0, "{watts} W");
    let containers = receiver
        .query(&format!(
            "{}{{node=\"{node}\",model=\"push-test\"}}",
            estimate::CONTAINER_POWER_WATTS
        ))
        .unwrap();
    assert!(
        !containers.is_empty(),
        "power attributed to the node's containers"
    );
}

/// An exporter stopped during a cut and started again on the same buffer sends what the first
/// one buffered (its last ticks written on shutdown), then its own samples.
#[test]
fn a_restart_during_a_cut_resends_the_buffer() {
    let node = "push-restart";
    let (prom, link, mut pusher, logs) = behind_a_link(node, "1s", &[]);
    wait_for(Duration::from_secs(60), || cycles_if_any(&prom, node))
        .expect("pushed samples reach Prometheus");
    link.cut();
    // Ten ticks buffered (one segment each), not a fixed time of the cut.
    wait_for(Duration::from_secs(60), || {
        (pusher.metric(exporter::PUSH_BUFFER_SEGMENTS, "") >= 10.0).then_some(())
    })
    .unwrap_or_else(|| {
        let buffered = pusher.metric(exporter::PUSH_BUFFER_SEGMENTS, "");
        panic!("{buffered} segments buffered after 60 s of the cut")
    });
    let last_tick = pusher.metric(exporter::COLLECTIONS_TOTAL, "");
    let status = pusher.guard.terminate().expect("the exporter exits");
    assert!(status.success(), "exit on SIGTERM: {status:?}");
    let stopped = now_ms();
    let url = format!("{}/api/v1/write", link.url());
    let pusher = start_pusher_in(
        pusher.buffer,
        node,
        "1s",
        &url,
        &[],
        &logs.path().join("exporter-2.log"),
    );
    std::thread::sleep(Duration::from_secs(5));
    link.restore();
    wait_drained(
        &prom,
        &pusher,
        node,
        stopped + 3_000,
        Duration::from_secs(120),
    );
    let stored = cycles(&prom, node);
    let first_run: Vec<(i64, f64)> = stored
        .samples
        .iter()
        .copied()
        .filter(|(t, _)| *t < stopped)
        .collect();
    let (_, missing) = gaps(&first_run);
    assert!(
        missing.is_empty(),
        "ticks of the first run missing: {missing:?}"
    );
    let last = first_run.last().expect("the first run's samples").1;
    assert!(
        last >= last_tick,
        "the first run's ticks up to its shutdown are stored: last {last}, seen {last_tick}"
    );
    assert_eq!(first_run[0].1, 1.0, "from its first tick");
    // The second run's counter starts again at 1, after the first run's samples.
    let second: Vec<f64> = stored
        .samples
        .iter()
        .filter(|(t, _)| *t > stopped)
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        second.first(),
        Some(&1.0),
        "the second run's ticks follow: {second:?}"
    );
    assert!(second.windows(2).all(|w| w[1] == w[0] + 1.0), "{second:?}");
    assert_eq!(
        pusher.metric(exporter::PUSH_SAMPLES_DROPPED_TOTAL, ""),
        0.0,
        "nothing dropped"
    );
}
