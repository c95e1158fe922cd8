//! `greenpipe-backend DIR ENGINE`: starts a storage engine built from source (prometheus3, thanos,
//! mimir; `greenpipe_tests::backends`) with its state in DIR, writes `DIR/pids` (its daemons'
//! process ids) and then `DIR/env` (shell assignments of its URLs and tenant: READ_URL,
//! WRITE_URL, OTLP_URL, TENANT_HEADER, TENANT, ENGINE) once it is ready, and stops it on SIGTERM
//! or SIGINT. For scripts that measure an engine (scripts/scale-bench.sh); the tests start
//! engines in process.

use std::path::PathBuf;

use greenpipe_tests::backends::{Backend, Engine};
use greenpipe_tests::daemon::block_stop_signals;

fn main() {
    if let Err(e) = run() {
        eprintln!("greenpipe-backend: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, engine] = args.as_slice() else {
        anyhow::bail!("usage: greenpipe-backend DIR ENGINE (ENGINE: prometheus3, thanos, mimir)");
    };
    let engine = Engine::parse(engine)?;
    let dir = PathBuf::from(dir);
    // Blocked before anything starts, so a stop signal is always answered by stopping the
    // daemons (the children start with an empty mask: std's spawn resets it).
    let signals = block_stop_signals()?;
    let backend = Backend::start_in(engine, &dir)?;
    let pids: Vec<String> = backend.pids().iter().map(u32::to_string).collect();
    std::fs::write(dir.join("pids"), pids.join("\n") + "\n")?;
    std::fs::write(dir.join("env"), backend.env())?;
    eprintln!(
        "greenpipe-backend: {} up, queries at {}, writes to {}",
        engine.name(),
        backend.read_url,
        backend.write_url
    );
    signals.wait()?;
    drop(backend);
    Ok(())
}
