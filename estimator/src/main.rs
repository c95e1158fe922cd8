//! Run with `cargo run -p greenpipe-estimator -- --help`.

fn main() {
    eprintln!("greenpipe-estimator: no subcommand implemented yet");
    std::process::exit(2);
}
