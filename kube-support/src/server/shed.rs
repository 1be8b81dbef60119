//! A cap on the requests a listener handles at once: one over it is answered 503 at once
//! (load shedding) rather than queued, so that a flood costs neither unbounded memory nor the
//! latency of every request behind it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

/// Requests in progress (one permit each).
#[derive(Clone)]
pub(crate) struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub(crate) fn new(max: usize) -> InFlight {
        InFlight(Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))))
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub(crate) async fn middleware(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    let Ok(_permit) = in_flight.0.try_acquire() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many requests in progress; retry\n",
        )
            .into_response();
    };
    next.run(request).await
}
