//! The contract shared by the GreenPipe exporter, estimator and tests.
//!
//! Everything that two binaries must agree on lives here and only here: metric names and label
//! keys ([`names`]), the canonical feature set of the trace CSV format ([`features`]) and the
//! versioned model file ([`model`]). Small helpers that more than one crate needs live here
//! once: [`container_id`] (container and pod from a cgroup path), [`linalg`] (Cholesky),
//! [`listen`] (`--web.listen-address`), [`secret`] (secret files), [`error_chain`], with feature
//! `plots` [`plot_font`], and with feature `shutdown` [`shutdown`] (SIGTERM and SIGINT). The
//! only I/O is reading a secret or font file.
#![deny(missing_docs)]

pub mod container_id;
pub mod contract;
pub mod feature_queries;
pub mod features;
pub mod linalg;
pub mod listen;
pub mod model;
pub mod names;
#[cfg(feature = "plots")]
pub mod plot_font;
#[cfg(feature = "registry")]
pub mod registry;
pub mod secret;
#[cfg(feature = "shutdown")]
pub mod shutdown;
pub mod trace;

/// An error and its sources, `: `-separated, as `anyhow` prints `{:#}`: for texts that end up in
/// a label, a status message, a log line or another error's message rather than at a binary's
/// edge (where anyhow prints the chain itself).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
