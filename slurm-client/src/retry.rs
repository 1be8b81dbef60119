//! How idempotent requests are retried after transient failures.

use std::time::Duration;

use backon::ExponentialBuilder;

/// Bounded exponential backoff with jitter, used only for idempotent requests and only
/// after transport errors, timeouts and HTTP 502/503/504 (never after an authentication
/// failure).
///
/// The default makes up to 3 retries, waiting from 200 ms up to 5 s with jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    max_retries: usize,
    min_delay: Duration,
    max_delay: Duration,
    jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// How many times a request is sent again after the first attempt.
    pub fn max_retries(mut self, n: usize) -> RetryPolicy {
        self.max_retries = n;
        self
    }

    /// The wait before the first retry; later waits double.
    pub fn min_delay(mut self, d: Duration) -> RetryPolicy {
        self.min_delay = d;
        self
    }

    /// The longest wait between two attempts.
    pub fn max_delay(mut self, d: Duration) -> RetryPolicy {
        self.max_delay = d;
        self
    }

    /// Whether a random part is added to each wait, so many clients do not retry in step.
    pub fn jitter(mut self, on: bool) -> RetryPolicy {
        self.jitter = on;
        self
    }

    /// The number of retries allowed.
    pub fn retries(&self) -> usize {
        self.max_retries
    }

    pub(crate) fn backoff(&self) -> ExponentialBuilder {
        let b = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay.max(self.min_delay))
            .with_factor(2.0)
            .with_max_times(self.max_retries);
        if self.jitter { b.with_jitter() } else { b }
    }
}
