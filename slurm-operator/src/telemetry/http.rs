//! The operator's HTTP endpoints: `/healthz` (the process runs), `/readyz` (its watches have
//! started) and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::Metrics;

/// Set once the operator is ready to serve (`/readyz` answers 200 from then on).
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
    metrics: Arc<Metrics>,
    ready: Readiness,
}

/// Serves health and metrics on `health` and `metrics` (the same listener when they are equal;
/// `None` turns one off).
pub async fn serve(
    health: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
    ready: Readiness,
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
    let mut tasks = Vec::new();
    for (addr, router) in servers {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        tracing::info!(%addr, "serving health/metrics");
        let app = router.with_state(state.clone());
        tasks.push(tokio::spawn(
            async move { axum::serve(listener, app).await },
        ));
    }
    for task in tasks {
        task.await??;
    }
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
