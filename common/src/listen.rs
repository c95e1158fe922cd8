//! The `--web.listen-address` syntax of the exporter and the estimator (exporter-toolkit style).

use std::net::{SocketAddr, ToSocketAddrs};

/// A `--web.listen-address` that does not name one socket address.
#[derive(Debug, thiserror::Error)]
pub enum ListenAddressError {
    /// Not `host:port` or the host does not resolve.
    #[error("--web.listen-address {text:?}: {source}")]
    Invalid {
        /// What was given.
        text: String,
        /// Why it does not parse or resolve.
        source: std::io::Error,
    },
    /// The host resolved to no address.
    #[error("--web.listen-address {text:?} resolves to nothing")]
    Nothing {
        /// What was given.
        text: String,
    },
}

/// Accepts `:9910` (all interfaces), `host:port` and `[v6]:port`.
pub fn parse_listen_address(text: &str) -> Result<SocketAddr, ListenAddressError> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    full.to_socket_addrs()
        .map_err(|source| ListenAddressError::Invalid {
            text: text.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| ListenAddressError::Nothing {
            text: text.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_only_means_every_interface() {
        assert_eq!(
            parse_listen_address(":9910").unwrap(),
            "0.0.0.0:9910".parse().unwrap()
        );
        assert_eq!(
            parse_listen_address("[::1]:80").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        let e = parse_listen_address("nonsense").unwrap_err().to_string();
        assert!(e.starts_with("--web.listen-address \"nonsense\""), "{e}");
    }
}
