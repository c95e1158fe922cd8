//! Remote write from the estimator: the protocol lives in `greenpipe-remote-write` (shared with
//! the carbon writer); what is the estimator's own is the sender that retries what may succeed
//! later and counts what it drops, and the metadata remote write 2.0 sends with each series.

pub mod metadata;
mod sender;

pub use greenpipe_remote_write::client::RetryPolicy;
pub use greenpipe_remote_write::*;
pub use sender::{Protocol, SendReport, Sender};
