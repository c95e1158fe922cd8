//! Run with `cargo run -p greenpipe-carbon -- --help`.
//!
//! The carbon tools are their own binary so that the estimator does not link the Kubernetes
//! client (`kube`, `k8s-openapi`) that only the placement controller needs.

mod cli;

use clap::Parser;

/// GreenPipe carbon: grid carbon intensity sources, forecasts, backtests, queries and node placement.
#[derive(Debug, Parser)]
#[command(name = "greenpipe-carbon", version, about)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax, e.g. `info` or `greenpipe_carbon=debug`).
    #[arg(long = "log.level", default_value = "info", global = true)]
    log_level: String,
    #[command(flatten)]
    args: cli::Args,
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level).unwrap_or_else(|e| {
        eprintln!("greenpipe-carbon: --log.level {:?}: {e}", cli.log_level);
        std::process::exit(2);
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Err(err) = cli::run(cli.args) {
        eprintln!("greenpipe-carbon: {err:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command's arguments only when that command is parsed; this checks all of
    /// them (e.g. that the providers' flattened flags do not collide).
    #[test]
    fn every_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
