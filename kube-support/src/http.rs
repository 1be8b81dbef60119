//! A process's plain-HTTP endpoints: `/healthz` (the process runs), `/readyz` (it is ready, see
//! [`Readiness`]) and `/metrics` (Prometheus text, from an [`EncodeMetrics`]), served by the
//! hardened [`server`](crate::server) with [`Limits::PROBES`](crate::server::Limits::PROBES).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::shutdown::Shutdown;

/// What `/metrics` answers: the text exposition of the process's metrics (OpenMetrics text, as
/// `prometheus_client::encoding::text::encode` writes it). Closures `Fn() -> String` are one.
pub trait EncodeMetrics: Send + Sync + 'static {
    /// The current metrics as text.
    fn encode(&self) -> String;
}

impl<F: Fn() -> String + Send + Sync + 'static> EncodeMetrics for F {
    fn encode(&self) -> String {
        self()
    }
}

/// Set once the process is ready to serve (`/readyz` answers 200 from then on). Clones share
/// the flag.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<dyn EncodeMetrics>,
    ready: Readiness,
}

/// Serves health (`/healthz`, `/readyz`) on `health` and `/metrics` on `metrics_addr` (one
/// listener when they are equal; `None` turns one off), for good. With both off it returns
/// `Ok(())` at once.
pub async fn serve(
    health: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    metrics: Arc<dyn EncodeMetrics>,
    ready: Readiness,
) -> anyhow::Result<()> {
    serve_until(health, metrics_addr, metrics, ready, Shutdown::new()).await
}

/// [`serve`] until `shutdown` is triggered; then the listeners drain and it returns. Fails only
/// if it cannot listen.
pub async fn serve_until(
    health: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    metrics: Arc<dyn EncodeMetrics>,
    ready: Readiness,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let state = AppState { metrics, ready };
    let health_routes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz));
    let metrics_routes = Router::new().route("/metrics", get(metrics_text));
    let mut servers = Vec::new();
    match (health, metrics_addr) {
        (Some(h), Some(m)) if h == m => {
            servers.push((h, health_routes.merge(metrics_routes)));
        }
        (h, m) => {
            if let Some(h) = h {
                servers.push((h, health_routes));
            }
            if let Some(m) = m {
                servers.push((m, metrics_routes));
            }
        }
    }
    let mut listeners = Vec::new();
    for (addr, router) in servers {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        tracing::info!(%addr, "serving health/metrics");
        listeners.push((listener, router.with_state(state.clone())));
    }
    let mut served = tokio::task::JoinSet::new();
    for (listener, app) in listeners {
        let shutdown = shutdown.clone();
        served.spawn(async move {
            let stop = async move { shutdown.triggered().await };
            crate::server::serve(listener, None, app, &crate::server::Limits::PROBES, stop).await
        });
    }
    while served.join_next().await.is_some() {}
    Ok(())
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.ready.0.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn free_addr() -> SocketAddr {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    /// `GET path` on `addr`, retried while the server is not listening yet.
    async fn get(addr: SocketAddr, path: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut tcp = loop {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(tcp) => break tcp,
                Err(e) => {
                    assert!(std::time::Instant::now() < deadline, "{addr}: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn health_readiness_and_metrics_on_one_listener() {
        let addr = free_addr();
        let ready = Readiness::default();
        let metrics: Arc<dyn EncodeMetrics> = Arc::new(|| "# EOF\n".to_string());
        tokio::spawn(serve(Some(addr), Some(addr), metrics, ready.clone()));
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        let r = get(addr, "/readyz").await;
        assert!(
            r.starts_with("HTTP/1.1 503") && r.ends_with("starting"),
            "{r}"
        );
        ready.set_ready();
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        let m = get(addr, "/metrics").await;
        assert!(m.starts_with("HTTP/1.1 200"), "{m}");
        assert!(
            m.contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
            "{m}"
        );
        assert!(m.ends_with("# EOF\n"), "{m}");
    }

    #[tokio::test]
    async fn separate_listeners_and_off() {
        struct Fixed;
        impl EncodeMetrics for Fixed {
            fn encode(&self) -> String {
                "fixed".into()
            }
        }
        let (health, metrics) = (free_addr(), free_addr());
        tokio::spawn(serve(
            Some(health),
            Some(metrics),
            Arc::new(Fixed),
            Readiness::default(),
        ));
        assert!(get(metrics, "/metrics").await.ends_with("fixed"));
        assert!(get(metrics, "/healthz").await.starts_with("HTTP/1.1 404"));
        assert!(get(health, "/metrics").await.starts_with("HTTP/1.1 404"));
        assert!(get(health, "/healthz").await.starts_with("HTTP/1.1 200"));

        serve(None, None, Arc::new(Fixed), Readiness::default())
            .await
            .unwrap();
    }
}

/// A listen address from a flag: `0.0.0.0:8080`, `:8080` (all interfaces), or `0`/empty for
/// "off" (`None`).
pub fn listen_addr(text: &str) -> anyhow::Result<Option<SocketAddr>> {
    if text == "0" || text.is_empty() {
        return Ok(None);
    }
    let text = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_owned()
    };
    text.parse().map(Some).map_err(|e| {
        anyhow::anyhow!("not a listen address: {text:?} (e.g. 0.0.0.0:8080, :8080 or 0): {e}")
    })
}

#[cfg(test)]
mod listen_addr_tests {
    use super::listen_addr;

    #[test]
    fn forms() {
        assert_eq!(listen_addr("0").unwrap(), None);
        assert_eq!(
            listen_addr(":8080").unwrap().unwrap().to_string(),
            "0.0.0.0:8080"
        );
        assert!(
            listen_addr("nope")
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
    }
}
