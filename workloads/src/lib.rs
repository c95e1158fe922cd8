//! GreenPipe workloads: what the method profiles (micro, combined and kernel benchmarks) and
//! what it validates on (DNN inference, local or served over the Open Inference Protocol v2),
//! each exposing its work on `/metrics` and writing its run windows to a campaign log
//! ([`campaign`], format in docs/workloads.md).

pub mod bench;
pub mod campaign;
pub mod images;
pub mod metrics;
pub mod model;
pub mod oip;
pub mod peer;
pub mod stop;

pub(crate) use greenpipe_common::error_chain;
