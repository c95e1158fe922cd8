//! Latency (p50, p95) and throughput of every model × engine × precision × thread count, local (the
//! engine called directly) and served (a tonic server and client of the Open Inference
//! Protocol on loopback, one request in flight), printed as a Markdown table.
//!
//! Run with `cargo bench -p greenpipe-workload --bench inference` (release build). Each
//! configuration runs for `GREENPIPE_BENCH_SECONDS` (default 6) after one warm-up call, and
//! at least 3 calls. `GREENPIPE_BENCH_MODELS`, `..._ENGINES`, `..._PRECISIONS`, `..._THREADS`
//! restrict the grid (comma-separated); a precision an engine does not compute is left out.
//! The C++ engines' libraries come from `GREENPIPE_ONNXRUNTIME_LIB` and `GREENPIPE_LITERT_LIB`
//! (`scripts/setup.sh` links them into `.venv/engines/`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenpipe_workload::images::ImageSet;
use greenpipe_workload::metrics::{InferenceLabels, Metrics};
use greenpipe_workload::model::{Arch, Engine, ModelSpec, Precision, DEFAULT_SEED, ENGINES};
use greenpipe_workload::oip::pb::grpc_inference_service_client::GrpcInferenceServiceClient;
use greenpipe_workload::oip::pb::grpc_inference_service_server::GrpcInferenceServiceServer;
use greenpipe_workload::oip::pb::model_infer_request::InferInputTensor;
use greenpipe_workload::oip::pb::ModelInferRequest;
use greenpipe_workload::oip::server::InferenceService;

fn list<T: std::str::FromStr>(var: &str, all: Vec<T>) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v.split(',').map(|s| s.parse().expect(var)).collect(),
        _ => all,
    }
}

struct Stats {
    p50: f64,
    p95: f64,
    throughput: f64,
    calls: usize,
}

fn stats(mut lat: Vec<f64>, wall: f64, images_per_call: usize) -> Stats {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    Stats {
        p50: q(0.5),
        p95: q(0.95),
        throughput: (lat.len() * images_per_call) as f64 / wall,
        calls: lat.len(),
    }
}

fn run_for(seconds: f64, mut call: impl FnMut()) -> (Vec<f64>, f64) {
    call();
    let start = Instant::now();
    let mut lat = Vec::new();
    while start.elapsed().as_secs_f64() < seconds || lat.len() < 3 {
        let t = Instant::now();
        call();
        lat.push(t.elapsed().as_secs_f64());
    }
    (lat, start.elapsed().as_secs_f64())
}

fn main() {
    let seconds: f64 = std::env::var("GREENPIPE_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6.0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let models = list("GREENPIPE_BENCH_MODELS", Arch::ALL.to_vec());
    let engines = list("GREENPIPE_BENCH_ENGINES", ENGINES.to_vec());
    let precisions = list("GREENPIPE_BENCH_PRECISIONS", Precision::ALL.to_vec());
    let threads = list("GREENPIPE_BENCH_THREADS", (1..=cpus).collect());
    let images = ImageSet::generated(8);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| model | engine | precision | threads | mode | p50 ms | p95 ms | inferences/s | calls |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &arch in &models {
        for &engine in &engines {
            for &precision in &precisions {
                if !engine.precisions().contains(&precision) {
                    continue;
                }
                for &t in &threads {
                    let spec = ModelSpec {
                        arch,
                        precision,
                        engine,
                        threads: t,
                        batch: 1,
                        image_size: 224,
                        seed: DEFAULT_SEED,
                    };
                    let input = images.batch(0, 1, 224).unwrap();
                    let engine = Arc::new(Engine::build(&spec, &input).unwrap());
                    let (lat, wall) = run_for(seconds, || {
                        engine.infer(&input).unwrap();
                    });
                    let s = stats(lat, wall, 1);
                    row(&spec, "local", &s);
                    let s = rt.block_on(served(engine.clone(), &input, seconds));
                    row(&spec, "served", &s);
                }
            }
        }
    }
}

fn row(spec: &ModelSpec, mode: &str, s: &Stats) {
    println!(
        "| {} | {} | {} | {} | {mode} | {:.1} | {:.1} | {:.2} | {} |",
        spec.arch,
        spec.engine,
        spec.precision,
        spec.threads,
        s.p50 * 1e3,
        s.p95 * 1e3,
        s.throughput,
        s.calls
    );
}

async fn served(engine: Arc<Engine>, input: &[f32], seconds: f64) -> Stats {
    let spec = engine.spec().clone();
    let labels = InferenceLabels {
        workload: "serve",
        model: spec.arch.name().into(),
        precision: spec.precision.name().into(),
        engine: spec.engine.name(),
        threads: spec.threads.to_string(),
        mode: "served",
    };
    let service = InferenceService::new(engine, Arc::new(Metrics::new()), labels, 1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(GrpcInferenceServiceServer::new(service))
            .serve_with_incoming_shutdown(
                greenpipe_workload::oip::server::incoming(listener),
                async {
                    let _ = rx.await;
                },
            )
            .await
            .unwrap();
    });
    let mut client = GrpcInferenceServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let raw: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let shape: Vec<i64> = spec.input_shape().iter().map(|d| *d as i64).collect();
    let request = ModelInferRequest {
        model_name: spec.arch.name().into(),
        inputs: vec![InferInputTensor {
            name: "input".into(),
            datatype: "FP32".into(),
            shape,
            ..Default::default()
        }],
        raw_input_contents: vec![raw],
        ..Default::default()
    };
    client.model_infer(request.clone()).await.unwrap();
    let start = Instant::now();
    let mut lat = Vec::new();
    while start.elapsed().as_secs_f64() < seconds || lat.len() < 3 {
        let t = Instant::now();
        client.model_infer(request.clone()).await.unwrap();
        lat.push(t.elapsed().as_secs_f64());
    }
    let wall = start.elapsed().as_secs_f64();
    let _ = tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    stats(lat, wall, 1)
}
