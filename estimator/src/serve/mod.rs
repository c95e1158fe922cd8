//! `greenpipe-estimator serve`: the online loop. Every tick it reads the fleet's usage through a
//! fixed set of PromQL range queries, predicts each node's power with its model, splits it over
//! containers and writes everything back with remote write.
//!
//! It keeps no state on disk: where it left off is read back from its own output (a marker series
//! written last for every tick), and missed ticks are recomputed from the source data.

mod args;
mod pipeline;

pub use args::{ConfigError, ServeArgs};
pub use pipeline::{align_down, resume_tick, Pipeline, PipelineConfig};

use std::sync::Arc;

use tracing::info;

use crate::telemetry::Telemetry;

/// Why `serve` could not start or stopped on an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The flags or `--config.file`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The Tokio runtime could not start.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    /// A signal handler could not be installed.
    #[error(transparent)]
    Signal(#[from] greenpipe_common::shutdown::SignalError),
    /// `SIGHUP`'s handler could not be installed.
    #[error("installing the SIGHUP handler")]
    Hangup(#[source] std::io::Error),
    /// The model files could not be loaded.
    #[error(transparent)]
    Models(#[from] crate::model_registry::RegistryError),
    /// `--web.listen-address` could not be bound.
    #[error("listening on {address}")]
    Listen {
        /// The address.
        address: std::net::SocketAddr,
        /// The bind error.
        source: std::io::Error,
    },
    /// The self-metrics server failed.
    #[error(transparent)]
    Server(#[from] greenpipe_web::ServeError),
}

/// Runs `serve` until SIGTERM or Ctrl-C.
pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async move {
        let telemetry = Arc::new(Telemetry::new());
        let config = args.into_config()?;
        let mut stop = greenpipe_common::shutdown::Shutdown::install()?;
        let listen = config.listen;
        let pipeline = Pipeline::new(config.pipeline, telemetry.clone())?;
        let listen_error = |source| ServeError::Listen {
            address: listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(listen_error)?;
        let address = listener.local_addr().map_err(listen_error)?;
        info!(%address, "serving self metrics");
        let server = greenpipe_web::serve(
            listener,
            crate::http::app(telemetry),
            config.web,
            std::future::pending(),
        );
        // SIGHUP re-reads the model files (it used to end the process, its default action).
        let reload = pipeline.reload_flag();
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(ServeError::Hangup)?;
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
