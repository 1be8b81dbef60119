//! The TLS acceptor of a webhook's server ([`acceptor`]), and a TLS listener for `axum::serve`
//! that tests use ([`TlsListener`]; it has no limits: servers go through
//! [`crate::webhook::serve`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::{ServingCert, provider};

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS acceptor presenting `cert` (as it is at each handshake), HTTP/1.1 only (ALPN).
pub fn acceptor(cert: Arc<ServingCert>) -> anyhow::Result<TlsAcceptor> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TCP connections and hands axum those whose TLS handshake completed; handshakes run
/// in their own tasks so that a slow client does not hold up the others. HTTP/1.1 only (ALPN).
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp` with the certificate `cert` serves at each handshake. Needs a
    /// Tokio runtime.
    pub fn new(tcp: TcpListener, cert: Arc<ServingCert>) -> anyhow::Result<TlsListener> {
        let acceptor = acceptor(cert)?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "webhook: TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "webhook: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept loop only ends once this receiver is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{self_signed, testing::https};
    use super::*;

    #[tokio::test]
    async fn serves_https_with_a_self_signed_certificate() {
        let made = self_signed("test-webhook", &["127.0.0.1".into(), "localhost".into()]).unwrap();
        let cert = ServingCert::new(made.key);
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        tokio::spawn(axum::serve(TlsListener::new(tcp, cert.clone()).unwrap(), app).into_future());
        let (resp, leaf) = https(
            port,
            &made.ca_pem,
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.ends_with("ok"), "{resp}");
        assert_eq!(leaf, cert.leaf());
    }
}
