//! `https://` endpoints: a custom CA and a client certificate, against a TLS server on
//! 127.0.0.1 (the dev clusters serve plain HTTP). Fixtures: `tests/tls/README.md`.

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use slurm_client::{Client, ClientBuilder, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig, crypto};

fn fixture(name: &str) -> String {
    format!("{}/tests/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn certs(name: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(fixture(name))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A TLS server answering every request with a small slurmrestd-like JSON body.
async fn tls_server(require_client_cert: bool) -> String {
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = RootCertStore::empty();
        for ca in certs("ca.pem") {
            roots.add(ca).unwrap();
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = builder.with_single_cert(certs("server.pem"), key).unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                let _ = tls.read(&mut buf).await;
                let body = r#"{"pings":[],"meta":{"slurm":{"release":"24.11.5"}},"errors":[],"warnings":[]}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    format!("https://127.0.0.1:{}", addr.port())
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url).retry_policy(RetryPolicy::none())
}

#[tokio::test]
async fn custom_ca_is_trusted() {
    let url = tls_server(false).await;
    let client = builder(&url)
        .ca_certificate_file(fixture("ca.pem"))
        .build()
        .unwrap();
    let ping = client.get_json("/slurm/v0.0.42/ping").await.unwrap();
    assert_eq!(ping["meta"]["slurm"]["release"], "24.11.5");

    let pem = std::fs::read(fixture("ca.pem")).unwrap();
    let client = builder(&url).ca_certificate_pem(pem).build().unwrap();
    client.get_json("/slurm/v0.0.42/ping").await.unwrap();
}

#[tokio::test]
async fn unknown_ca_is_refused() {
    let url = tls_server(false).await;
    let err = builder(&url)
        .build()
        .unwrap()
        .get_json("/slurm/v0.0.42/ping")
        .await
        .unwrap_err();
    assert_eq!(err.label(), "transport", "{err}");
}

#[tokio::test]
async fn client_certificate_is_presented() {
    let url = tls_server(true).await;
    let client = builder(&url)
        .ca_certificate_file(fixture("ca.pem"))
        .client_identity_files(fixture("client.pem"), fixture("client.key"))
        .build()
        .unwrap();
    client.get_json("/slurm/v0.0.42/ping").await.unwrap();

    let without = builder(&url)
        .ca_certificate_file(fixture("ca.pem"))
        .build()
        .unwrap();
    let err = without.get_json("/slurm/v0.0.42/ping").await.unwrap_err();
    assert_eq!(err.label(), "transport", "{err}");
}

#[test]
fn unreadable_or_invalid_tls_files_are_config_errors() {
    let err = builder("https://127.0.0.1:1")
        .ca_certificate_file("/nonexistent/ca.pem")
        .build()
        .unwrap_err();
    assert_eq!(err.label(), "config");
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");

    let err = builder("https://127.0.0.1:1")
        .ca_certificate_pem(b"not pem".to_vec())
        .build()
        .unwrap_err();
    assert_eq!(err.label(), "config", "{err}");

    let err = builder("https://127.0.0.1:1")
        .client_identity_files(fixture("client.pem"), "/nonexistent/client.key")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/client.key"), "{err}");
}
