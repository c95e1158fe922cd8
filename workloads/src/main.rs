//! `greenpipe-workload`: benchmarks and DNN inference for GreenPipe's profiling and validation.
//! Run with `cargo run -p greenpipe-workload -- --help`.

mod cli;
mod commands;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.common.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("greenpipe-workload: starting the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("greenpipe-workload: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
