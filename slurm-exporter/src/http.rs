//! The HTTP endpoint: `/metrics` from the snapshot, `/healthz`, `/readyz`.
//!
//! `/metrics` never talks to slurmrestd: it sends the pre-rendered bytes of the current
//! snapshot plus one line computed per scrape (the snapshot's age), gzip-compressed when
//! the request accepts it (from the copy compressed with the snapshot, see [`crate::gzip`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;

use crate::auth::BasicAuth;
use crate::collector::Store;
use crate::encoding;
use crate::family::Family;
use crate::render;

/// Content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics text.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct AppState {
    store: Arc<Store>,
    auth: Option<Arc<BasicAuth>>,
}

/// The routes. Basic auth, when configured, guards `/metrics`; the probes stay open so
/// that kubelet and load balancers can use them without credentials.
pub fn router(store: Arc<Store>, auth: Option<BasicAuth>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            store,
            auth: auth.map(Arc::new),
        })
}

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<html><head><title>Slurm exporter</title></head><body><h1>Slurm exporter</h1>\
         <p><a href=\"/metrics\">Metrics</a> · <a href=\"/healthz\">healthz</a> · \
         <a href=\"/readyz\">readyz</a></p></body></html>\n",
    )
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.store.snapshot.get().is_some() {
        "ready\n".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the first collection has not finished\n",
        )
            .into_response()
    }
}

async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(auth) = &state.auth
        && !auth.allows(headers.get(header::AUTHORIZATION))
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"slurm-exporter\""),
            )],
            "unauthorized\n",
        )
            .into_response();
    }
    let Some(snapshot) = state.store.snapshot.get() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "no snapshot yet: the first collection has not finished\n",
        )
            .into_response();
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let openmetrics = wants_openmetrics(accept);
    let gzip = encoding::accepts_gzip(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );

    let tail = render::render(&[snapshot_age(snapshot.built.elapsed().as_secs_f64())]);
    let (content_type, body, compressed, tail) = if openmetrics {
        (
            OPENMETRICS_TEXT,
            &snapshot.openmetrics,
            &snapshot.openmetrics_gzip,
            tail.openmetrics + "# EOF\n",
        )
    } else {
        (
            PROMETHEUS_TEXT,
            &snapshot.prometheus,
            &snapshot.prometheus_gzip,
            tail.prometheus,
        )
    };
    let chunks = if gzip {
        compressed.finish(tail.as_bytes())
    } else {
        vec![body.clone(), Bytes::from(tail)]
    };
    let body = Body::from_stream(futures_util::stream::iter(
        chunks.into_iter().map(Ok::<Bytes, Infallible>),
    ));
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let response_headers = response.headers_mut();
    // Caches must key on Accept-Encoding whichever coding this answer has.
    response_headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzip {
        response_headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// `slurm_exporter_snapshot_age_seconds`, the one family computed per scrape.
pub fn snapshot_age(seconds: f64) -> Family {
    let mut age = Family::gauge(
        "slurm_exporter_snapshot_age_seconds",
        "Time since the snapshot being served was assembled.",
        &[],
    );
    age.set::<&str>(&[], seconds);
    age
}

/// Whether an `Accept` header prefers OpenMetrics text over the Prometheus text format
/// (by q-value; on a tie OpenMetrics wins, as Prometheus lists it first).
pub fn wants_openmetrics(accept: &str) -> bool {
    let mut best_om = 0.0f32;
    let mut best_text = 0.0f32;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                q = v.trim().parse().unwrap_or(0.0);
            }
        }
        match media.as_str() {
            "application/openmetrics-text" => best_om = best_om.max(q),
            "text/plain" | "text/*" | "*/*" => best_text = best_text.max(q),
            _ => {}
        }
    }
    best_om > 0.0 && best_om >= best_text
}

#[cfg(test)]
mod tests {
    use super::wants_openmetrics;

    #[test]
    fn accept_negotiation() {
        assert!(!wants_openmetrics(""));
        assert!(!wants_openmetrics("text/plain"));
        assert!(!wants_openmetrics("*/*"));
        assert!(wants_openmetrics("application/openmetrics-text"));
        // What Prometheus sends.
        assert!(wants_openmetrics(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_openmetrics(
            "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"
        ));
        assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
    }
}
