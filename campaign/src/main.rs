//! Run with `cargo run -p greenpipe-campaign -- --help`.
//!
//! Profiling campaigns: `run` a plan's steps on this node, then dataset, train, validate and
//! report; `report` rebuilds the report of a campaign directory.

mod cli;

use clap::Parser;
use cli::CampaignCommand;

/// GreenPipe profiling campaigns: benchmarks under a meter, then a trained and validated model.
#[derive(Debug, Parser)]
#[command(name = "greenpipe-campaign", version, about)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax, e.g. `info` or `greenpipe_campaign=debug`).
    #[arg(long = "log.level", default_value = "info", global = true)]
    log_level: String,
    #[command(subcommand)]
    command: CampaignCommand,
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level).unwrap_or_else(|e| {
        eprintln!("greenpipe-campaign: --log.level {:?}: {e}", cli.log_level);
        std::process::exit(2);
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Err(err) = cli::run(cli.command) {
        eprintln!("greenpipe-campaign: {err:#}");
        std::process::exit(1);
    }
}
