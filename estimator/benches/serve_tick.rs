//! Run with `cargo bench -p greenpipe-estimator --bench serve_tick`.
//!
//! CPU cost of one `serve` tick for a simulated fleet (default 1,000 nodes x 100 containers):
//! decode the PromQL answers → assemble → predict → attribute → energy counters → series laid out
//! straight into protobuf request bodies, each compressed (snappy) as it fills. Prometheus' own
//! time and the network are excluded: the answers are built
//! in memory in the exact JSON shape Prometheus returns. Also the remote-write encoding
//! throughput in samples per second. Prints figures; asserts nothing about time.
//!
//! `GREENPIPE_BENCH_NODES` and `GREENPIPE_BENCH_CONTAINERS` change the fleet size,
//! `GREENPIPE_BENCH_TICKS` the ticks per range query (`serve --read.ticks-per-query`: one read,
//! and one write of series with a sample per tick); figures are per tick either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use greenpipe_common::features::Feature;
use greenpipe_common::model::ModelFile;
use greenpipe_estimator::energy::Ledger;
use greenpipe_estimator::estimate::{estimate_tick, Policy};
use greenpipe_estimator::promql::decode_matrix;
use greenpipe_estimator::readout::{assemble, Assembly, PROCESSES};
use greenpipe_estimator::remote_write::wire::encode_request;
use greenpipe_estimator::remote_write::{
    batches, decode, encode, sample_count, BatchLimits, BatchWriter, EncodedBatch, Label, Sample,
};
use greenpipe_estimator::series::{tick_series, ticks_series, write_tick, write_ticks};
use greenpipe_estimator::shard::Shard;

const T_MS: i64 = 1_790_000_000_000;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A matrix answer with `ticks` points per series (1 s apart), as Prometheus writes it.
fn answer(ticks: usize, series: impl Iterator<Item = (String, f64)>) -> String {
    let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for (i, (labels, value)) in series.enumerate() {
        if i > 0 {
            body.push(',');
        }
        let _ = write!(body, r#"{{"metric":{{{labels}}},"values":["#);
        for t in 0..ticks {
            if t > 0 {
                body.push(',');
            }
            let _ = write!(body, r#"[{}.000,"{value}"]"#, T_MS / 1000 + t as i64);
        }
        body.push_str("]}");
    }
    body.push_str("]}}");
    body
}

fn container_id(node: usize, c: usize) -> String {
    format!(
        "{:016x}{:048x}",
        node * 1000 + c,
        (node * 7919 + c * 104729) as u128
    )
}

/// Untimed: the bodies are those of the series built, batched, encoded and compressed one by one
/// (the path before BatchWriter), byte for byte; and they hold exactly the samples of the ticks
/// laid out one at a time (the layout of one tick per request).
fn check_bodies(
    estimates: &[greenpipe_estimator::estimate::TickEstimates<'_>],
    energy: &[greenpipe_estimator::energy::TickEnergy],
    bodies: &[EncodedBatch],
    raw_bytes: &mut usize,
) {
    let series = batches(ticks_series(estimates, energy), BatchLimits::default());
    *raw_bytes = series.iter().map(|b| encode_request(b).len()).sum();
    let reference: Vec<EncodedBatch> = series
        .into_iter()
        .map(|b| EncodedBatch {
            samples: sample_count(&b),
            body: encode(b),
        })
        .collect();
    assert!(
        reference == bodies,
        "written bodies differ from the reference"
    );
    type ByLabels = BTreeMap<Vec<Label>, Vec<Sample>>;
    let mut one_by_one = ByLabels::new();
    for (e, j) in estimates.iter().zip(energy) {
        for ts in tick_series(e, j) {
            one_by_one.entry(ts.labels).or_default().extend(ts.samples);
        }
    }
    let mut written = ByLabels::new();
    for b in bodies {
        for ts in decode(&b.body).expect("bodies decode").timeseries {
            written.entry(ts.labels).or_default().extend(ts.samples);
        }
    }
    assert!(
        one_by_one == written,
        "written samples differ from the ticks laid out one by one"
    );
    println!(
        "bodies identical to ticks_series + batches + encode, and to {} tick(s) laid out one by one: yes",
        estimates.len()
    );
}

fn main() {
    let nodes = env_usize("GREENPIPE_BENCH_NODES", 1000);
    let containers = env_usize("GREENPIPE_BENCH_CONTAINERS", 100);
    let rounds = env_usize("GREENPIPE_BENCH_ROUNDS", 5);
    // Ticks per range query (serve's --read.ticks-per-query).
    let ticks_per_query = env_usize("GREENPIPE_BENCH_TICKS", 1);
    let models = ModelFile::from_json(include_str!("../models/default.json")).expect("bundled");
    let features = [Feature::CpuSecondsPerSecond];
    println!(
        "fleet: {nodes} nodes x {containers} containers (+ system), model {:?}, features {:?}",
        models.models[0].name,
        features.iter().map(|f| f.column()).collect::<Vec<_>>()
    );

    let node_body = answer(
        ticks_per_query,
        (0..nodes).flat_map(|n| {
            features.iter().map(move |f| {
                (
                    format!(r#""node":"node-{n:04}","feature":"{}""#, f.column()),
                    1.0 + (n % 3) as f64,
                )
            })
        }),
    );
    let container_body = answer(ticks_per_query, (0..nodes).flat_map(|n| {
        (0..=containers).flat_map(move |c| {
            let id = if c == containers {
                "system".to_string()
            } else {
                container_id(n, c)
            };
            let pod = format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                n,
                c,
                7,
                8,
                n * 100 + c
            );
            let tags: Vec<&str> = features.iter().map(|f| f.column()).chain([PROCESSES]).collect();
            tags.into_iter().map(move |tag| {
                (
                    format!(
                        r#""node":"node-{n:04}","container_id":"{id}","pod_uid":"{pod}","feature":"{tag}""#
                    ),
                    if tag == PROCESSES { 3.0 } else { 0.01 * (c % 7) as f64 },
                )
            })
        })
    }));
    println!(
        "PromQL answers: node {:.1} MB, container {:.1} MB",
        node_body.len() as f64 / 1e6,
        container_body.len() as f64 / 1e6
    );

    let mut stages: Vec<[Duration; 5]> = Vec::new();
    // The energy counters as in a running estimator: one tick already recorded.
    let mut ledger = Ledger::new(3_600_000);
    let mut samples = 0;
    let mut raw_bytes = 0;
    let mut wire_bytes = 0;
    for round in 0..rounds {
        let mut stage = [Duration::ZERO; 5];
        let t0 = thread_cpu();
        // As serve reads: the node answer decoded, the container answer decoded straight into
        // the per-node accumulators.
        let node = decode_matrix(node_body.as_bytes()).expect("node answer");
        let mut assembly = Assembly::new(T_MS, 1000, ticks_per_query, Shard::ALL);
        for s in &node {
            assembly.node_series(s);
        }
        assembly
            .containers_from(container_body.as_bytes())
            .expect("container answer");
        let t1 = thread_cpu();
        // As serve does with --read.ticks-per-query N: one read, N ticks assembled from it, each
        // estimated and counted, then all N written in one set of requests.
        assembly.node_labels(&[]);
        let ticks = assembly.ticks();
        let t2 = thread_cpu();
        stage[0] += t1 - t0;
        stage[1] += t2 - t1;
        let mut estimates = Vec::with_capacity(ticks.len());
        let mut energy = Vec::with_capacity(ticks.len());
        for tick in &ticks {
            let t2 = thread_cpu();
            let e = estimate_tick(&models, tick, Policy::default());
            assert_eq!(e.nodes.len(), nodes, "every node estimated");
            let t3 = thread_cpu();
            energy.push(ledger.record(&e, 1000));
            let t4 = thread_cpu();
            estimates.push(e);
            stage[2] += t3 - t2;
            stage[3] += t4 - t3;
        }
        // The ticks of one read are written together, as serve does.
        let t4 = thread_cpu();
        let mut writer = BatchWriter::compressing(BatchLimits::default());
        write_ticks(&estimates, &energy, &mut writer);
        let bodies = writer.finish();
        stage[4] += thread_cpu() - t4;
        samples = bodies.iter().map(|b| b.samples).sum::<usize>() / ticks_per_query;
        wire_bytes = bodies.iter().map(|b| b.body.len()).sum::<usize>() / ticks_per_query;
        if round == 0 {
            check_bodies(&estimates, &energy, &bodies, &mut raw_bytes);
            raw_bytes /= ticks_per_query;
        }
        // Per tick.
        stages.push(stage.map(|d| d / ticks_per_query as u32));
    }
    let median = |i: usize| {
        let mut v: Vec<Duration> = stages.iter().map(|s| s[i]).collect();
        v.sort();
        v[v.len() / 2]
    };
    let names = [
        "decode JSON",
        "assemble",
        "predict+attribute",
        "energy counters",
        "layout+pb+snappy",
    ];
    // The best round is what the code costs with the least interference from other work on the
    // machine; the median is what a loaded machine gives.
    let best = |i: usize| {
        stages
            .iter()
            .map(|s| s[i])
            .min()
            .expect("one round at least")
    };
    let mut total = Duration::ZERO;
    let mut best_total = Duration::ZERO;
    println!(
        "CPU time per tick (median of {rounds} (best), one thread, {ticks_per_query} tick(s) per query):"
    );
    for (i, name) in names.iter().enumerate() {
        let d = median(i);
        total += d;
        best_total += best(i);
        println!(
            "  {name:<18} {:>8.1} ms ({:>6.1})",
            d.as_secs_f64() * 1e3,
            best(i).as_secs_f64() * 1e3
        );
    }
    let best_round = stages
        .iter()
        .map(|s| s.iter().sum::<Duration>())
        .min()
        .expect("one round at least");
    let estimates = nodes * (containers + 1);
    println!(
        "  {:<18} {:>8.1} ms  ({estimates} container estimates, {:.0} k/s; target <= 100 ms)",
        "total",
        total.as_secs_f64() * 1e3,
        estimates as f64 / total.as_secs_f64() / 1e3
    );
    println!(
        "  per container-tick {:>8.2} us (target <= 1 us); best round {:.2} us, sum of best stages {:.2} us",
        total.as_secs_f64() * 1e6 / estimates as f64,
        best_round.as_secs_f64() * 1e6 / estimates as f64,
        best_total.as_secs_f64() * 1e6 / estimates as f64
    );
    println!(
        "remote write: {samples} samples per tick, {:.1} MB protobuf, {:.1} MB on the wire (snappy), per tick",
        raw_bytes as f64 / 1e6,
        wire_bytes as f64 / 1e6
    );

    // Encoding throughput alone: layout + batch + protobuf + snappy of the tick's samples.
    let ticks = {
        let node = decode_matrix(node_body.as_bytes()).unwrap();
        let container = decode_matrix(container_body.as_bytes()).unwrap();
        assemble(
            T_MS,
            1000,
            ticks_per_query,
            &node,
            &container,
            &[],
            Shard::ALL,
        )
    };
    let estimates = estimate_tick(&models, &ticks[0], Policy::default());
    let energy = ledger.record(&estimates, 1000);
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let t0 = thread_cpu();
        let mut writer = BatchWriter::compressing(BatchLimits::default());
        write_tick(&estimates, &energy, &mut writer);
        std::hint::black_box(writer.finish());
        best = best.min(thread_cpu() - t0);
    }
    println!(
        "remote-write encoding (layout + batch + protobuf + snappy): {:.2} M samples/s",
        samples as f64 / best.as_secs_f64() / 1e6
    );
}
