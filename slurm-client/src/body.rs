//! Reading an answer's body under a size limit: the bytes are collected chunk by chunk and
//! reading stops as soon as the next chunk would pass the limit, so no more than the limit
//! (plus one chunk, which is not kept) is ever held. A `Content-Length` above the limit
//! fails before anything is read.

use crate::error::Error;
use crate::request::Request;
use crate::transport::network_error;

/// The body of `response`, at most `limit` bytes; [`Error::TooLarge`] naming `what` and the
/// limit when it is longer.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    request: &Request,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, Error> {
    let status = response.status().as_u16();
    let too_large = || too_large(request, status, what, limit);
    let promised = response.content_length();
    if promised.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    // A promised length is trusted for the first allocation only up to the limit (checked
    // above); without one the buffer grows as the chunks come.
    let mut body = Vec::with_capacity(promised.unwrap_or(0) as usize);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| network_error(request, e))?
    {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The [`Error::TooLarge`] for `what` of the answer to `request`.
pub(crate) fn too_large(request: &Request, status: u16, what: &str, limit: u64) -> Error {
    Error::TooLarge {
        method: request.method.clone(),
        path: request.path.clone(),
        status,
        what: what.to_string(),
        limit,
    }
}

/// The limit for the body of an answer with `status`: `limit` for a success, the much lower
/// [`MAX_ERROR_BODY_BYTES`](crate::ClientBuilder::MAX_ERROR_BODY_BYTES) for an error answer
/// (slurmrestd's are a few KiB at most). Returns the limit and what the body is called.
pub(crate) fn limit_for(status: u16, limit: u64) -> (u64, &'static str) {
    if (200..=299).contains(&status) {
        (limit, "answer body")
    } else {
        (
            limit.min(crate::ClientBuilder::MAX_ERROR_BODY_BYTES),
            "error answer body",
        )
    }
}
