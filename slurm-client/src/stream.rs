//! Listings decoded as they arrive: the elements of one top-level array (`jobs[]`) are
//! decoded and handed out one by one while the body streams in, so neither the body nor the
//! whole list is ever held (slurmrestd's 20,000-job listing is ~155 MiB of JSON).
//!
//! Everything else is as for [`transport::execute`]: token, user name, timeout (it covers
//! the whole body) and the call's deadline (retries included), status mapping, `errors[]` (even with a 2xx status) and
//! `warnings[]`/`meta`, which slurmrestd sends after the list — so an answer is only known
//! to be good at its end: elements handed out before an error are an incomplete listing,
//! to be dropped. Retries (idempotent requests, transient failures) happen only while no
//! element was handed out yet.
//!
//! An element that does not match its type stops the handing out; the rest of the body is
//! still read, because its `errors[]` explain such a body better (as for a whole answer).
//! Bare `Infinity`/`NaN` (not JSON, printed by 24.11 in some answers) are fixed element by
//! element, only in an element that fails to decode, as the buffered path does for a body.
//!
//! The body limit ([`ClientBuilder::max_body_bytes`](crate::ClientBuilder::max_body_bytes))
//! applies to what is held, not to the whole stream: one element, or the answer with its
//! list left out. Error answers are read whole under their own, lower limit.

pub(crate) mod item;
pub(crate) mod split;

use std::time::Instant;

use serde::de::{DeserializeOwned, IgnoredAny};

use crate::body;
use crate::client::Inner;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::request::Request;
use crate::transport::{self, Reply, network_error, read_answer};
use backon::BackoffBuilder;
use item::decode_item;
use split::{Malformed, Split};

/// Sends `request` and hands each element of the answer's top-level array `key` to `each`,
/// decoded as `I`; the rest of the answer (with that array empty) is decoded as `R`.
pub(crate) async fn stream_list<I: DeserializeOwned, R: DeserializeOwned>(
    inner: &Inner,
    request: &Request,
    key: &str,
    each: &mut (dyn FnMut(I) + Send),
) -> Result<Reply<R>, Error> {
    let deadline = Deadline::start(inner, request);
    let mut waits = inner.retry.backoff().build();
    loop {
        let mut handed_out = false;
        let result = deadline
            .run(
                request,
                attempt(inner, request, key, &mut |item| {
                    handed_out = true;
                    each(item);
                }),
            )
            .await;
        let err = match result {
            Err(err) if request.idempotent && !handed_out && err.is_transient() => err,
            other => return other,
        };
        let Some(wait) = waits.next().filter(|wait| deadline.allows(*wait)) else {
            return Err(err);
        };
        transport::log_retry(request, &err, wait);
        tokio::time::sleep(wait).await;
    }
}

async fn attempt<I: DeserializeOwned, R: DeserializeOwned>(
    inner: &Inner,
    request: &Request,
    key: &str,
    each: &mut (dyn FnMut(I) + Send),
) -> Result<Reply<R>, Error> {
    let started = Instant::now();
    let mut response = transport::send(inner, request).await?;
    let status = response.status().as_u16();
    let (method, path) = (&request.method, request.path.as_str());
    if !(200..=299).contains(&status) {
        // Error answers are small: read whole (under their own, low limit) and classified
        // as usual.
        let (limit, what) = body::limit_for(status, inner.max_body);
        let body = body::read_capped(response, request, limit, what).await?;
        answered(request, status, body.len() as u64, 0, started);
        return Err(
            match read_answer::<IgnoredAny>(method, path, status, body) {
                Err(err) => err,
                // Cannot happen: `read_answer` turns every non-2xx status into an error.
                Ok(_) => Error::Status {
                    method: method.clone(),
                    path: path.to_string(),
                    status,
                    excerpt: String::new(),
                },
            },
        );
    }
    let mut split = Split::new(key);
    let mut mismatch: Option<Error> = None;
    let mut index = 0;
    let limit = inner.max_body;
    // Atomic, not a Cell: the closure is held across awaits of a future that must be Send.
    let oversized = std::sync::atomic::AtomicBool::new(false);
    let mut on_item = |bytes: &[u8]| {
        if bytes.len() as u64 > limit {
            oversized.store(true, std::sync::atomic::Ordering::Relaxed);
        } else if mismatch.is_none() {
            match decode_item::<I>(method, path, key, index, bytes) {
                Ok(item) => each(item),
                Err(err) => mismatch = Some(err),
            }
        }
        index += 1;
    };
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                let err = network_error(request, e);
                tracing::debug!(
                    method = %method,
                    path,
                    bytes = split.bytes(),
                    items = split.items(),
                    error = %err,
                    "slurmrestd answer broke off"
                );
                return Err(err);
            }
        };
        split
            .feed(&chunk, &mut on_item)
            .map_err(|m| malformed(request, key, m))?;
        // The limit is on what is held, never on the whole stream: one element, or the
        // answer without its list (checked here, after each chunk, for the element still
        // being read).
        if oversized.load(std::sync::atomic::Ordering::Relaxed) || split.buffered() > limit {
            let what = if oversized.load(std::sync::atomic::Ordering::Relaxed) {
                format!("a {key}[] element")
            } else {
                format!("the part of the answer held while streaming {key}[]")
            };
            return Err(body::too_large(request, status, &what, limit));
        }
    }
    answered(request, status, split.bytes(), split.items(), started);
    let rest = split.finish().map_err(|m| malformed(request, key, m))?;
    // `errors[]` come with the rest: they win over an element's mismatch.
    let reply = read_answer::<R>(method, path, status, rest)?;
    match mismatch {
        Some(err) => Err(err),
        None => Ok(reply),
    }
}

/// The same debug line as for a whole answer (the scale benchmark reads it).
fn answered(request: &Request, status: u16, bytes: u64, items: usize, started: Instant) {
    tracing::debug!(
        method = %request.method,
        path = %request.path,
        status,
        bytes,
        items,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "slurmrestd answered"
    );
}

fn malformed(request: &Request, key: &str, m: Malformed) -> Error {
    Error::Decode {
        method: request.method.clone(),
        path: request.path.clone(),
        json_path: format!("{key}[{}]", m.items),
        message: m.message,
        excerpt: String::new(),
    }
}
