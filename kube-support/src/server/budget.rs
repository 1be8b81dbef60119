//! One budget of request-body bytes for all the requests a listener is serving: a body is
//! charged as its bytes arrive (all at once when `Content-Length` announces them) and the charge
//! is returned when its request is answered. A request that would overdraw it gets 503, so
//! that many large bodies at once cost a bounded amount of memory, not their sum.
//!
//! The first [`FREE_BYTES`] of every body are not charged: ordinary requests never compete with
//! large bodies for the budget, so that clients holding it cannot lock them out. Those bytes are
//! bounded by the concurrency cap instead (256 × 64 KiB = 16 MiB for a webhook).

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::Frame;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of each body that the budget does not see: more than an ordinary AdmissionReview
/// (5-50 KiB) or probe.
pub(crate) const FREE_BYTES: usize = 64 * 1024;

/// The shared budget, in bytes (one semaphore permit a byte).
#[derive(Clone)]
pub(crate) struct BodyBudget(Arc<Semaphore>);

impl BodyBudget {
    pub(crate) fn new(bytes: usize) -> BodyBudget {
        // Permits are counted in u32 per acquisition and capped by tokio; 4 GiB is beyond use.
        BodyBudget(Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))))
    }
}

/// What one request has been charged.
#[derive(Default)]
struct Charge {
    permits: Option<OwnedSemaphorePermit>,
    /// Bytes paid for in advance (from `Content-Length`) and not yet arrived.
    prepaid: usize,
    /// Bytes received so far.
    received: usize,
    overdrawn: bool,
}

type Shared = Arc<Mutex<Charge>>;

fn charge(budget: &BodyBudget, charge: &mut Charge, bytes: usize) -> bool {
    let Ok(n) = u32::try_from(bytes) else {
        return false;
    };
    if n == 0 {
        return true;
    }
    match budget.0.clone().try_acquire_many_owned(n) {
        Ok(p) => {
            match &mut charge.permits {
                Some(held) => held.merge(p),
                None => charge.permits = Some(p),
            }
            true
        }
        Err(_) => {
            charge.overdrawn = true;
            false
        }
    }
}

fn overdrawn() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "request bodies being received exceed this server's memory budget; retry\n",
    )
        .into_response()
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub(crate) async fn middleware(
    State(budget): State<BodyBudget>,
    request: Request,
    next: Next,
) -> Response {
    let shared: Shared = Arc::default();
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = announced {
        let mut c = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let charged = len.saturating_sub(FREE_BYTES);
        if !charge(&budget, &mut c, charged) {
            return overdrawn();
        }
        c.prepaid = charged;
    }
    let request = request.map(|inner| {
        Body::new(Charged {
            inner,
            budget: budget.clone(),
            shared: shared.clone(),
        })
    });
    let response = next.run(request).await;
    let overdrew = shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .overdrawn;
    // `shared` (and with it the charge) goes when this returns: the body has been read and
    // the handler is done with it.
    if overdrew { overdrawn() } else { response }
}

/// A request body that charges the budget for each piece.
struct Charged {
    inner: Body,
    budget: BodyBudget,
    shared: Shared,
}

/// The error a body reports when the budget is overdrawn (the middleware answers 503).
#[derive(Debug)]
struct Overdrawn;

impl std::fmt::Display for Overdrawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request-body memory budget overdrawn")
    }
}

impl std::error::Error for Overdrawn {}

impl http_body::Body for Charged {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        // The inner error unwrapped, so that axum still finds a body-size error under the one
        // wrapper it adds again (and answers 413).
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx))
            .map(|f| f.map_err(axum::Error::into_inner));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            let mut c = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            let free_before = FREE_BYTES.saturating_sub(c.received);
            c.received = c.received.saturating_add(data.len());
            let n = data.len().saturating_sub(free_before);
            let owed = n.saturating_sub(c.prepaid);
            c.prepaid = c.prepaid.saturating_sub(n);
            if !charge(&self.budget, &mut c, owed) {
                return Poll::Ready(Some(Err(Box::new(Overdrawn))));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
