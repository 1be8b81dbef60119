//! The per-request limits around a router, outermost first: the concurrency cap, the request
//! deadline, the pause allowed inside a body, the body size cap and the shared body budget.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

use super::Limits;
use super::budget::{self, BodyBudget};
use super::shed::{self, InFlight};

/// `router` with `limits`' per-request limits (the last layer added runs first).
pub(crate) fn limited(router: Router, limits: &Limits) -> Router {
    router
        // axum's extractors stop at 2 MiB of their own accord, under a legitimate review.
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(from_fn_with_state(
            BodyBudget::new(limits.max_body_bytes_in_flight),
            budget::middleware,
        ))
        // Refuses an announced oversized body before reading it; a chunked one is cut at the
        // cap and its extractor answers 413.
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(RequestBodyTimeoutLayer::new(limits.body_read_timeout))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_deadline,
        ))
        .layer(from_fn_with_state(
            InFlight::new(limits.max_concurrent_requests),
            shed::middleware,
        ))
}
