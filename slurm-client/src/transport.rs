//! The one place requests are sent: auth headers, retries, status mapping.

use std::time::Instant;

use backon::BackoffBuilder;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;

use crate::auth::TokenError;
use crate::classify::classify;
use crate::client::Inner;
use crate::deadline::Deadline;
use crate::decode::{decode, head};
use crate::endpoint::join;
use crate::envelope::Envelope;
use crate::error::{Error, chain};
use crate::request::Request;
use crate::response::Response;

/// Header carrying the JWT.
pub(crate) const TOKEN_HEADER: HeaderName = HeaderName::from_static("x-slurm-user-token");
/// Header carrying the user name.
pub(crate) const USER_HEADER: HeaderName = HeaderName::from_static("x-slurm-user-name");

/// A successful (2xx, no `errors[]`) answer, decoded.
#[derive(Debug)]
pub(crate) struct Reply<T> {
    pub status: u16,
    pub value: T,
    pub envelope: Envelope,
}

impl<T> From<Reply<T>> for Response<T> {
    fn from(reply: Reply<T>) -> Response<T> {
        Response {
            value: reply.value,
            warnings: reply.envelope.warnings,
            meta: reply.envelope.meta,
            status: reply.status,
        }
    }
}

/// Sends `request` and decodes the answer as `T`, retrying transient failures when it is
/// idempotent.
pub(crate) async fn execute<T: DeserializeOwned>(
    inner: &Inner,
    request: &Request,
) -> Result<Reply<T>, Error> {
    execute_with(inner, request, read_answer::<T>).await
}

/// [`execute`] with another way of reading the answer than [`read_answer`].
///
/// Every attempt and every wait between attempts ends before the call's [`Deadline`]; a
/// retry that could only start after it is not made.
pub(crate) async fn execute_with<X>(
    inner: &Inner,
    request: &Request,
    read: impl Fn(&Method, &str, u16, Vec<u8>) -> Result<X, Error>,
) -> Result<X, Error> {
    let deadline = Deadline::start(inner, request);
    let mut waits = inner.retry.backoff().build();
    loop {
        let err = match deadline.run(request, attempt(inner, request, &read)).await {
            Err(err) if request.idempotent && err.is_transient() => err,
            other => return other,
        };
        let Some(wait) = waits.next().filter(|wait| deadline.allows(*wait)) else {
            return Err(err);
        };
        log_retry(request, &err, wait);
        tokio::time::sleep(wait).await;
    }
}

async fn attempt<X>(
    inner: &Inner,
    request: &Request,
    read: &impl Fn(&Method, &str, u16, Vec<u8>) -> Result<X, Error>,
) -> Result<X, Error> {
    let started = Instant::now();
    let response = send(inner, request).await?;
    let status = response.status().as_u16();
    let (limit, what) = crate::body::limit_for(status, inner.max_body);
    let body = crate::body::read_capped(response, request, limit, what).await?;
    tracing::debug!(
        method = %request.method,
        path = %request.path,
        status,
        bytes = body.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "slurmrestd answered"
    );
    read(&request.method, &request.path, status, body)
}

/// Sends `request` once (token, user name, timeout) and returns the answer with its body
/// still to be read.
pub(crate) async fn send(inner: &Inner, request: &Request) -> Result<reqwest::Response, Error> {
    let url = join(&inner.base, &request.path, &request.query);
    let mut builder = inner
        .http
        .request(request.method.clone(), url)
        .header(ACCEPT, "application/json");
    match &request.body {
        Some(Ok(body)) => {
            builder = builder
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        Some(Err(message)) => {
            return Err(Error::Encode {
                method: request.method.clone(),
                path: request.path.clone(),
                message: message.clone(),
            });
        }
        None => {}
    }
    if let Some(timeout) = request.timeout {
        builder = builder.timeout(timeout);
    }
    if let Some(provider) = &inner.token {
        let token = provider.token().await?;
        let mut value = HeaderValue::from_str(token.expose_secret()).map_err(|_| {
            TokenError::new("the token contains characters that cannot be sent in an HTTP header")
        })?;
        value.set_sensitive(true);
        builder = builder.header(TOKEN_HEADER, value);
    }
    if let Some(user) = &inner.user_name {
        builder = builder.header(USER_HEADER, user.clone());
    }

    builder.send().await.map_err(|e| network_error(request, e))
}

/// Turns a status and body into the decoded value or the [`Error`] they stand for.
///
/// A 2xx body is decoded as `T` in one pass that also reads its `errors[]`, `warnings[]`
/// and `meta`; any other body (an error answer, small) only has its envelope read.
pub(crate) fn read_answer<T: DeserializeOwned>(
    method: &Method,
    path: &str,
    status: u16,
    body: Vec<u8>,
) -> Result<Reply<T>, Error> {
    if !(200..=299).contains(&status) {
        let body = crate::nonfinite::sanitize(&body).unwrap_or(body);
        let envelope = Envelope::parse(&body);
        return Err(
            classify(method, path, status, &body, &envelope).unwrap_or_else(|| Error::Status {
                method: method.clone(),
                path: path.to_string(),
                status,
                excerpt: head(&body),
            }),
        );
    }
    let decoded = match decode::<T>(method, path, &body) {
        // Bare `Infinity`/`NaN` (not JSON) make a body fail; fixing them is only tried then,
        // so the common case does not pay for searching 100 MB for them.
        Err(mismatch) => match crate::nonfinite::sanitize(&body) {
            Some(fixed) => {
                let decoded = decode::<T>(method, path, &fixed);
                return settle(method, path, status, &fixed, decoded);
            }
            None => Err(mismatch),
        },
        decoded => decoded,
    };
    settle(method, path, status, &body, decoded)
}

/// A decoded 2xx body (or its decoding error) as success or the error its `errors[]` say.
fn settle<T>(
    method: &Method,
    path: &str,
    status: u16,
    body: &[u8],
    decoded: Result<(T, Envelope), Error>,
) -> Result<Reply<T>, Error> {
    match decoded {
        Ok((value, envelope)) => match classify(method, path, status, body, &envelope) {
            Some(err) => Err(err),
            None => Ok(Reply {
                status,
                value,
                envelope,
            }),
        },
        // `errors[]` explain a body that is not the expected type better than the mismatch.
        Err(mismatch) => {
            let envelope = Envelope::parse(body);
            Err(classify(method, path, status, body, &envelope).unwrap_or(mismatch))
        }
    }
}

/// The warning logged before a request is retried.
pub(crate) fn log_retry(request: &Request, err: &Error, wait: std::time::Duration) {
    tracing::warn!(
        method = %request.method,
        path = %request.path,
        error = %err,
        kind = err.label(),
        wait_ms = wait.as_millis() as u64,
        "retrying slurmrestd request"
    );
}

pub(crate) fn network_error(request: &Request, err: reqwest::Error) -> Error {
    let method = request.method.clone();
    let path = request.path.clone();
    let detail = chain(&err);
    if err.is_timeout() {
        Error::Timeout {
            method,
            path,
            detail,
        }
    } else {
        Error::Transport {
            method,
            path,
            detail,
            source: err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Jobs {
        jobs: Vec<u32>,
    }

    fn read(status: u16, body: &str) -> Result<Reply<Jobs>, Error> {
        read_answer(
            &Method::GET,
            "/slurm/v0.0.42/jobs",
            status,
            body.as_bytes().to_vec(),
        )
    }

    #[test]
    fn value_warnings_and_meta_from_one_pass() {
        let reply = read(
            200,
            r#"{"meta": {"slurm": {"release": "26.05.0"}}, "jobs": [1, 2],
                "warnings": [{"description": "w"}], "errors": []}"#,
        )
        .unwrap();
        assert_eq!(reply.value.jobs, [1, 2]);
        assert_eq!(reply.envelope.warnings[0].description.as_deref(), Some("w"));
        assert_eq!(reply.envelope.meta.release.as_deref(), Some("26.05.0"));
    }

    #[test]
    fn errors_with_status_200_win_over_the_value_and_over_a_mismatch() {
        let e2017 = r#"{"errors": [{"error_number": 2017}], "jobs": []}"#;
        assert_eq!(read(200, e2017).unwrap_err().label(), "not_found");
        // The body is not a `Jobs` (no `jobs`), but its errors[] say why.
        let e1007 = r#"{"errors": [{"error_number": 1007}]}"#;
        assert_eq!(read(200, e1007).unwrap_err().label(), "auth");
        let other = r#"{"errors": [{"error_number": 9001}], "jobs": "x"}"#;
        assert_eq!(read(200, other).unwrap_err().label(), "rejected");
    }

    #[test]
    fn error_statuses_and_mismatches() {
        let e1007 = r#"{"errors": [{"error_number": 1007}]}"#;
        assert_eq!(read(511, e1007).unwrap_err().label(), "auth");
        assert_eq!(read(503, "busy").unwrap_err().label(), "http_status");
        let err = read(200, r#"{"jobs": [1, "two"]}"#).unwrap_err();
        let Error::Decode { json_path, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(json_path, "jobs[1]");
    }

    #[test]
    fn non_finite_numbers_are_fixed_when_the_body_fails() {
        #[derive(Debug, serde::Deserialize)]
        struct Level {
            level: Option<f64>,
        }
        let body = br#"{"level": Infinity, "name": "NaN"}"#.to_vec();
        let reply = read_answer::<Level>(&Method::GET, "/x", 200, body).unwrap();
        assert_eq!(reply.value.level, Some(f64::MAX));
    }
}
