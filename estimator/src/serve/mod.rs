//! `greenpipe-estimator serve`: the online loop. Every tick it reads the fleet's usage through a
//! fixed set of PromQL range queries, predicts each node's power with its model, splits it over
//! containers and writes everything back with remote write.
//!
//! It keeps no state on disk: where it left off is read back from its own output (a marker series
//! written last for every tick), and missed ticks are recomputed from the source data.

mod args;
mod pipeline;

pub use args::ServeArgs;
pub use pipeline::{align_down, resume_tick, Pipeline, PipelineConfig};

use std::sync::Arc;

use anyhow::Context;
use tracing::info;

use crate::telemetry::Telemetry;

/// Runs `serve` until SIGTERM or Ctrl-C.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let telemetry = Arc::new(Telemetry::new());
        let config = args.into_config()?;
        let mut stop = greenpipe_common::shutdown::Shutdown::install()?;
        let listen = config.listen;
        let pipeline = Pipeline::new(config.pipeline, telemetry.clone())?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        info!(address = %listener.local_addr()?, "serving self metrics");
        let server = greenpipe_web::serve(
            listener,
            crate::http::app(telemetry),
            config.web,
            std::future::pending(),
        );
        // SIGHUP re-reads the model files (it used to end the process, its default action).
        let reload = pipeline.reload_flag();
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("installing the SIGHUP handler")?;
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                info!("SIGHUP: model files are read again at the next tick boundary");
                reload.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
        tokio::select! {
            r = server => r?,
            never = pipeline.run() => match never {},
            signal = stop.recv() => info!(signal, "shutting down"),
        }
        Ok(())
    })
}
