//! The client: a cheap-to-clone handle shared by every request.

use std::sync::Arc;

use reqwest::header::HeaderValue;
use serde::de::DeserializeOwned;
use url::Url;

use crate::auth::TokenProvider;
use crate::builder::ClientBuilder;
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::negotiate::{self, Negotiated};
use crate::request::Request;
use crate::response::Response;
use crate::retry::RetryPolicy;
use crate::transport;
use crate::version::ApiVersion;

/// A client for one slurmrestd. Cloning is cheap and clones share connections and the
/// negotiated version.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub http: reqwest::Client,
    pub endpoint: Endpoint,
    pub base: Url,
    pub token: Option<Arc<dyn TokenProvider>>,
    pub user_name: Option<HeaderValue>,
    pub retry: RetryPolicy,
    /// The deadline of one call, retries included.
    pub call_timeout: std::time::Duration,
    /// The most bytes of an answer held at once.
    pub max_body: u64,
    pub pinned: Option<ApiVersion>,
    pub negotiated: tokio::sync::OnceCell<Negotiated>,
}

impl Client {
    pub(crate) fn from_inner(inner: Inner) -> Client {
        Client {
            inner: Arc::new(inner),
        }
    }

    /// The shared state, for the crate's own request paths (e.g. streamed listings).
    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// A builder for the server at `url` (see [`ClientBuilder::new`]).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// A client configured from environment variables; see [the crate docs](crate#environment).
    pub fn from_env() -> Result<Client, Error> {
        ClientBuilder::from_env()?.build()
    }

    /// The server address, e.g. `http://127.0.0.1:6820/` or `unix:/run/slurmrestd.sock`.
    pub fn endpoint(&self) -> String {
        self.inner.endpoint.to_string()
    }

    /// The version pinned with [`ClientBuilder::version`], if any.
    pub fn pinned_version(&self) -> Option<ApiVersion> {
        self.inner.pinned
    }

    /// Finds the REST version to use — the pinned one, or the newest version both compiled
    /// in and served — and the server's Slurm release. Done once, on first need; later
    /// calls return the stored result.
    pub async fn negotiate(&self) -> Result<Negotiated, Error> {
        self.inner
            .negotiated
            .get_or_try_init(|| negotiate::negotiate(self))
            .await
            .cloned()
    }

    /// The REST version in use (negotiating first if needed).
    pub async fn version(&self) -> Result<ApiVersion, Error> {
        Ok(self.negotiate().await?.version)
    }

    /// The server's Slurm release, e.g. `"24.11.5"` (negotiating first if needed).
    pub async fn release(&self) -> Result<Option<String>, Error> {
        Ok(self.negotiate().await?.release)
    }

    /// Every known REST version the server serves, compiled in or not, oldest first
    /// (one ping per version).
    pub async fn served_versions(&self) -> Result<Vec<ApiVersion>, Error> {
        negotiate::served_versions(self).await
    }

    /// An [`Error::Unsupported`] for `operation` in the negotiated version, for domain code
    /// that finds an operation missing from the version in use.
    pub async fn unsupported(&self, operation: impl Into<String>) -> Error {
        match self.negotiate().await {
            Ok(n) => Error::unsupported(operation, n.version, n.release),
            Err(e) => e,
        }
    }

    /// Sends `request` and decodes a successful answer as `T`.
    ///
    /// This is what every typed operation goes through: the token is fetched, the answer's
    /// status and `errors[]` are mapped to [`Error`], idempotent requests are retried on
    /// transient failures, and a body that does not match `T` gives [`Error::Decode`] with
    /// the JSON path of the offending field. `warnings[]` and `meta` come back in the
    /// [`Response`].
    pub async fn request<T: DeserializeOwned>(
        &self,
        request: Request,
    ) -> Result<Response<T>, Error> {
        Ok(transport::execute::<T>(&self.inner, &request).await?.into())
    }

    /// `GET`s `path` (which may include a `?query`) and returns the body as JSON — the raw
    /// escape hatch, e.g. `client.get_json("/slurm/v0.0.42/diag")`. Errors are mapped as
    /// for [`Client::request`]; warnings stay in the returned JSON.
    pub async fn get_json(&self, path: &str) -> Result<serde_json::Value, Error> {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let mut request = Request::get(path);
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            request = request.query(k, v);
        }
        Ok(self.request(request).await?.value)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = &self.inner;
        f.debug_struct("Client")
            .field("endpoint", &i.endpoint.to_string())
            .field("token", &i.token)
            .field("user_name", &i.user_name)
            .field("retry", &i.retry)
            .field("call_timeout", &i.call_timeout)
            .field("max_body", &i.max_body)
            .field("pinned", &i.pinned)
            .field("negotiated", &i.negotiated.get())
            .finish_non_exhaustive()
    }
}
