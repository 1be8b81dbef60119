//! TLS settings for `https://` endpoints: extra CA certificates and a client identity.

use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretSlice};

use crate::error::Error;

/// PEM text given directly or read from a file when the client is built.
#[derive(Clone)]
pub(crate) enum Pem {
    Bytes(Vec<u8>),
    File(PathBuf),
}

/// A private key in PEM, given directly or read from a file when the client is built.
#[derive(Clone)]
pub(crate) enum KeyPem {
    Bytes(SecretSlice<u8>),
    File(PathBuf),
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::Bytes(b) => write!(f, "Pem({} bytes)", b.len()),
            Pem::File(p) => write!(f, "Pem({})", p.display()),
        }
    }
}

impl std::fmt::Debug for KeyPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyPem::Bytes(_) => f.write_str("KeyPem([REDACTED])"),
            KeyPem::File(p) => write!(f, "KeyPem({})", p.display()),
        }
    }
}

impl Pem {
    fn load(&self, what: &str) -> Result<Vec<u8>, Error> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File(p) => std::fs::read(p)
                .map_err(|e| Error::Config(format!("cannot read {what} {}: {e}", p.display()))),
        }
    }
}

impl KeyPem {
    fn load(&self) -> Result<SecretSlice<u8>, Error> {
        match self {
            KeyPem::Bytes(b) => Ok(b.clone()),
            KeyPem::File(p) => std::fs::read(p).map(SecretSlice::from).map_err(|e| {
                Error::Config(format!("cannot read client key file {}: {e}", p.display()))
            }),
        }
    }
}

/// Loads CA certificates (one or more in a PEM bundle).
pub(crate) fn certificates(pem: &Pem) -> Result<Vec<reqwest::Certificate>, Error> {
    let bytes = pem.load("CA certificate file")?;
    let certs = reqwest::Certificate::from_pem_bundle(&bytes)
        .map_err(|e| Error::Config(format!("CA certificate {pem:?} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "CA certificate {pem:?} holds no certificate"
        )));
    }
    Ok(certs)
}

/// Loads a client certificate and its private key.
pub(crate) fn identity(cert: &Pem, key: &KeyPem) -> Result<reqwest::Identity, Error> {
    let mut both = cert.load("client certificate file")?;
    both.push(b'\n');
    both.extend_from_slice(key.load()?.expose_secret());
    let both = SecretSlice::from(both);
    reqwest::Identity::from_pem(both.expose_secret()).map_err(|e| {
        Error::Config(format!(
            "client certificate {cert:?} or key {key:?} is not valid PEM: {}",
            crate::error::chain(&e)
        ))
    })
}

/// reqwest is built without a default rustls crypto provider (to avoid compiling
/// aws-lc); install ring as the process default unless the application chose one.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: any provider will do.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
