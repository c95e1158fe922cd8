//! Run with `cargo run -p greenpipe-estimator -- --help`.
//!
//! One variant and one module per subcommand, so subcommands are added without touching the
//! others.

use clap::{Parser, Subcommand};
use greenpipe_estimator::serve;

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
    Serve(serve::ServeArgs),
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
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
    };
    if let Err(err) = result {
        eprintln!("greenpipe-estimator: {err:#}");
        std::process::exit(1);
    }
}
