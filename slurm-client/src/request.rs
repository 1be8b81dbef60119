//! A request to slurmrestd, described independently of any REST version's types.

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use serde::Serialize;

/// One request: method, path, query and optional JSON body.
///
/// `GET` requests are treated as idempotent (retried on transient failures); all others
/// are not unless marked with [`Request::idempotent`]. Job submissions must never be.
///
/// ```
/// use slurm_client::Request;
/// let req = Request::get("/slurm/v0.0.42/jobs").query("update_time", 0);
/// assert_eq!(req.path(), "/slurm/v0.0.42/jobs");
/// ```
#[derive(Debug, Clone)]
pub struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    /// Parameters in order; `None` is a bare flag (`?with_assocs`).
    pub(crate) query: Vec<(String, Option<String>)>,
    pub(crate) body: Option<Result<Vec<u8>, String>>,
    pub(crate) idempotent: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) call_timeout: Option<Duration>,
}

impl Request {
    /// A request with `method` to `path` (starting with `/`, already percent-encoded: see
    /// [`path_segment`]).
    pub fn new(method: Method, path: impl Into<String>) -> Request {
        let idempotent = method == Method::GET || method == Method::HEAD;
        Request {
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            idempotent,
            timeout: None,
            call_timeout: None,
        }
    }

    /// A `GET` request (idempotent).
    pub fn get(path: impl Into<String>) -> Request {
        Request::new(Method::GET, path)
    }

    /// A `POST` request (not idempotent unless marked).
    pub fn post(path: impl Into<String>) -> Request {
        Request::new(Method::POST, path)
    }

    /// A `DELETE` request (not idempotent unless marked).
    pub fn delete(path: impl Into<String>) -> Request {
        Request::new(Method::DELETE, path)
    }

    /// Adds a query parameter.
    pub fn query(mut self, key: impl Into<String>, value: impl ToString) -> Request {
        self.query.push((key.into(), Some(value.to_string())));
        self
    }

    /// Adds a bare flag parameter (`?with_assocs`). slurmrestd wants its boolean query
    /// parameters this way: it warns about `with_assocs=true` and reads `with_assocs=` as false.
    pub fn flag(mut self, key: impl Into<String>) -> Request {
        self.query.push((key.into(), None));
        self
    }

    /// Adds a query parameter when `value` is `Some`.
    pub fn query_opt<V: ToString>(self, key: impl Into<String>, value: Option<V>) -> Request {
        match value {
            Some(v) => self.query(key, v),
            None => self,
        }
    }

    /// Sets a JSON body. A body that cannot be serialized makes the request fail with
    /// [`Error::Encode`](crate::Error::Encode) when sent.
    pub fn json<B: Serialize + ?Sized>(mut self, body: &B) -> Request {
        self.body = Some(serde_json::to_vec(body).map_err(|e| e.to_string()));
        self
    }

    /// Sets a body that is already JSON text, sent as it is (e.g. a file a user wrote).
    pub fn json_bytes(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = Some(Ok(body.into()));
        self
    }

    /// Marks whether sending the request twice does no harm, which allows retries.
    pub fn idempotent(mut self, idempotent: bool) -> Request {
        self.idempotent = idempotent;
        self
    }

    /// Overrides the client's request timeout (one attempt) for this request.
    pub fn timeout(mut self, timeout: Duration) -> Request {
        self.timeout = Some(timeout);
        self
    }

    /// Overrides the client's call timeout for this request: the deadline of the whole call,
    /// every attempt and the waits between them included (see
    /// [`ClientBuilder::call_timeout`](crate::ClientBuilder::call_timeout)).
    pub fn call_timeout(mut self, timeout: Duration) -> Request {
        self.call_timeout = Some(timeout);
        self
    }

    /// The HTTP method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The path, without base URL or query.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the request may be retried.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }
}

/// Characters left as they are in a path segment; everything else is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes one path segment (a job id, node or partition name, …) so that it can
/// be put into a [`Request`] path, e.g. `node[1-2]` → `node%5B1-2%5D`.
pub fn path_segment(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_defaults_and_override() {
        assert!(Request::get("/x").is_idempotent());
        assert!(!Request::post("/x").is_idempotent());
        assert!(!Request::delete("/x").is_idempotent());
        assert!(Request::delete("/x").idempotent(true).is_idempotent());
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(path_segment("node[1-2]"), "node%5B1-2%5D");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
        assert_eq!(path_segment("1234_5"), "1234_5");
    }

    #[test]
    fn query_opt_skips_none() {
        let r = Request::get("/x")
            .query_opt("a", Some(1))
            .query_opt::<u8>("b", None);
        assert_eq!(r.query, vec![("a".to_string(), Some("1".to_string()))]);
    }
}
