//! GreenPipe carbon awareness: where and when power burns the least carbon.
//!
//! * [`sources`]: grid carbon intensity from the UK Carbon Intensity API, Electricity Maps,
//!   WattTime v3 and canonical CSV files, gaps kept and reported.
//! * [`forecast`]: seasonal-naive baselines and a direct multi-horizon regression on lagged and
//!   calendar features; [`backtest`] scores them with a rolling origin and writes a report.
//! * [`planner`]: the placement decision as a pure function (zones, forecasts, current node
//!   labels and taints, time) → changes; [`patch`] turns a change into a JSON patch for a Node;
//!   [`controller`] runs it against the API server with `kube`.
//! * [`queries`]: best zone, best start window, low-since.
//! * [`replay`]: hour-by-hour replay of the placement on real intensity data, against
//!   carbon-blind placement and a perfect-knowledge oracle.
//! * [`sink`]: where the intensity metric goes (remote write).
//!
//! The `greenpipe-carbon` binary (`src/main.rs`) exposes all of it through its `cli` module; it is
//! a binary of its own so that the estimator does not link the Kubernetes client.
#![deny(missing_docs)]

pub mod backtest;
pub mod controller;
pub mod forecast;
pub mod patch;
pub mod planner;
pub mod queries;
pub mod replay;
pub mod report;
pub mod secrets;
pub mod series;
pub mod sink;
pub mod sources;
pub mod time;

/// Errors of the library; the binary's `cli` module wraps them with context via `anyhow`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input that does not have the documented shape or values.
    #[error("{0}")]
    Invalid(String),
    /// A provider response that does not parse as its documented JSON.
    #[error("{provider}: response is not the documented JSON: {error}")]
    Json {
        /// Which provider.
        provider: &'static str,
        /// The parse error (with line and column); in the message, so not also a `source`.
        error: serde_json::Error,
    },
    /// A provider answered with a non-success status.
    #[error("{provider}: HTTP {status} from {url}: {body}")]
    Http {
        /// Which provider.
        provider: &'static str,
        /// The status code.
        status: u16,
        /// The URL (without credentials).
        url: String,
        /// The first bytes of the body.
        body: String,
    },
    /// Network-level failure.
    #[error("{provider}: request to {url} failed: {source}")]
    Request {
        /// Which provider.
        provider: &'static str,
        /// The URL.
        url: String,
        /// The transport error. Kept as the `source` although its text is in the message:
        /// reqwest's message leaves out its own cause (refused, timed out), which only the
        /// chain carries.
        source: reqwest::Error,
    },
    /// A secret file that cannot be read or is empty.
    #[error(transparent)]
    Secret(#[from] greenpipe_common::secret::SecretError),
    /// Reading a file.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error; in the message, so not also a `source` (which `{:#}` would print
        /// twice).
        error: std::io::Error,
    },
}
