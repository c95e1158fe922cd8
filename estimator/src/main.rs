//! Run with `cargo run -p greenpipe-estimator -- --help`.
//!
//! One binary for the online estimator and the offline pipeline (dataset, train, validate,
//! crossval); each subcommand owns its arguments.

mod offline;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "greenpipe-estimator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Extract one metered workload run from Prometheus into a trace CSV.
    Dataset(offline::cli::DatasetCli),
    /// Select a model per node by grouped cross-validation and write the model file.
    Train(offline::cli::TrainCli),
    /// Score a model file on traces it never saw.
    Validate(offline::cli::ValidateCli),
    /// Leave-one-workload-out for every candidate and baseline, with nested selection.
    Crossval(offline::cli::CrossvalCli),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dataset(args) => offline::dataset::run(args),
        Command::Train(args) => args.run(),
        Command::Validate(args) => args.run(),
        Command::Crossval(args) => args.run(),
    };
    if let Err(e) = result {
        eprintln!("greenpipe-estimator: {e:#}");
        std::process::exit(1);
    }
}
