//! GreenPipe workloads: what the method profiles (micro, combined and kernel benchmarks) and
//! what it validates on (DNN inference, local or served over the Open Inference Protocol v2),
//! each exposing its work on `/metrics` and writing its run windows to a campaign log
//! ([`campaign`], format in docs/workloads.md).

pub mod bench;
pub mod campaign;
pub mod cli;
pub mod commands;
pub mod images;
pub mod metrics;
pub mod model;
pub mod oip;
pub mod peer;
pub mod stop;

/// An error and its sources, `: `-separated, as `anyhow` prints `{:#}`: for texts that end up in
/// a status message, a log line or another error's message rather than at the binary's edge.
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
