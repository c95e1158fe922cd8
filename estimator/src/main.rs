//! Run with `cargo run -p greenpipe-estimator -- --help`.

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "greenpipe-estimator", version, about = "GreenPipe estimator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Grid carbon intensity: sources, forecasts, backtests, queries and node placement.
    Carbon(greenpipe_carbon::cli::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Carbon(args) => greenpipe_carbon::cli::run(args),
    };
    if let Err(e) = result {
        eprintln!("greenpipe-estimator: {e:#}");
        std::process::exit(1);
    }
}
