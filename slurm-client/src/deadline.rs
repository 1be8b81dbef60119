//! The deadline of one call: every attempt and every wait between attempts of a request
//! must end before it, so a server that never answers costs one deadline, not one request
//! timeout per attempt.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Inner;
use crate::error::Error;
use crate::request::Request;

/// When the call of `request` must have ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    /// Starts the clock for `request`: its own call timeout, or the client's.
    pub fn start(inner: &Inner, request: &Request) -> Deadline {
        let limit = request.call_timeout.unwrap_or(inner.call_timeout);
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    /// Runs `attempt`, cutting it off with [`Error::Timeout`] at the deadline.
    pub async fn run<X>(
        &self,
        request: &Request,
        attempt: impl Future<Output = Result<X, Error>>,
    ) -> Result<X, Error> {
        match tokio::time::timeout_at(self.at, attempt).await {
            Ok(result) => result,
            Err(_) => Err(self.timeout(request)),
        }
    }

    /// Whether waiting `wait` before another attempt still leaves time for it; a retry that
    /// could only start at or after the deadline is not made (the last error stands).
    pub fn allows(&self, wait: Duration) -> bool {
        Instant::now() + wait < self.at
    }

    /// The [`Error::Timeout`] of a call that reached its deadline.
    pub fn timeout(&self, request: &Request) -> Error {
        Error::Timeout {
            method: request.method.clone(),
            path: request.path.clone(),
            detail: format!(
                "no complete answer within the call deadline of {:?} (retries included)",
                self.limit
            ),
        }
    }
}
