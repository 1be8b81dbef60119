//! The one error type of the crate, and its short labels for metrics.

use std::fmt;

use reqwest::Method;

use crate::auth::TokenError;
use crate::envelope::SlurmError;
use crate::version::ApiVersion;

/// Everything that can go wrong talking to slurmrestd.
///
/// No variant ever holds a token or key. Use [`Error::kind`] (or [`Error::label`]) to
/// branch on the kind of failure or to label metrics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server refused the credentials: a bad, expired or missing token (HTTP 511 with
    /// Slurm error 1007, HTTP 401, HTTP 403, or HTTP 502 with error 7000 on `/slurmdb/`).
    #[error("{method} {path}: authentication failed (HTTP {status}): {detail}")]
    Auth {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request (without the base URL and query).
        path: String,
        /// HTTP status of the answer.
        status: u16,
        /// What the server said, in words.
        detail: String,
    },

    /// The object (or the REST version in the path) does not exist: HTTP 404, or Slurm
    /// error 2017 ("Invalid job id specified") with any status.
    #[error("{method} {path}: not found (HTTP {status}){}", list(errors))]
    NotFound {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// HTTP status of the answer.
        status: u16,
        /// Every entry of the answer's `errors[]`.
        errors: Vec<SlurmError>,
    },

    /// Slurm rejected the request and said why in `errors[]` (all entries kept).
    #[error("{method} {path}: rejected by Slurm (HTTP {status}){}", list(errors))]
    Rejected {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// HTTP status of the answer (often 500 or 422, sometimes 200).
        status: u16,
        /// Every entry of the answer's `errors[]`.
        errors: Vec<SlurmError>,
    },

    /// slurmrestd could not make sense of the request (HTTP 400 with a plain-text reason).
    #[error("{method} {path}: bad request (HTTP 400): {text}")]
    BadRequest {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// The server's explanation, as sent (shortened if long).
        text: String,
    },

    /// An HTTP error status without any Slurm `errors[]` (e.g. 503 from a proxy).
    #[error("{method} {path}: HTTP {status} from server: {excerpt}")]
    Status {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// HTTP status of the answer.
        status: u16,
        /// The start of the body.
        excerpt: String,
    },

    /// The request could not be sent or its answer not received (connection refused or
    /// reset, TLS failure, body cut short, …).
    #[error("{method} {path}: transport error: {detail}")]
    Transport {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// The whole chain of causes, in words.
        detail: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },

    /// No complete answer arrived in time: the connect timeout, the timeout of one attempt
    /// ([`ClientBuilder::request_timeout`](crate::ClientBuilder::request_timeout)) or the
    /// deadline of the whole call, retries included
    /// ([`ClientBuilder::call_timeout`](crate::ClientBuilder::call_timeout)).
    #[error("{method} {path}: timed out: {detail}")]
    Timeout {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// The whole chain of causes, in words.
        detail: String,
    },

    /// The answer's body is larger than the client accepts: reading stopped at `limit` bytes
    /// (nothing past it is held). The limit is
    /// [`ClientBuilder::max_body_bytes`](crate::ClientBuilder::max_body_bytes) for a
    /// successful answer (for a streamed listing, for one element or for the rest of the
    /// answer), and [`ClientBuilder::MAX_ERROR_BODY_BYTES`](crate::ClientBuilder::MAX_ERROR_BODY_BYTES)
    /// for an error answer.
    #[error("{method} {path}: {what} larger than the limit of {limit} bytes (HTTP {status})")]
    TooLarge {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// HTTP status of the answer.
        status: u16,
        /// What was too large, e.g. `"answer body"`, `"error answer body"` or `"jobs[] element"`.
        what: String,
        /// The limit, in bytes.
        limit: u64,
    },

    /// The answer does not match what the API spec says it should be.
    #[error(
        "{method} {path}: answer does not match the API spec at `{json_path}`: {message}; near: {excerpt}"
    )]
    Decode {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// JSON path of the offending field, e.g. `jobs[3].job_state`.
        json_path: String,
        /// What the decoder expected.
        message: String,
        /// A short piece of the body around the problem.
        excerpt: String,
    },

    /// The request body could not be turned into JSON.
    #[error("{method} {path}: cannot encode request body: {message}")]
    Encode {
        /// HTTP method of the request.
        method: Method,
        /// Path of the request.
        path: String,
        /// What went wrong.
        message: String,
    },

    /// The operation does not exist in the REST version in use.
    #[error("{operation} is not supported by REST {version} (Slurm {})", release.as_deref().unwrap_or("release unknown"))]
    Unsupported {
        /// What was asked for, e.g. `"reservation update"`.
        operation: String,
        /// The REST version in use.
        version: ApiVersion,
        /// The server's Slurm release, if known.
        release: Option<String>,
    },

    /// None of the REST versions tried is served by this slurmrestd.
    #[error("{}", no_common_version(tried))]
    NoCommonVersion {
        /// The versions that were tried (newest first); empty if none is compiled in.
        tried: Vec<ApiVersion>,
    },

    /// The client configuration is wrong (bad URL, unreadable file, missing variable, …).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The token provider could not produce a token.
    #[error("cannot get a Slurm token: {0}")]
    Credentials(#[from] TokenError),
}

/// The kind of an [`Error`], for matching and for metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`Error::Auth`].
    Auth,
    /// See [`Error::NotFound`].
    NotFound,
    /// See [`Error::Rejected`].
    Rejected,
    /// See [`Error::BadRequest`].
    BadRequest,
    /// See [`Error::Status`].
    Status,
    /// See [`Error::Transport`].
    Transport,
    /// See [`Error::Timeout`].
    Timeout,
    /// See [`Error::Decode`].
    Decode,
    /// See [`Error::Encode`].
    Encode,
    /// See [`Error::Unsupported`].
    Unsupported,
    /// See [`Error::NoCommonVersion`].
    NoCommonVersion,
    /// See [`Error::Config`].
    Config,
    /// See [`Error::Credentials`].
    Credentials,
    // Added after the first release: placed last so that the others keep their discriminants.
    /// See [`Error::TooLarge`].
    TooLarge,
}

impl ErrorKind {
    /// A short, stable label, e.g. `"auth"` or `"not_found"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Rejected => "rejected",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Status => "http_status",
            ErrorKind::Transport => "transport",
            ErrorKind::Timeout => "timeout",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Decode => "decode",
            ErrorKind::Encode => "encode",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::NoCommonVersion => "no_common_version",
            ErrorKind::Config => "config",
            ErrorKind::Credentials => "credentials",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Auth { .. } => ErrorKind::Auth,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Rejected { .. } => ErrorKind::Rejected,
            Error::BadRequest { .. } => ErrorKind::BadRequest,
            Error::Status { .. } => ErrorKind::Status,
            Error::Transport { .. } => ErrorKind::Transport,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Encode { .. } => ErrorKind::Encode,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::NoCommonVersion { .. } => ErrorKind::NoCommonVersion,
            Error::Config(_) => ErrorKind::Config,
            Error::Credentials(_) => ErrorKind::Credentials,
        }
    }

    /// A short, stable label for metrics, e.g. `"auth"`; same as `self.kind().as_str()`.
    pub fn label(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Auth { status, .. }
            | Error::NotFound { status, .. }
            | Error::Rejected { status, .. }
            | Error::Status { status, .. }
            | Error::TooLarge { status, .. } => Some(*status),
            Error::BadRequest { .. } => Some(400),
            _ => None,
        }
    }

    /// The entries of the answer's `errors[]` (empty when there were none).
    pub fn slurm_errors(&self) -> &[SlurmError] {
        match self {
            Error::NotFound { errors, .. } | Error::Rejected { errors, .. } => errors,
            _ => &[],
        }
    }

    /// Builds an [`Error::Unsupported`] for `operation` in `version`.
    pub fn unsupported(
        operation: impl Into<String>,
        version: ApiVersion,
        release: Option<String>,
    ) -> Error {
        Error::Unsupported {
            operation: operation.into(),
            version,
            release,
        }
    }

    /// Whether a request about a job (cancel, signal, update) failed because the job has already
    /// ended: Slurm no longer knows it (invalid job id), or it is completing or completed
    /// (ESLURM_ALREADY_DONE, 2021). For a cancel that is the outcome it wanted.
    pub fn is_job_already_ended(&self) -> bool {
        match self {
            Error::NotFound { .. } => true,
            Error::Rejected { errors, .. } => {
                errors.iter().any(|e| e.error_number == Some(ALREADY_DONE))
            }
            _ => false,
        }
    }

    /// Whether trying the same idempotent request again may succeed: transport failures,
    /// timeouts, HTTP 502/503/504 (but not an authentication 502), and Slurm errors saying
    /// slurmrestd could not reach slurmctld (e.g. while it restarts).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport { .. } | Error::Timeout { .. } => true,
            Error::Status { status, .. } => matches!(status, 502..=504),
            Error::Rejected { status, errors, .. } => {
                matches!(status, 502..=504)
                    || errors
                        .iter()
                        .any(|e| e.error_number.is_some_and(is_communication_error))
            }
            _ => false,
        }
    }
}

/// ESLURM_ALREADY_DONE: "Job/step already completing or completed".
const ALREADY_DONE: i64 = 2021;

/// Slurm's "could not talk to the daemon" errors: SLURM_COMMUNICATIONS_*_ERROR (1001–1004),
/// SLURMCTLD_COMMUNICATIONS_* (1800–1804) and SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT (5004).
fn is_communication_error(number: i64) -> bool {
    matches!(number, 1001..=1004 | 1800..=1804 | 5004)
}

fn list(errors: &[SlurmError]) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!(": {}", parts.join("; "))
}

fn no_common_version(tried: &[ApiVersion]) -> String {
    if tried.is_empty() {
        return "no Slurm REST version is compiled in: enable at least one cargo feature v0_0_40 … v0_0_45".into();
    }
    let names: Vec<&str> = tried.iter().map(|v| v.as_str()).collect();
    format!(
        "slurmrestd serves none of the REST versions tried ({}); check the server's Slurm release or the client's cargo features",
        names.join(", ")
    )
}

/// The Display of an error and all its causes, joined with ": ".
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let piece = cause.to_string();
        if !text.contains(&piece) {
            text.push_str(": ");
            text.push_str(&piece);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_stable() {
        let e = Error::Config("x".into());
        assert_eq!(e.label(), "config");
        let e = Error::NotFound {
            method: Method::GET,
            path: "/slurm/v0.0.42/job/9".into(),
            status: 200,
            errors: vec![SlurmError {
                error_number: Some(2017),
                description: Some("Invalid job id".into()),
                ..SlurmError::default()
            }],
        };
        assert_eq!(e.label(), "not_found");
        assert_eq!(e.status(), Some(200));
        let text = e.to_string();
        assert!(
            text.contains("GET /slurm/v0.0.42/job/9") && text.contains("2017"),
            "{text}"
        );
    }

    #[test]
    fn unsupported_names_version_and_release() {
        let e = Error::unsupported(
            "reservation update",
            ApiVersion::V0_0_40,
            Some("24.11.5".into()),
        );
        assert_eq!(
            e.to_string(),
            "reservation update is not supported by REST v0.0.40 (Slurm 24.11.5)"
        );
    }

    #[test]
    fn transient_errors() {
        let status = |status| Error::Status {
            method: Method::GET,
            path: "/".into(),
            status,
            excerpt: String::new(),
        };
        assert!(status(503).is_transient());
        assert!(status(504).is_transient());
        assert!(!status(500).is_transient());
        let auth = Error::Auth {
            method: Method::GET,
            path: "/slurmdb/v0.0.42/jobs".into(),
            status: 502,
            detail: String::new(),
        };
        assert!(!auth.is_transient());
        let rejected = |number| Error::Rejected {
            method: Method::GET,
            path: "/".into(),
            status: 500,
            errors: vec![SlurmError {
                error_number: Some(number),
                ..SlurmError::default()
            }],
        };
        assert!(rejected(1800).is_transient());
        assert!(rejected(1001).is_transient());
        assert!(!rejected(2000).is_transient());
        assert!(!rejected(1007).is_transient());
        assert!(rejected(2021).is_job_already_ended());
        assert!(!rejected(1800).is_job_already_ended());
        assert!(!status(503).is_job_already_ended());
    }
}
