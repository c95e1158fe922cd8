//! Run with `cargo run -p greenpipe-exporter -- --web.listen-address :9910`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use greenpipe_common::contract;
use greenpipe_exporter::config::{Command, Config, ConfigError};
use greenpipe_exporter::push::Push;
use greenpipe_exporter::sampler::{Published, Sampler};
use greenpipe_exporter::{board, http, meter, selfstat};
use tracing::info;

fn main() {
    if let Err(err) = run() {
        eprintln!("greenpipe-exporter: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let config = match Config::from_args() {
        Ok(config) => config,
        // --help and --version go to stdout with status 0, usage errors to stderr with 2.
        Err(ConfigError::Args(e)) => e.exit(),
        Err(e) => return Err(e.into()),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&config.log_level).context("--log.level")?,
        )
        .with_writer(std::io::stderr)
        .init();
    match config.command {
        None => serve(config),
        Some(Command::Meters) => {
            print!(
                "{}",
                meter::report(&config.paths, config.meter.timeout, &config.meter.specs)
            );
            Ok(())
        }
        Some(Command::Board) => {
            // The line for people, then the series the exporter exports, for selectors.
            let detection = board::detect_host(&config.paths)?;
            let labels = detection.labels().map(|(k, v)| format!("{k}=\"{v}\""));
            println!("{detection}");
            println!(
                "{}{{{}}} 1",
                contract::node::BOARD_INFO.name,
                labels.join(",")
            );
            Ok(())
        }
    }
}

fn serve(config: Config) -> anyhow::Result<()> {
    let listen = config.listen;
    let path = config.telemetry_path.clone();
    // Read before anything starts: a bad web config or certificate is a start-up error.
    let web = greenpipe_web::load(config.web_config_file.as_deref())?;
    info!(node = %config.node_name, collectors = ?config.collectors, interval = ?config.interval, "starting");
    let mut sampler = Sampler::new(config)?;
    // Building the collectors (the eBPF load above all) is the footprint's peak; what it freed
    // leaves the resident set here.
    selfstat::release_freed_heap();
    // Scrapes copy a published buffer and the push's sender mostly waits: the main thread runs
    // both (the server's block_on below drives the sender task too), with no worker thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let push = match &sampler.config().push {
        Some(push) => {
            let started = Push::start(push, &sampler.config().node_name, runtime.handle())?;
            info!(url = %push.endpoint.url, buffer = %push.buffer.dir.display(), job = %push.job,
                instance = %push.instance, "pushing samples by remote write");
            sampler.push_to(started.handle());
            Some(started)
        }
        None => None,
    };
    let shared = Arc::new(RwLock::new(Published::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler_thread = {
        let shared = shared.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || sampler.run(shared, || stop.load(Ordering::Relaxed)))?
    };
    runtime.block_on(async {
        let mut stop = greenpipe_common::shutdown::Shutdown::install()?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        info!(address = %listener.local_addr()?, %path, "serving metrics");
        let shutdown = async move {
            let signal = stop.recv().await;
            info!(signal, "shutting down");
        };
        greenpipe_web::serve(listener, http::app(shared, &path), web, shutdown).await?;
        anyhow::Ok(())
    })?;
    stop.store(true, Ordering::Relaxed);
    sampler_thread.thread().unpark();
    let _ = sampler_thread.join();
    if let Some(push) = push {
        // The last ticks go to disk; the next start sends them.
        push.finish();
    }
    info!("stopped");
    Ok(())
}
