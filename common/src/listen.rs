//! The listen-address syntax of every GreenPipe server flag (`--web.listen-address`,
//! `--grpc.listen-address`, ...), exporter-toolkit style.

use std::net::{SocketAddr, ToSocketAddrs};

/// A listen address that does not name one socket address.
#[derive(Debug, thiserror::Error)]
pub enum ListenAddressError {
    /// Not `host:port` or the host does not resolve.
    #[error("{flag} {text:?}: {source}")]
    Invalid {
        /// The flag it was given to.
        flag: &'static str,
        /// What was given.
        text: String,
        /// Why it does not parse or resolve.
        source: std::io::Error,
    },
    /// The host resolved to no address.
    #[error("{flag} {text:?} resolves to nothing")]
    Nothing {
        /// The flag it was given to.
        flag: &'static str,
        /// What was given.
        text: String,
    },
}

/// `--web.listen-address`: see [`parse_flag_address`].
pub fn parse_listen_address(text: &str) -> Result<SocketAddr, ListenAddressError> {
    parse_flag_address("--web.listen-address", text)
}

/// Accepts `:9910` (all interfaces), `host:port` and `[v6]:port`; errors name `flag`.
pub fn parse_flag_address(
    flag: &'static str,
    text: &str,
) -> Result<SocketAddr, ListenAddressError> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    full.to_socket_addrs()
        .map_err(|source| ListenAddressError::Invalid {
            flag,
            text: text.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| ListenAddressError::Nothing {
            flag,
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
        let e = parse_flag_address("--grpc.listen-address", "nohost")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--grpc.listen-address \"nohost\""), "{e}");
    }
}
