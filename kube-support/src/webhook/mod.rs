//! An admission webhook's plumbing: its HTTPS server ([`serve`], [`serve_until`]: the
//! hardened [`server`](crate::server) with [`Limits::WEBHOOK`], draining on [`Shutdown`]), how the API server reaches it
//! ([`Endpoint`]: a Service or a URL, and the names its certificate must hold), and the
//! `caBundle` of its Mutating- or ValidatingWebhookConfiguration in the self-signed mode
//! ([`inject_ca_bundle`]). What the webhook checks, its paths and its configuration's rules
//! belong to the binary.
//!
//! The two certificate modes, put together from [`crate::tls`]:
//! - **cert dir** (cert-manager): `serve(addr, tls::watch_dir(dir).await?, router)`; the chart
//!   or cert-manager's CA injector owns the `caBundle`.
//! - **self-signed**: [`tls::self_signed`] for [`Endpoint::certificate_names`], a task running
//!   [`inject_ca_bundle`] with its `ca_pem` for each configuration, then `serve` with
//!   `ServingCert::new(made.key)`. Every start makes a new CA, so this suits one replica.
//!
//! [`tls::self_signed`]: crate::tls::self_signed

mod ca_bundle;
mod endpoint;
#[cfg(test)]
mod starvation_tests;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;

pub use ca_bundle::{WebhookConfiguration, inject_ca_bundle, set_ca_bundle};
pub use endpoint::Endpoint;

pub use crate::server::Limits;

use crate::shutdown::Shutdown;
use crate::tls::{ServingCert, acceptor};

/// Serves `router` over HTTPS (HTTP/1.1) on `addr` with `cert`, for good.
pub async fn serve(
    addr: SocketAddr,
    cert: Arc<ServingCert>,
    router: axum::Router,
) -> anyhow::Result<()> {
    serve_until(addr, cert, router, Shutdown::new()).await
}

/// Serves `router` over HTTPS (HTTP/1.1) on `addr` with `cert` under [`Limits::WEBHOOK`] until
/// `shutdown` is triggered, then drains (in-flight reviews are answered, no new connection is
/// taken) and returns. Fails only if it cannot listen.
pub async fn serve_until(
    addr: SocketAddr,
    cert: Arc<ServingCert>,
    router: axum::Router,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("webhook: cannot listen on {addr}"))?;
    tracing::info!(%addr, "serving the admission webhook");
    let tls = acceptor(cert)?;
    crate::server::serve(tcp, Some(tls), router, &Limits::WEBHOOK, async move {
        shutdown.triggered().await
    })
    .await;
    tracing::info!(%addr, "admission webhook stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{self_signed, testing::https};

    #[tokio::test]
    async fn serves_a_router_over_https() {
        let made = self_signed("test-webhook", &["127.0.0.1".into()]).unwrap();
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let router = axum::Router::new().route(
            "/mutate-x",
            axum::routing::post(|body: String| async move { format!("got {body}") }),
        );
        tokio::spawn(serve(addr, ServingCert::new(made.key), router));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "not listening");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let (resp, _) = https(
            addr.port(),
            &made.ca_pem,
            "POST /mutate-x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.ends_with("got {}"), "{resp}");
    }
}
