//! GreenPipe estimator: online power estimation (`serve`) and, in the same binary, the offline
//! pipeline. One module per subcommand; the building blocks below are shared and public so tests
//! and benchmarks can drive them directly.

/// What the estimator's HTTP requests say they come from.
pub const USER_AGENT: &str = concat!("greenpipe-estimator/", env!("CARGO_PKG_VERSION"));

/// The query client and the readout/attribution core live in `greenpipe-query`, shared with the
/// campaign and the offline pipeline; their paths here are kept for the estimator's own modules.
pub use greenpipe_query::{attribution, promql, readout, shard};
/// The endpoint type is the remote-write client's, shared with the exporter's push.
pub use greenpipe_remote_write::client::endpoint;
pub mod energy;
pub mod estimate;
pub mod http;
pub mod model_registry;
pub mod models;
pub mod otlp;
pub mod recalibrate;
pub mod remote_write;
pub mod series;
pub mod serve;
pub mod telemetry;
pub mod view;

pub(crate) use greenpipe_common::error_chain;
