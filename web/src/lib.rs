//! `--web.config.file` for every GreenPipe HTTP server, in Prometheus exporter-toolkit's format
//! and semantics: TLS with rustls (client certificates, versions, suites, curves), basic auth
//! with bcrypt hashes, extra headers, rate limit, and certificates re-read when they change.
//!
//! One crate so the exporter and the estimator's long-running services share one implementation;
//! it depends on nothing else of ours.

pub mod auth;
pub mod config;
pub mod reload;
pub mod server;
pub mod tls;

pub use config::ConfigError;
pub use reload::{LoadError, WebConfig};
pub use server::{guarded, serve, ServeError};
pub use tls::TlsError;

/// Loads the file named by `--web.config.file`, if any (a start-up error names what is wrong).
pub fn load(
    path: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<WebConfig>>, LoadError> {
    path.map(WebConfig::load).transpose()
}
