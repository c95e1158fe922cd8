//! A throwaway PKI made with `openssl` (scripts/setup.sh installs it), as an operator's CA would
//! issue it: CAs, server certificates for 127.0.0.1 and client certificates, ECDSA P-256 so the
//! keys are quick to make; plus bcrypt hashes for web configs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A certificate and its key on disk.
#[derive(Debug, Clone)]
pub struct Issued {
    /// PEM certificate.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8).
    pub key: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA named `name` in `dir` (`name.pem`, `name.key`).
pub fn ca(dir: &Path, name: &str) -> Issued {
    let (cert, key) = (format!("{name}.pem"), format!("{name}.key"));
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &key,
            "-out",
            &cert,
        ],
        dir,
    );
    Issued {
        cert: dir.join(cert),
        key: dir.join(key),
    }
}

/// A leaf certificate `name` signed by `ca`: a server certificate for IP 127.0.0.1 when `server`,
/// else a client certificate with the DNS SAN `name`.
pub fn issue(dir: &Path, ca: &Issued, name: &str, server: bool) -> Issued {
    let extensions = if server {
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
            .to_string()
    } else {
        format!(
            "subjectAltName=DNS:{name}\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"
        )
    };
    issue_with(dir, ca, name, &format!("/CN={name}"), &extensions)
}

/// A leaf certificate `name` (`name.pem`, `name.key`) signed by `ca`, with the subject
/// `subject` (`/O=group/CN=user`) and the X.509 v3 `extensions` (openssl's extfile lines).
pub fn issue_with(dir: &Path, ca: &Issued, name: &str, subject: &str, extensions: &str) -> Issued {
    let (cert, key, csr, ext) = (
        format!("{name}.pem"),
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&ext), extensions).unwrap();
    openssl(
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            subject,
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
        dir,
    );
    openssl(
        &[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            &csr,
            "-CA",
            &ca.cert.display().to_string(),
            "-CAkey",
            &ca.key.display().to_string(),
            "-CAcreateserial",
            "-out",
            &cert,
            "-extfile",
            &ext,
        ],
        dir,
    );
    Issued {
        cert: dir.join(cert),
        key: dir.join(key),
    }
}

/// An ECDSA P-256 key pair `name.key` (PKCS#8) and `name.pub` (SubjectPublicKeyInfo), e.g. a
/// service-account token signing key.
pub fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (key, public) = (format!("{name}.key"), format!("{name}.pub"));
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &key,
        ],
        dir,
    );
    openssl(&["pkey", "-in", &key, "-pubout", "-out", &public], dir);
    (dir.join(key), dir.join(public))
}

/// The DER of the first certificate in a PEM file.
pub fn der_of(pem: &Path) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(["x509", "-outform", "DER", "-in"])
        .arg(pem)
        .output()
        .expect("openssl");
    assert!(out.status.success());
    out.stdout
}

/// A bcrypt hash of `password` at the cost exporter-toolkit's docs use.
pub fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash(password, 10).expect("bcrypt")
}
