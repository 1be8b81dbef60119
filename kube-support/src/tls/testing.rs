//! For tests (feature `test-util`): an HTTPS client for servers behind a [`TlsListener`].
//!
//! [`TlsListener`]: super::TlsListener

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::provider;

/// A TLS client that trusts `ca_pem`, connecting to 127.0.0.1:`port` (the certificate must
/// name `127.0.0.1`); returns the response to the raw HTTP/1.1 `request` (which should ask for
/// `Connection: close`) and the server's leaf certificate.
///
/// # Panics
///
/// On any failure: it is meant for tests.
pub async fn https(port: u16, ca_pem: &str, request: &str) -> (String, CertificateDer<'static>) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("a CA certificate"))
        .expect("a usable CA certificate");
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring's default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connecting");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("an IP address");
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let leaf = tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone();
    tls.write_all(request.as_bytes())
        .await
        .expect("writing the request");
    let mut out = String::new();
    tls.read_to_string(&mut out)
        .await
        .expect("reading the response");
    (out, leaf)
}
