//! The one place requests are sent: auth headers, retries, status mapping.

use std::time::Instant;

use backon::Retryable;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use secrecy::ExposeSecret;

use crate::auth::TokenError;
use crate::classify::classify;
use crate::client::Inner;
use crate::endpoint::join;
use crate::envelope::Envelope;
use crate::error::{Error, chain};
use crate::request::Request;

/// Header carrying the JWT.
pub(crate) const TOKEN_HEADER: HeaderName = HeaderName::from_static("x-slurm-user-token");
/// Header carrying the user name.
pub(crate) const USER_HEADER: HeaderName = HeaderName::from_static("x-slurm-user-name");

/// A successful (2xx, no `errors[]`) answer, not yet decoded.
pub(crate) struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub envelope: Envelope,
}

/// Sends `request`, retrying transient failures when it is idempotent.
pub(crate) async fn execute(inner: &Inner, request: &Request) -> Result<Reply, Error> {
    let once = || attempt(inner, request);
    if !request.idempotent || inner.retry.retries() == 0 {
        return once().await;
    }
    once.retry(inner.retry.backoff())
        .sleep(tokio::time::sleep)
        .when(Error::is_transient)
        .notify(|err, wait| {
            tracing::warn!(
                method = %request.method,
                path = %request.path,
                error = %err,
                kind = err.label(),
                wait_ms = wait.as_millis() as u64,
                "retrying slurmrestd request"
            );
        })
        .await
}

async fn attempt(inner: &Inner, request: &Request) -> Result<Reply, Error> {
    let started = Instant::now();
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

    let response = builder
        .send()
        .await
        .map_err(|e| network_error(request, e))?;
    let status = response.status().as_u16();
    let body = response
        .bytes()
        .await
        .map_err(|e| network_error(request, e))?
        .to_vec();
    tracing::debug!(
        method = %request.method,
        path = %request.path,
        status,
        bytes = body.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "slurmrestd answered"
    );
    let body = crate::nonfinite::sanitize(&body).unwrap_or(body);
    let envelope = Envelope::parse(&body);
    if let Some(err) = classify(&request.method, &request.path, status, &body, &envelope) {
        return Err(err);
    }
    Ok(Reply {
        status,
        body,
        envelope,
    })
}

fn network_error(request: &Request, err: reqwest::Error) -> Error {
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
