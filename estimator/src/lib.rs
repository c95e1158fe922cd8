//! GreenPipe estimator: online power estimation (`serve`) and, in the same binary, the offline
//! pipeline. One module per subcommand; the building blocks below are shared and public so tests
//! and benchmarks can drive them directly.

pub mod attribution;
pub mod endpoint;
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
pub mod serve;
pub mod shard;
pub mod telemetry;
pub mod view;

pub(crate) use greenpipe_common::error_chain;
