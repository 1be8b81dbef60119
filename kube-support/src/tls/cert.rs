//! A certificate chain with its key, and the serving certificate that can be replaced while
//! connections come in.

use std::sync::{Arc, RwLock};

use anyhow::{Context as _, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::provider;

/// A certificate chain and key from PEM (`tls.crt` may hold the chain; the key may be PKCS#8,
/// PKCS#1 or SEC1). The key must match the first certificate.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<CertifiedKey> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificates")?;
    if certs.is_empty() {
        bail!("no certificate found");
    }
    // The key's parse error is not shown: it could quote key material.
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| anyhow::anyhow!("no usable private key found"))?;
    CertifiedKey::from_der(certs, key, &provider()).context("the key does not fit the certificate")
}

/// The serving certificate, replaceable while connections come in; the TLS server asks it for
/// the current one at each handshake.
#[derive(Debug)]
pub struct ServingCert(RwLock<Arc<CertifiedKey>>);

impl ServingCert {
    /// Starts with `key`.
    pub fn new(key: CertifiedKey) -> Arc<ServingCert> {
        Arc::new(ServingCert(RwLock::new(Arc::new(key))))
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: CertifiedKey) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }

    /// The current leaf certificate (DER).
    pub fn leaf(&self) -> CertificateDer<'static> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).cert[0].clone()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_mismatched_or_missing_material() {
        let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".to_string()]).unwrap();
        let err = certified_key(
            a.cert.pem().as_bytes(),
            b.signing_key.serialize_pem().as_bytes(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("does not fit"), "{err}");
        assert!(certified_key(b"", a.signing_key.serialize_pem().as_bytes()).is_err());
        let err = certified_key(a.cert.pem().as_bytes(), b"junk")
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "no usable private key found");
    }
}
