//! `tls_server_config` → a rustls `ServerConfig`, with exporter-toolkit's checks and messages.
//!
//! Where rustls cannot do what Go's crypto/tls does (TLS 1.0/1.1, CBC suites, P-521) the file is
//! refused with a message naming the value, except `min_version: TLS10/TLS11`, which only means
//! "TLS 1.2 and up" here because rustls has nothing older.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
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

/// A built TLS configuration and the files it was read from (watched for rotation).
pub struct BuiltTls {
    /// The rustls configuration for new connections.
    pub config: Arc<ServerConfig>,
    /// Certificate, key and CA files.
    pub files: Vec<PathBuf>,
}

/// Builds the server configuration; `dir` is the web config file's directory.
pub fn build(c: &TlsServerConfig, dir: &Path, http2: bool) -> anyhow::Result<BuiltTls> {
    let mut files = Vec::new();
    let mut source = |inline: &Option<String>, file: &Option<String>, what: &str| {
        read_pem_source(inline, file, what, dir, &mut files)
    };
    let cert_pem = source(&c.cert, &c.cert_file, "cert")?
        .context("tls_server_config: missing one of cert or cert_file")?;
    let key_pem = source(&c.key, &c.key_file, "key")?
        .context("tls_server_config: missing one of key or key_file")?;
    let client_ca_pem = source(&c.client_ca, &c.client_ca_file, "client_ca")?;
    let cert_name = name_of(&c.cert_file, "cert");
    let key_name = name_of(&c.key_file, "key");

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem.0)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{cert_name}: not a PEM certificate: {e}"))?;
    anyhow::ensure!(!chain.is_empty(), "{cert_name}: no PEM certificate in it");
    let key = PrivateKeyDer::from_pem_slice(&key_pem.0)
        .map_err(|e| anyhow::anyhow!("{key_name}: not a PEM private key: {e}"))?;

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
        .context("tls_server_config: min_version/max_version and cipher_suites leave nothing")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .with_context(|| format!("{cert_name} and {key_name} do not make a key pair"))?;
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
    what: &str,
    dir: &Path,
    files: &mut Vec<PathBuf>,
) -> anyhow::Result<Option<Pem>> {
    let inline = inline.as_deref().filter(|s| !s.is_empty());
    let file = file.as_deref().filter(|s| !s.is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => {
            bail!("tls_server_config: cannot specify both {what} and {what}_file")
        }
        (Some(text), None) => Ok(Some(Pem(text.as_bytes().to_vec()))),
        (None, Some(path)) => {
            let full = resolve(dir, path);
            let bytes = std::fs::read(&full)
                .with_context(|| format!("failed to read {what}_file ({})", full.display()))?;
            files.push(full);
            Ok(Some(Pem(bytes)))
        }
        (None, None) => Ok(None),
    }
}

fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> anyhow::Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    fn rank(text: &str, key: &str) -> anyhow::Result<u8> {
        match text {
            "TLS10" => Ok(10),
            "TLS11" => Ok(11),
            "TLS12" => Ok(12),
            "TLS13" => Ok(13),
            _ => bail!("tls_server_config.{key}: unknown TLS version: {text}"),
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
    anyhow::ensure!(
        hi >= 12,
        "tls_server_config.max_version {}: TLS 1.0/1.1 are not supported (rustls)",
        max.unwrap_or_default()
    );
    anyhow::ensure!(
        lo <= hi,
        "tls_server_config: min_version is above max_version"
    );
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
) -> anyhow::Result<Vec<rustls::SupportedCipherSuite>> {
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
            None if GO_ONLY_SUITES.contains(&go_alias) => bail!(
                "tls_server_config.cipher_suites: {name} is not offered by this server (rustls has \
                 no CBC or static-RSA suites)"
            ),
            None => bail!("tls_server_config.cipher_suites: unknown cipher: {name}"),
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

fn curves(names: &[String]) -> anyhow::Result<Vec<&'static dyn rustls::crypto::SupportedKxGroup>> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "X25519" => Ok(ring::kx_group::X25519),
            "CurveP256" => Ok(ring::kx_group::SECP256R1),
            "CurveP384" => Ok(ring::kx_group::SECP384R1),
            "CurveP521" => {
                bail!("tls_server_config.curve_preferences: CurveP521 is not supported (rustls)")
            }
            _ => bail!("tls_server_config.curve_preferences: unknown curve: {name}"),
        })
        .collect()
}

fn client_verifier(
    c: &TlsServerConfig,
    ca_pem: Option<Pem>,
    provider: Arc<CryptoProvider>,
) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let kind = c.client_auth_type.as_deref().unwrap_or("");
    let roots = || -> anyhow::Result<Arc<RootCertStore>> {
        let pem = ca_pem.as_ref().with_context(|| {
            format!("client_auth_type {kind} needs client_ca_file or client_ca")
        })?;
        let mut store = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem.0) {
            let cert = cert.map_err(|e| anyhow::anyhow!("client CA: not PEM: {e}"))?;
            store
                .add(cert)
                .map_err(|e| anyhow::anyhow!("client CA certificate refused: {e}"))?;
        }
        anyhow::ensure!(!store.is_empty(), "client CA file holds no certificate");
        Ok(Arc::new(store))
    };
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ClientCertVerifier> = match kind {
        "" | "NoClientCert" => {
            anyhow::ensure!(
                ca_pem.is_none(),
                "client CA's have been configured without a Client Auth Policy"
            );
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
                .context("client certificate verifier")?
        }
        "RequireAndVerifyClientCert" => {
            WebPkiClientVerifier::builder_with_provider(roots()?, provider.clone())
                .build()
                .context("client certificate verifier")?
        }
        other => bail!("tls_server_config: invalid ClientAuth: {other}"),
    };
    match &c.client_allowed_sans {
        None => Ok(verifier),
        Some(sans) => {
            anyhow::ensure!(
                matches!(
                    kind,
                    "RequireAnyClientCert" | "RequireClientCert" | "RequireAndVerifyClientCert"
                ),
                "client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert \
                 or RequireAndVerifyClientCert"
            );
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
}
