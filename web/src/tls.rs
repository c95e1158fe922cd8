//! `tls_server_config` → a rustls `ServerConfig`, with exporter-toolkit's checks and messages.
//!
//! Where rustls cannot do what Go's crypto/tls does (TLS 1.0/1.1, CBC suites, P-521) the file is
//! refused with a message naming the value, except `min_version: TLS10/TLS11`, which only means
//! "TLS 1.2 and up" here because rustls has nothing older.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tracing::warn;

use crate::config::{resolve, TlsServerConfig};

/// A `tls_server_config` that cannot become a TLS configuration; each names the key, file or
/// value at fault, in exporter-toolkit's words where it has them.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Both the inline value and the file of one item.
    #[error("tls_server_config: cannot specify both {what} and {what}_file")]
    Both {
        /// `cert`, `key` or `client_ca`.
        what: &'static str,
    },
    /// A certificate, key or CA file that cannot be read.
    #[error("failed to read {what}_file ({})", path.display())]
    ReadFile {
        /// `cert`, `key` or `client_ca`.
        what: &'static str,
        /// The file, resolved against the web config's directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TLS is on but the certificate or the key is not given.
    #[error("tls_server_config: missing one of {what} or {what}_file")]
    Missing {
        /// `cert` or `key`.
        what: &'static str,
    },
    /// The certificate is not PEM.
    #[error("{name}: not a PEM certificate: {error}")]
    NotPemCertificate {
        /// `cert` or `cert_file "<path>"`.
        name: String,
        /// The PEM parser's message.
        error: rustls_pki_types::pem::Error,
    },
    /// The certificate text holds no certificate.
    #[error("{name}: no PEM certificate in it")]
    NoCertificate {
        /// `cert` or `cert_file "<path>"`.
        name: String,
    },
    /// The key is not a PEM private key.
    #[error("{name}: not a PEM private key: {error}")]
    NotPemKey {
        /// `key` or `key_file "<path>"`.
        name: String,
        /// The PEM parser's message.
        error: rustls_pki_types::pem::Error,
    },
    /// Certificate and key do not belong together (or rustls refuses them).
    #[error("{cert} and {key} do not make a key pair")]
    KeyPair {
        /// `cert` or `cert_file "<path>"`.
        cert: String,
        /// `key` or `key_file "<path>"`.
        key: String,
        /// rustls' reason.
        source: rustls::Error,
    },
    /// `min_version` / `max_version` is not one of `TLS10` … `TLS13`.
    #[error("tls_server_config.{key}: unknown TLS version: {value}")]
    UnknownVersion {
        /// `min_version` or `max_version`.
        key: &'static str,
        /// The value in the file.
        value: String,
    },
    /// `max_version` below TLS 1.2, which rustls does not have.
    #[error("tls_server_config.max_version {value}: TLS 1.0/1.1 are not supported (rustls)")]
    MaxVersionTooOld {
        /// The value in the file.
        value: String,
    },
    /// `min_version` above `max_version`.
    #[error("tls_server_config: min_version is above max_version")]
    VersionOrder,
    /// The versions and suites have nothing in common.
    #[error("tls_server_config: min_version/max_version and cipher_suites leave nothing")]
    NothingLeft(#[source] rustls::Error),
    /// A Go cipher suite rustls does not implement (CBC, static RSA).
    #[error(
        "tls_server_config.cipher_suites: {name} is not offered by this server (rustls has no \
         CBC or static-RSA suites)"
    )]
    SuiteNotOffered {
        /// The suite's Go name.
        name: String,
    },
    /// Not a Go cipher suite name.
    #[error("tls_server_config.cipher_suites: unknown cipher: {name}")]
    UnknownSuite {
        /// The value in the file.
        name: String,
    },
    /// A Go curve rustls does not implement (P-521).
    #[error("tls_server_config.curve_preferences: {name} is not supported (rustls)")]
    CurveNotSupported {
        /// The curve's Go name.
        name: String,
    },
    /// Not a Go curve name.
    #[error("tls_server_config.curve_preferences: unknown curve: {name}")]
    UnknownCurve {
        /// The value in the file.
        name: String,
    },
    /// `client_auth_type` is not one of Go's `ClientAuthType` names.
    #[error("tls_server_config: invalid ClientAuth: {value}")]
    InvalidClientAuth {
        /// The value in the file.
        value: String,
    },
    /// A verifying `client_auth_type` without a CA.
    #[error("client_auth_type {client_auth_type} needs client_ca_file or client_ca")]
    NoClientCa {
        /// The value in the file.
        client_auth_type: String,
    },
    /// A CA bundle with a CA but no policy that uses it (exporter-toolkit's message).
    #[error("client CA's have been configured without a Client Auth Policy")]
    ClientCaWithoutPolicy,
    /// The CA bundle is not PEM.
    #[error("client CA: not PEM: {error}")]
    ClientCaNotPem {
        /// The PEM parser's message.
        error: rustls_pki_types::pem::Error,
    },
    /// A CA certificate webpki does not accept as a trust anchor.
    #[error("client CA certificate refused: {error}")]
    ClientCaRefused {
        /// rustls' reason.
        error: rustls::Error,
    },
    /// The CA bundle holds no certificate.
    #[error("client CA file holds no certificate")]
    ClientCaEmpty,
    /// rustls cannot build the verifier from the CA bundle.
    #[error("client certificate verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// `client_allowed_sans` with a `client_auth_type` that does not require a certificate.
    #[error(
        "client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert or \
         RequireAndVerifyClientCert"
    )]
    SansWithoutRequiredCert,
}

/// A built TLS configuration and the files it was read from (watched for rotation).
pub struct BuiltTls {
    /// The rustls configuration for new connections.
    pub config: Arc<ServerConfig>,
    /// Certificate, key and CA files.
    pub files: Vec<PathBuf>,
}

/// Builds the server configuration; `dir` is the web config file's directory.
pub fn build(c: &TlsServerConfig, dir: &Path, http2: bool) -> Result<BuiltTls, TlsError> {
    let mut files = Vec::new();
    let mut source = |inline: &Option<String>, file: &Option<String>, what: &'static str| {
        read_pem_source(inline, file, what, dir, &mut files)
    };
    let cert_pem =
        source(&c.cert, &c.cert_file, "cert")?.ok_or(TlsError::Missing { what: "cert" })?;
    let key_pem = source(&c.key, &c.key_file, "key")?.ok_or(TlsError::Missing { what: "key" })?;
    let client_ca_pem = source(&c.client_ca, &c.client_ca_file, "client_ca")?;
    let cert_name = name_of(&c.cert_file, "cert");
    let key_name = name_of(&c.key_file, "key");

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem.0)
        .collect::<Result<_, _>>()
        .map_err(|error| TlsError::NotPemCertificate {
            name: cert_name.clone(),
            error,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { name: cert_name });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem.0).map_err(|error| TlsError::NotPemKey {
        name: key_name.clone(),
        error,
    })?;

    let mut provider = ring::default_provider();
    if let Some(names) = &c.cipher_suites {
        provider.cipher_suites = cipher_suites(names, &provider)?;
    }
    if let Some(names) = &c.curve_preferences {
        provider.kx_groups = curves(names)?;
    }
    let provider = Arc::new(provider);
    let versions = versions(c.min_version.as_deref(), c.max_version.as_deref())?;
    let verifier = client_verifier(c, client_ca_pem, provider.clone())?;

    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(TlsError::NothingLeft)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|source| TlsError::KeyPair {
            cert: cert_name,
            key: key_name,
            source,
        })?;
    config.ignore_client_order = c.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(BuiltTls {
        config: Arc::new(config),
        files,
    })
}

struct Pem(Vec<u8>);

fn name_of(file: &Option<String>, key: &str) -> String {
    match file {
        Some(f) if !f.is_empty() => format!("{key}_file {f:?}"),
        _ => key.to_string(),
    }
}

fn read_pem_source(
    inline: &Option<String>,
    file: &Option<String>,
    what: &'static str,
    dir: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Option<Pem>, TlsError> {
    let inline = inline.as_deref().filter(|s| !s.is_empty());
    let file = file.as_deref().filter(|s| !s.is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err(TlsError::Both { what }),
        (Some(text), None) => Ok(Some(Pem(text.as_bytes().to_vec()))),
        (None, Some(path)) => {
            let full = resolve(dir, path);
            let bytes = std::fs::read(&full).map_err(|source| TlsError::ReadFile {
                what,
                path: full.clone(),
                source,
            })?;
            files.push(full);
            Ok(Some(Pem(bytes)))
        }
        (None, None) => Ok(None),
    }
}

fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, TlsError> {
    fn rank(text: &str, key: &'static str) -> Result<u8, TlsError> {
        match text {
            "TLS10" => Ok(10),
            "TLS11" => Ok(11),
            "TLS12" => Ok(12),
            "TLS13" => Ok(13),
            _ => Err(TlsError::UnknownVersion {
                key,
                value: text.to_string(),
            }),
        }
    }
    let lo = rank(min.unwrap_or("TLS12"), "min_version")?;
    let hi = rank(max.unwrap_or("TLS13"), "max_version")?;
    if lo < 12 {
        warn!(
            min_version = min,
            "TLS 1.0 and 1.1 are not offered (rustls); TLS 1.2 is the floor"
        );
    }
    if hi < 12 {
        return Err(TlsError::MaxVersionTooOld {
            value: max.unwrap_or_default().to_string(),
        });
    }
    if lo > hi {
        return Err(TlsError::VersionOrder);
    }
    let mut out = Vec::new();
    if lo <= 12 {
        out.push(&rustls::version::TLS12);
    }
    out.push(&rustls::version::TLS13);
    if hi == 12 {
        out.pop();
    }
    Ok(out)
}

/// TLS 1.2 suites by Go name; every TLS 1.3 suite stays on (Go cannot configure them either).
fn cipher_suites(
    names: &[String],
    provider: &CryptoProvider,
) -> Result<Vec<rustls::SupportedCipherSuite>, TlsError> {
    let all = &provider.cipher_suites;
    let mut chosen: Vec<rustls::SupportedCipherSuite> = all
        .iter()
        .filter(|s| s.version() == &rustls::version::TLS13)
        .copied()
        .collect();
    for name in names {
        let go_alias = match name.as_str() {
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            }
            other => other,
        };
        let found = all
            .iter()
            .find(|s| format!("{:?}", s.suite()) == go_alias)
            .copied();
        match found {
            Some(s) if s.version() == &rustls::version::TLS13 => {}
            Some(s) => {
                if !chosen.contains(&s) {
                    chosen.push(s);
                }
            }
            None if GO_ONLY_SUITES.contains(&go_alias) => {
                return Err(TlsError::SuiteNotOffered { name: name.clone() })
            }
            None => return Err(TlsError::UnknownSuite { name: name.clone() }),
        }
    }
    Ok(chosen)
}

/// Suites Go's `tls.CipherSuites()` lists that rustls does not implement.
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

fn curves(
    names: &[String],
) -> Result<Vec<&'static dyn rustls::crypto::SupportedKxGroup>, TlsError> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "X25519" => Ok(ring::kx_group::X25519),
            "CurveP256" => Ok(ring::kx_group::SECP256R1),
            "CurveP384" => Ok(ring::kx_group::SECP384R1),
            "CurveP521" => Err(TlsError::CurveNotSupported { name: name.clone() }),
            _ => Err(TlsError::UnknownCurve { name: name.clone() }),
        })
        .collect()
}

fn client_verifier(
    c: &TlsServerConfig,
    ca_pem: Option<Pem>,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let kind = c.client_auth_type.as_deref().unwrap_or("");
    let roots = || -> Result<Arc<RootCertStore>, TlsError> {
        let pem = ca_pem.as_ref().ok_or_else(|| TlsError::NoClientCa {
            client_auth_type: kind.to_string(),
        })?;
        let mut store = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem.0) {
            let cert = cert.map_err(|error| TlsError::ClientCaNotPem { error })?;
            store
                .add(cert)
                .map_err(|error| TlsError::ClientCaRefused { error })?;
        }
        if store.is_empty() {
            return Err(TlsError::ClientCaEmpty);
        }
        Ok(Arc::new(store))
    };
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ClientCertVerifier> = match kind {
        "" | "NoClientCert" => {
            if ca_pem.is_some() {
                return Err(TlsError::ClientCaWithoutPolicy);
            }
            WebPkiClientVerifier::no_client_auth()
        }
        "RequestClientCert" => Arc::new(AnyClientCert {
            mandatory: false,
            algorithms,
        }),
        "RequireAnyClientCert" | "RequireClientCert" => Arc::new(AnyClientCert {
            mandatory: true,
            algorithms,
        }),
        "VerifyClientCertIfGiven" => {
            WebPkiClientVerifier::builder_with_provider(roots()?, provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(TlsError::Verifier)?
        }
        "RequireAndVerifyClientCert" => {
            WebPkiClientVerifier::builder_with_provider(roots()?, provider.clone())
                .build()
                .map_err(TlsError::Verifier)?
        }
        other => {
            return Err(TlsError::InvalidClientAuth {
                value: other.to_string(),
            })
        }
    };
    match &c.client_allowed_sans {
        None => Ok(verifier),
        Some(sans) => {
            if !matches!(
                kind,
                "RequireAnyClientCert" | "RequireClientCert" | "RequireAndVerifyClientCert"
            ) {
                return Err(TlsError::SansWithoutRequiredCert);
            }
            Ok(Arc::new(AllowedSans {
                inner: verifier,
                sans: sans.clone(),
            }))
        }
    }
}

/// `RequestClientCert` / `RequireAnyClientCert`: a certificate is asked for and its key proven
/// (the handshake signature is checked) but its chain is not verified, as in Go.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `client_allowed_sans`: after the inner verifier, the leaf must carry one of the SANs exactly
/// (DNS names and URIs compared as strings, IP addresses as addresses). E-mail SANs are not
/// readable through webpki, so an e-mail entry never matches.
#[derive(Debug)]
struct AllowedSans {
    inner: Arc<dyn ClientCertVerifier>,
    sans: Vec<String>,
}

impl AllowedSans {
    fn matches(&self, cert: &CertificateDer<'_>) -> bool {
        let Ok(parsed) = webpki::EndEntityCert::try_from(cert) else {
            return false;
        };
        let dns: Vec<&str> = parsed.valid_dns_names().collect();
        let uris: Vec<&str> = parsed.valid_uri_names().collect();
        self.sans.iter().any(|san| {
            if dns.contains(&san.as_str()) || uris.contains(&san.as_str()) {
                return true;
            }
            match san.parse::<std::net::IpAddr>() {
                Ok(ip) => parsed
                    .verify_is_valid_for_subject_name(&ServerName::IpAddress(ip.into()))
                    .is_ok(),
                Err(_) => false,
            }
        })
    }
}

impl ClientCertVerifier for AllowedSans {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }
    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if self.matches(end_entity) {
            Ok(verified)
        } else {
            Err(rustls::Error::General(
                "could not find allowed SANs in client cert".into(),
            ))
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_map_to_what_rustls_has() {
        assert_eq!(versions(None, None).unwrap().len(), 2);
        assert_eq!(
            versions(Some("TLS13"), None).unwrap(),
            [&rustls::version::TLS13]
        );
        assert_eq!(
            versions(None, Some("TLS12")).unwrap(),
            [&rustls::version::TLS12]
        );
        assert_eq!(versions(Some("TLS10"), None).unwrap().len(), 2);
        assert!(versions(Some("TLS14"), None)
            .unwrap_err()
            .to_string()
            .contains("TLS14"));
        assert!(versions(Some("TLS13"), Some("TLS12")).is_err());
        assert!(versions(None, Some("TLS11")).is_err());
    }

    #[test]
    fn cipher_suites_by_go_name() {
        let p = ring::default_provider();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got = cipher_suites(&names(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]), &p).unwrap();
        assert_eq!(
            got.iter()
                .filter(|s| s.version() == &rustls::version::TLS12)
                .count(),
            1
        );
        assert!(
            cipher_suites(&names(&["TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"]), &p)
                .unwrap_err()
                .to_string()
                .contains("not offered")
        );
        assert!(cipher_suites(&names(&["TLS_MADE_UP"]), &p)
            .unwrap_err()
            .to_string()
            .contains("unknown cipher: TLS_MADE_UP"));
        assert!(cipher_suites(&names(&["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"]), &p).is_ok());
    }

    #[test]
    fn curves_by_go_name() {
        assert_eq!(
            curves(&["X25519".into(), "CurveP256".into()])
                .unwrap()
                .len(),
            2
        );
        assert!(curves(&["CurveP521".into()]).is_err());
        assert!(curves(&["Curve9".into()]).is_err());
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        let e = curves(&["Curve9".into()]).err().unwrap();
        assert!(matches!(&e, TlsError::UnknownCurve { name } if name == "Curve9"));
        assert_eq!(
            e.to_string(),
            "tls_server_config.curve_preferences: unknown curve: Curve9"
        );
        let e = versions(None, Some("TLS11")).unwrap_err();
        assert!(matches!(&e, TlsError::MaxVersionTooOld { value } if value == "TLS11"));
        assert!(e.to_string().contains("max_version TLS11"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let c = TlsServerConfig {
            cert_file: Some("absent.pem".into()),
            key_file: Some("absent.key".into()),
            ..Default::default()
        };
        let e = build(&c, dir.path(), true).err().unwrap();
        assert!(
            matches!(&e, TlsError::ReadFile { what: "cert", path, .. } if path.ends_with("absent.pem")),
            "{e}"
        );
        assert!(e.to_string().contains("absent.pem"), "{e}");
        let c = TlsServerConfig {
            cert: Some("x".into()),
            key: Some("y".into()),
            client_auth_type: Some("Maybe".into()),
            ..Default::default()
        };
        let e = build(&c, dir.path(), true).err().unwrap();
        assert!(matches!(e, TlsError::NoCertificate { .. }), "{e}");
    }
}
