//! What each subcommand does: build the work, open the run window, do the work while
//! `/metrics` counts it, close the window (complete or cut short by SIGTERM) into the campaign
//! log.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use greenpipe_common::listen::parse_flag_address;
use greenpipe_common::names::workload;

use crate::cli::{
    BenchArgs, ClassifyArgs, Cli, ClientArgs, Command, Common, InferArgs, PeerArgs, ServeArgs,
};
use greenpipe_workload::bench::{self, Group};
use greenpipe_workload::campaign::{unix_now, CampaignLog, Placement, Window};
use greenpipe_workload::images::ImageSet;
use greenpipe_workload::metrics::{self, InferenceLabels, Metrics};
use greenpipe_workload::model::{Arch, Engine, Libraries, ModelSpec, Precision, ENGINES};
use greenpipe_workload::oip::{self, client::Pace};
use greenpipe_workload::stop::Stop;

/// Shared per-process context.
struct Context_ {
    metrics: Arc<Metrics>,
    log: CampaignLog,
    placement: Placement,
    stop: Stop,
}

impl Context_ {
    /// Closes a window: one JSON line on stdout (so `kubectl logs` is a campaign log too) and
    /// one in `--campaign-log`.
    fn record(&self, window: Window) -> anyhow::Result<()> {
        println!("{}", serde_json::to_string(&window)?);
        Ok(self.log.append(&window)?)
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::List => {
            list();
            return Ok(());
        }
        // One computation, nothing to count: no /metrics, no run window.
        Command::Classify(a) => return classify(a),
        _ => {}
    }
    let ctx = context(&cli.common).await?;
    match cli.command {
        Command::Infer(a) => infer(&ctx, a).await,
        Command::Serve(a) => serve(&ctx, a).await,
        Command::Client(a) => client(&ctx, a).await,
        Command::Bench(a) => bench_group(&ctx, a).await,
        Command::Peer(a) => peer(&ctx, a).await,
        Command::List | Command::Classify(_) => unreachable!("handled above"),
    }
}

async fn context(common: &Common) -> anyhow::Result<Context_> {
    let log = CampaignLog::new(common.campaign_log.clone());
    log.check()?;
    let metrics = Arc::new(Metrics::new());
    let addr = parse_flag_address("--web.listen-address", &common.web_listen_address)?;
    let bound = metrics::serve(metrics.clone(), addr).await?;
    tracing::info!(address = %bound, "serving /metrics");
    Ok(Context_ {
        metrics,
        log,
        placement: Placement::detect(common.node.as_deref()),
        stop: Stop::install()?,
    })
}

fn list() {
    println!("models:");
    for a in Arch::ALL {
        println!("  {a} ({})", Precision::ALL.map(|p| p.name()).join(", "));
    }
    println!("engines:");
    for e in ENGINES {
        let precisions: Vec<_> = e.precisions().iter().map(|p| p.name()).collect();
        println!("  {e} ({})", precisions.join(", "));
    }
    println!("benchmarks:");
    for b in bench::all() {
        println!("  {:<18} {:<9} {}", b.name, b.group.name(), b.unit);
    }
}

/// Builds the one configuration, runs it on one image, prints one JSON line.
fn classify(args: ClassifyArgs) -> anyhow::Result<()> {
    let spec = args.model.spec()?;
    if spec.batch != 1 {
        bail!("classify takes --batch 1 (one image)");
    }
    let images = images_for(&args.model.images)?;
    if args.image >= images.len() {
        bail!(
            "--image {} is past the set's {} images",
            args.image,
            images.len()
        );
    }
    let calibration = images.batch(0, 1, spec.image_size)?;
    let engine = Engine::build_with(&spec, &calibration, &args.model.libraries())?;
    let input = images.batch(args.image, 1, spec.image_size)?;
    let logits = engine.infer(&input)?;
    let mut ranked: Vec<(usize, f32)> = logits.iter().copied().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(args.top);
    let mut line = model_config(&spec, "local");
    line["host_arch"] = std::env::consts::ARCH.into();
    line["image"] = images.images[args.image].0.clone().into();
    line["top"] = ranked
        .iter()
        .map(|&(class, logit)| serde_json::json!({ "class": class, "logit": logit }))
        .collect();
    if args.logits {
        line["logits"] = logits.into();
    }
    println!("{line}");
    Ok(())
}

fn images_for(dir: &Option<std::path::PathBuf>) -> anyhow::Result<ImageSet> {
    match dir {
        Some(d) => Ok(ImageSet::from_dir(d)?),
        None => Ok(ImageSet::generated(8)),
    }
}

fn labels(workload: &'static str, spec: &ModelSpec, mode: &'static str) -> InferenceLabels {
    InferenceLabels {
        workload,
        model: spec.arch.name().into(),
        precision: spec.precision.name().into(),
        engine: spec.engine.name(),
        threads: spec.threads.to_string(),
        mode,
    }
}

fn model_config(spec: &ModelSpec, mode: &str) -> serde_json::Value {
    serde_json::json!({
        "model": spec.arch.name(),
        "precision": spec.precision.name(),
        "engine": spec.engine.name(),
        "threads": spec.threads,
        "batch": spec.batch,
        "mode": mode,
        "image_size": spec.image_size,
        "seed": spec.seed,
    })
}

async fn build_engine(
    spec: ModelSpec,
    images: &ImageSet,
    libraries: Libraries,
) -> anyhow::Result<Arc<Engine>> {
    let calibration = images.batch(0, spec.batch, spec.image_size)?;
    let started = Instant::now();
    let s = spec.clone();
    let engine =
        tokio::task::spawn_blocking(move || Engine::build_with(&s, &calibration, &libraries))
            .await
            .context("model build task")??;
    tracing::info!(
        model = %spec.arch, engine = %spec.engine, precision = %spec.precision, threads = spec.threads,
        batch = spec.batch, seconds = started.elapsed().as_secs_f64(), "model built"
    );
    Ok(Arc::new(engine))
}

async fn infer(ctx: &Context_, args: InferArgs) -> anyhow::Result<()> {
    let specs = args.model.specs()?;
    let images = images_for(&args.model.images)?;
    for (i, spec) in specs.into_iter().enumerate() {
        if i > 0 && !ctx.stop.sleep(args.gap).await {
            break;
        }
        if ctx.stop.is_set() {
            break;
        }
        infer_one(ctx, spec, &images, &args.model.libraries(), args.duration).await?;
    }
    Ok(())
}

async fn infer_one(
    ctx: &Context_,
    spec: ModelSpec,
    images: &ImageSet,
    libraries: &Libraries,
    duration: Duration,
) -> anyhow::Result<()> {
    let engine = build_engine(spec.clone(), images, libraries.clone()).await?;
    let labels = labels("infer", &spec, workload::MODE_LOCAL);
    ctx.metrics.touch_inference(&labels);
    ctx.metrics.set_running("infer", "inference", true);
    let start = unix_now();
    let deadline = Instant::now() + duration;
    let stop = ctx.stop.flag();
    let metrics = ctx.metrics.clone();
    let images = images.clone();
    let s = spec.clone();
    let count = tokio::task::spawn_blocking(move || -> anyhow::Result<u64> {
        let mut n = 0u64;
        let mut next = 0usize;
        while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            // Decoding and preprocessing are part of the pipeline's work, not of the latency.
            let input = images.batch(next, s.batch, s.image_size)?;
            next += s.batch;
            let t = Instant::now();
            engine.infer(&input)?;
            metrics.observe_inference(&labels, s.batch as u64, t.elapsed().as_secs_f64());
            n += s.batch as u64;
        }
        Ok(n)
    })
    .await
    .context("inference task")??;
    let end = unix_now();
    ctx.metrics.set_running("infer", "inference", false);
    ctx.record(Window {
        workload: "infer".into(),
        group: "inference",
        config: model_config(&spec, "local"),
        placement: ctx.placement.clone(),
        start,
        end,
        complete: !ctx.stop.is_set(),
        inferences: count,
        operations: 0,
    })
}

async fn serve(ctx: &Context_, args: ServeArgs) -> anyhow::Result<()> {
    let addr = parse_flag_address("--grpc.listen-address", &args.grpc_listen_address)?;
    let spec = args.model.spec()?;
    let images = images_for(&args.model.images)?;
    let engine = build_engine(spec.clone(), &images, args.model.libraries()).await?;
    let service = oip::server::InferenceService::new(
        engine,
        ctx.metrics.clone(),
        labels("serve", &spec, workload::MODE_SERVED),
        args.instances,
    );
    let inferences = service.inferences.clone();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--grpc.listen-address {addr}"))?;
    tracing::info!(address = %listener.local_addr()?, model = %spec.arch, "serving gRPC (Open Inference Protocol v2)");
    let stop = ctx.stop.clone();
    let duration = args.duration;
    let shutdown = async move {
        if duration.is_zero() {
            stop.wait().await;
        } else {
            stop.sleep(duration).await;
        }
    };
    ctx.metrics.set_running("serve", "inference", true);
    let start = unix_now();
    tonic::transport::Server::builder()
        .add_service(
            oip::pb::grpc_inference_service_server::GrpcInferenceServiceServer::new(service)
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20),
        )
        .serve_with_incoming_shutdown(oip::server::incoming(listener), shutdown)
        .await
        .context("gRPC server")?;
    let end = unix_now();
    ctx.metrics.set_running("serve", "inference", false);
    // Without a planned duration, SIGTERM is the planned end.
    let complete = args.duration.is_zero() || !ctx.stop.is_set();
    let count = inferences.load(Ordering::Relaxed);
    let mut config = model_config(&spec, "served");
    config["grpc_listen_address"] = args.grpc_listen_address.clone().into();
    ctx.record(Window {
        workload: "serve".into(),
        group: "inference",
        config,
        placement: ctx.placement.clone(),
        start,
        end,
        complete,
        inferences: count,
        operations: 0,
    })
}

async fn client(ctx: &Context_, args: ClientArgs) -> anyhow::Result<()> {
    let pace = match (args.concurrency, args.rate) {
        (Some(c), None) if c >= 1 => Pace::Concurrency(c),
        (None, Some(r)) if r > 0.0 && r.is_finite() => Pace::Rate(r),
        (None, None) => bail!("give --concurrency C or --rate R"),
        _ => bail!("--concurrency must be at least 1 and --rate positive"),
    };
    let images = images_for(&args.images)?;
    let config = oip::client::ClientConfig {
        target: args.target.clone(),
        model: args.model.clone(),
        pace,
        duration: args.duration,
        requests: args.requests,
        server_wait: args.server_wait,
    };
    ctx.metrics.set_running("client", "inference", true);
    let totals = oip::client::run(&config, &images, ctx.metrics.clone(), ctx.stop.flag()).await?;
    // The window is the load, not the wait for a server that was still building its model.
    let start = totals.started;
    let end = unix_now();
    ctx.metrics.set_running("client", "inference", false);
    let complete = !ctx.stop.is_set();
    let (concurrency, rate) = match pace {
        Pace::Concurrency(c) => (Some(c), None),
        Pace::Rate(r) => (None, Some(r)),
    };
    ctx.record(Window {
        workload: "client".into(),
        group: "inference",
        config: serde_json::json!({
            "model": args.model, "mode": "served", "target": args.target,
            "concurrency": concurrency, "rate": rate, "errors": totals.errors,
        }),
        placement: ctx.placement.clone(),
        start,
        end,
        complete,
        inferences: totals.images,
        operations: totals.ok,
    })?;
    if totals.ok == 0 && totals.errors > 0 {
        bail!("every request failed ({} errors)", totals.errors);
    }
    Ok(())
}

async fn bench_group(ctx: &Context_, args: BenchArgs) -> anyhow::Result<()> {
    let groups = args
        .group
        .split(',')
        .map(Group::parse)
        .collect::<Result<Vec<_>, _>>()?;
    // In the order the groups were given.
    let all: Vec<_> = groups
        .iter()
        .flat_map(|g| bench::all().into_iter().filter(move |b| b.group == *g))
        .collect();
    for name in &args.only {
        if !all.iter().any(|b| b.name == name) {
            bail!(
                "--only {name:?} is not a benchmark of {} (see `greenpipe-workload list`)",
                args.group
            );
        }
    }
    if args.levels.is_empty() || args.levels.iter().any(|l| !(1..=100).contains(l)) {
        bail!("--levels must be percentages in 1..=100");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = args.threads.unwrap_or(cpus);
    if threads == 0 || threads > 4 * cpus {
        bail!("--threads {threads} is outside 1..={}", 4 * cpus);
    }
    let env = bench::Env {
        threads,
        scratch: args.scratch.clone(),
        peer: args.peer.clone(),
        memory_bytes: args.memory_bytes,
        disk_bytes: args.disk_bytes,
        kernel_max_bytes: args.kernel_max_bytes as u64,
        kernel_set: args.kernel_set,
        seed: greenpipe_workload::model::DEFAULT_SEED,
    };
    let selected: Vec<_> = all
        .into_iter()
        .filter(|b| args.only.is_empty() || args.only.iter().any(|o| o == b.name))
        .collect();
    for (bi, b) in selected.iter().enumerate() {
        for (li, level) in args.levels.iter().enumerate() {
            if ctx.stop.is_set() {
                return Ok(());
            }
            if bi + li > 0 && !ctx.stop.sleep(args.gap).await {
                return Ok(());
            }
            run_bench_step(ctx, &env, b, *level, args.step).await?;
        }
    }
    Ok(())
}

async fn run_bench_step(
    ctx: &Context_,
    env: &bench::Env,
    b: &bench::Benchmark,
    level: u32,
    step: Duration,
) -> anyhow::Result<()> {
    let prepare = b.prepare;
    let e = env.clone();
    let prepared = tokio::task::spawn_blocking(move || prepare(&e))
        .await
        .context("benchmark preparation")?
        .with_context(|| format!("preparing {}", b.name))?;
    let (name, group, unit) = (b.name, b.group.name(), b.unit);
    tracing::info!(benchmark = name, level, "step");
    ctx.metrics.add_operations(name, group, unit, 0);
    ctx.metrics.set_running(name, group, true);
    let start = unix_now();
    let metrics = ctx.metrics.clone();
    let stop = ctx.stop.flag();
    let workers = prepared.workers;
    let result = tokio::task::spawn_blocking(move || {
        bench::run_step(workers, level, step, stop, &|n| {
            metrics.add_operations(name, group, unit, n)
        })
    })
    .await
    .context("benchmark step")?
    .with_context(|| format!("running {name} at {level}%"))?;
    let end = unix_now();
    drop(prepared.guard);
    ctx.metrics.set_running(name, group, false);
    let mut config = serde_json::json!({
        "level": level, "threads": env.threads, "unit": unit, "step_seconds": step.as_secs_f64(),
    });
    if let (Some(c), serde_json::Value::Object(p)) = (config.as_object_mut(), prepared.params) {
        c.extend(p);
    }
    ctx.record(Window {
        workload: name.into(),
        group,
        config,
        placement: ctx.placement.clone(),
        start,
        end,
        complete: result.complete,
        inferences: 0,
        operations: result.operations,
    })
}

async fn peer(ctx: &Context_, args: PeerArgs) -> anyhow::Result<()> {
    let addr = parse_flag_address("--listen-address", &args.listen_address)?;
    let running = greenpipe_workload::peer::spawn(&addr.to_string())?;
    tracing::info!(address = %running.addr, "peer: TCP and UDP echo");
    ctx.stop.wait().await;
    Ok(())
}
