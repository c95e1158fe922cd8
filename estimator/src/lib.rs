//! GreenPipe estimator: online power estimation (`serve`) and, in the same binary, the offline
//! pipeline. One module per subcommand; the building blocks below are shared and public so tests
//! and benchmarks can drive them directly.

pub mod attribution;
/// What the estimator's HTTP requests say they come from.
pub const USER_AGENT: &str = concat!("greenpipe-estimator/", env!("CARGO_PKG_VERSION"));

/// The endpoint type is the remote-write client's, shared with the exporter's push.
pub use greenpipe_remote_write::client::endpoint;
pub mod energy;
pub mod estimate;
pub mod http;
pub mod model_registry;
pub mod models;
pub mod otlp;
pub mod promql;
pub mod readout;
pub mod recalibrate;
pub mod remote_write;
pub mod series;
pub mod serve;
pub mod shard;
pub mod telemetry;
pub mod view;

pub(crate) use greenpipe_common::error_chain;
