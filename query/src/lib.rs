//! GreenPipe's one Prometheus HTTP API client and decoder ([`promql`]: the borrowing decoder the
//! estimator's tick loop needs at fleet scale), and the core that turns decoded series into
//! per-node and per-container usage ([`readout`]), splits node power into container shares
//! ([`attribution`]) and splits the fleet between replicas ([`shard`]). The estimator's `serve`,
//! `view` and `recalibrate`, the campaign and the offline `dataset` all read Prometheus through it.

pub mod attribution;
pub mod promql;
pub mod readout;
pub mod shard;

/// The endpoint type is the remote-write client's, shared with the estimator and the exporter's
/// push.
pub use greenpipe_remote_write::client::endpoint;
