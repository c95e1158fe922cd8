//! GreenPipe estimator: online power estimation (`serve`) and, in the same binary, the offline
//! pipeline. One module per subcommand; the building blocks below are shared and public so tests
//! and benchmarks can drive them directly.

pub mod attribution;
pub mod campaign;
pub mod endpoint;
pub mod energy;
pub mod estimate;
pub mod http;
pub mod model_registry;
pub mod models;
pub mod offline;
pub mod promql;
pub mod readout;
pub mod recalibrate;
pub mod remote_write;
pub mod serve;
pub mod shard;
pub mod telemetry;
pub mod view;

/// An error and its sources, `: `-separated, as `anyhow` prints `{:#}`: for texts that end up in
/// a label, a log line or another error's message rather than at the binary's edge.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
