//! Run with `cargo run -p greenpipe-estimator -- --help`.
//!
//! One binary for the online estimator and the offline pipeline (dataset, train, validate,
//! crossval; profiling campaigns are `greenpipe-campaign`); one variant and one module per subcommand, each owning its arguments.

mod offline_cli;

use clap::{Parser, Subcommand};
use greenpipe_estimator::{serve, view};

/// GreenPipe estimator: per-node power models, container attribution, remote write.
#[derive(Debug, Parser)]
#[command(name = "greenpipe-estimator", version, about)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax, e.g. `info` or `greenpipe_estimator=debug`).
    #[arg(long = "log.level", default_value = "info", global = true)]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Estimate node and container power online and remote-write it.
    Serve(Box<serve::ServeArgs>),
    /// Extract one metered workload run from Prometheus into a trace CSV.
    Dataset(offline_cli::DatasetCli),
    /// Select a model per node by grouped cross-validation and write the model file.
    Train(offline_cli::TrainCli),
    /// Score a model file on traces it never saw.
    Validate(offline_cli::ValidateCli),
    /// Watch live error against meters; refit drifted models and write new versions.
    Recalibrate(Box<greenpipe_estimator::recalibrate::RecalibrateArgs>),
    /// Leave-one-workload-out for every candidate and baseline, with nested selection.
    Crossval(offline_cli::CrossvalCli),
    /// Live view of predicted node and container power (the quick start's screen).
    View(view::ViewArgs),
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level).unwrap_or_else(|e| {
        eprintln!("greenpipe-estimator: --log.level {:?}: {e}", cli.log_level);
        std::process::exit(2);
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let result: anyhow::Result<()> = match cli.command {
        Command::Serve(args) => serve::run(*args).map_err(Into::into),
        Command::Dataset(args) => greenpipe_offline::dataset::run(args).map_err(Into::into),
        Command::Train(args) => args.run(),
        Command::Validate(args) => args.run(),
        Command::Crossval(args) => args.run(),
        Command::View(args) => view::run(args).map_err(Into::into),
        Command::Recalibrate(args) => {
            greenpipe_estimator::recalibrate::run(*args).map_err(Into::into)
        }
    };
    if let Err(err) = result {
        eprintln!("greenpipe-estimator: {err:#}");
        std::process::exit(1);
    }
}
