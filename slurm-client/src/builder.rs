//! Configuring and building a [`Client`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use secrecy::SecretSlice;

use crate::auth::TokenProvider;
use crate::client::{Client, Inner};
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::retry::RetryPolicy;
use crate::tls::{self, KeyPem, Pem};
use crate::version::ApiVersion;

/// Builds a [`Client`]. Start with [`ClientBuilder::new`] or [`ClientBuilder::from_env`].
///
/// # Limits
///
/// | setting | default | what happens past it |
/// |---|---|---|
/// | [`connect_timeout`](ClientBuilder::connect_timeout) | 10 s | [`Error::Timeout`] (the attempt) |
/// | [`request_timeout`](ClientBuilder::request_timeout) | 60 s | [`Error::Timeout`] (one attempt, body included; retried when idempotent) |
/// | [`call_timeout`](ClientBuilder::call_timeout) | the request timeout + 30 s (90 s) | [`Error::Timeout`] (the whole call, every retry and wait included) |
/// | [`max_body_bytes`](ClientBuilder::max_body_bytes) | 512 MiB | [`Error::TooLarge`] (reading stops there) |
/// | [`MAX_ERROR_BODY_BYTES`](ClientBuilder::MAX_ERROR_BODY_BYTES) | 64 KiB | [`Error::TooLarge`] for an error answer's body |
///
/// The biggest normal answer is a full job listing: about 8 KiB a job as slurmrestd writes
/// it (recorded 26.05 answers), 155 MiB for 20,000 jobs, so the default body limit leaves
/// room for about 64,000 jobs read whole. A streamed listing ([`Client::for_each_job`]) holds
/// one job at a time and has no limit on the number of jobs: the limit applies to one
/// element and to the answer without its list.
///
/// A server that accepts connections but never answers costs a caller one call timeout,
/// whatever the retry policy (4 attempts of the request timeout before the call timeout
/// existed: about 4 minutes). Programs that poll and must notice a hung server quickly (the
/// operator, the bridge) set a call timeout of a few seconds.
///
/// ```no_run
/// # async fn demo() -> Result<(), slurm_client::Error> {
/// use std::time::Duration;
/// use slurm_client::{ClientBuilder, TokenFile};
///
/// let client = ClientBuilder::new("https://slurmrestd.example:6820")
///     .token(TokenFile::new("/var/run/secrets/slurm/token"))
///     .user_name("slurm")
///     .ca_certificate_file("/etc/slurm/ca.pem")
///     .request_timeout(Duration::from_secs(120))
///     .build()?;
/// println!("talking REST {}", client.version().await?);
/// # Ok(()) }
/// ```
pub struct ClientBuilder {
    url: String,
    url_setting: &'static str,
    token: Option<Arc<dyn TokenProvider>>,
    user_name: Option<String>,
    ca: Option<Pem>,
    identity: Option<(Pem, KeyPem)>,
    connect_timeout: Duration,
    request_timeout: Duration,
    call_timeout: Option<Duration>,
    max_body_bytes: u64,
    retry: RetryPolicy,
    version: Option<ApiVersion>,
    user_agent: String,
}

impl ClientBuilder {
    /// Default connect timeout: 10 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default timeout for a whole request, body included: 60 s (slurmrestd can take
    /// well over 15 s to list many jobs on a busy cluster).
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default deadline of a whole call, retries included, with the default request timeout:
    /// 90 s (one full attempt, and room to retry failures that come quickly). With another
    /// request timeout and no call timeout set, the deadline is that request timeout + 30 s.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(90);
    /// Default limit of a successful answer's body: 512 MiB (a full listing of 20,000 jobs is
    /// about 155 MiB).
    pub const DEFAULT_MAX_BODY_BYTES: u64 = 512 * 1024 * 1024;
    /// Limit of an error answer's body (any status but 2xx): 64 KiB. slurmrestd's error
    /// answers are a few KiB at most; a proxy's HTML error page fits too.
    pub const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

    /// A builder for the server at `url`: `http://host:port`, `https://host:port` (an
    /// optional path prefix is kept) or `unix:/path/to/slurmrestd.socket`.
    pub fn new(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            url_setting: "slurmrestd URL",
            token: None,
            user_name: None,
            ca: None,
            identity: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            call_timeout: None,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            retry: RetryPolicy::default(),
            version: None,
            user_agent: concat!("slurm-client/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }

    /// A builder configured from environment variables; see [the crate docs](crate#environment).
    pub fn from_env() -> Result<ClientBuilder, Error> {
        crate::env::builder_from(&|name| std::env::var_os(name))
    }

    pub(crate) fn url_setting(mut self, name: &'static str) -> ClientBuilder {
        self.url_setting = name;
        self
    }

    /// Sends tokens from `provider` as `X-SLURM-USER-TOKEN`. Without a provider no token
    /// is sent (enough for a Unix socket served with `rest_auth/local`).
    pub fn token(self, provider: impl TokenProvider + 'static) -> ClientBuilder {
        self.token_provider(Arc::new(provider))
    }

    /// Like [`ClientBuilder::token`], for a provider that is already shared.
    pub fn token_provider(mut self, provider: Arc<dyn TokenProvider>) -> ClientBuilder {
        self.token = Some(provider);
        self
    }

    /// Sends `name` as `X-SLURM-USER-NAME` with every request.
    pub fn user_name(mut self, name: impl Into<String>) -> ClientBuilder {
        self.user_name = Some(name.into());
        self
    }

    /// Trusts the CA certificate(s) in this PEM text, in addition to the system's.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> ClientBuilder {
        self.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Trusts the CA certificate(s) in this PEM file (read by [`ClientBuilder::build`]).
    pub fn ca_certificate_file(mut self, path: impl Into<PathBuf>) -> ClientBuilder {
        self.ca = Some(Pem::File(path.into()));
        self
    }

    /// Presents this client certificate and private key (PEM text) to the server.
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<SecretSlice<u8>>,
    ) -> ClientBuilder {
        self.identity = Some((Pem::Bytes(cert.into()), KeyPem::Bytes(key.into())));
        self
    }

    /// Presents the client certificate and key read from these PEM files.
    pub fn client_identity_files(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> ClientBuilder {
        self.identity = Some((Pem::File(cert.into()), KeyPem::File(key.into())));
        self
    }

    /// How long to wait for a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.connect_timeout = timeout;
        self
    }

    /// How long one attempt of a request may take, body included (default 60 s). A request
    /// that is retried has this much for each attempt, all within the
    /// [call timeout](ClientBuilder::call_timeout).
    pub fn request_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.request_timeout = timeout;
        self
    }

    /// The deadline of a whole call: every attempt and every wait between attempts end
    /// within it, and the call fails with [`Error::Timeout`] when it passes, however many
    /// retries remain (a retry whose wait would end after it is not made). Default: the
    /// request timeout + 30 s ([`DEFAULT_CALL_TIMEOUT`](Self::DEFAULT_CALL_TIMEOUT) with the
    /// default request timeout). A streamed listing must end within it too.
    /// [`Request::call_timeout`](crate::Request::call_timeout) overrides it for one request.
    pub fn call_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.call_timeout = Some(timeout);
        self
    }

    /// The most bytes of a successful answer held at once (default
    /// [`DEFAULT_MAX_BODY_BYTES`](Self::DEFAULT_MAX_BODY_BYTES), 512 MiB): a longer body is
    /// not read further and the call fails with [`Error::TooLarge`]. For a streamed listing
    /// it bounds one element and the answer without its list, not the whole stream. Error
    /// answers have their own, lower limit,
    /// [`MAX_ERROR_BODY_BYTES`](Self::MAX_ERROR_BODY_BYTES) (or this one, if lower).
    pub fn max_body_bytes(mut self, limit: u64) -> ClientBuilder {
        self.max_body_bytes = limit;
        self
    }

    /// How idempotent requests are retried (default: [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> ClientBuilder {
        self.retry = policy;
        self
    }

    /// Uses this REST version instead of negotiating the newest common one. It must be
    /// compiled in; the server is still asked (lazily) whether it serves it.
    pub fn version(mut self, version: ApiVersion) -> ClientBuilder {
        self.version = Some(version);
        self
    }

    /// Replaces the `User-Agent` (default `slurm-client/<version>`).
    pub fn user_agent(mut self, agent: impl Into<String>) -> ClientBuilder {
        self.user_agent = agent.into();
        self
    }

    /// Checks the settings, reads certificate files and builds the client. Nothing is
    /// sent to the server yet.
    pub fn build(self) -> Result<Client, Error> {
        let endpoint = Endpoint::parse(&self.url, self.url_setting)?;
        if let Some(v) = self.version.filter(|v| !v.is_compiled()) {
            return Err(Error::Config(format!(
                "REST {v} is not compiled in: enable the cargo feature {}",
                v.feature()
            )));
        }
        let user_name = match &self.user_name {
            Some(name) => Some(HeaderValue::from_str(name).map_err(|_| {
                Error::Config(format!(
                    "user name {name:?} cannot be sent in an HTTP header"
                ))
            })?),
            None => None,
        };

        tls::ensure_crypto_provider();
        let mut http = reqwest::Client::builder()
            .user_agent(self.user_agent.clone())
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout);
        if let Endpoint::Unix(path) = &endpoint {
            http = http.unix_socket(path.clone());
        }
        if let Some(ca) = &self.ca {
            for cert in tls::certificates(ca)? {
                http = http.add_root_certificate(cert);
            }
        }
        if let Some((cert, key)) = &self.identity {
            http = http.identity(tls::identity(cert, key)?);
        }
        let http = http.build().map_err(|e| {
            Error::Config(format!(
                "cannot build HTTP client: {}",
                crate::error::chain(&e)
            ))
        })?;

        Ok(Client::from_inner(Inner {
            http,
            base: endpoint.base_url(),
            endpoint,
            token: self.token,
            user_name,
            retry: self.retry,
            call_timeout: self
                .call_timeout
                .unwrap_or(self.request_timeout.saturating_add(CALL_TIMEOUT_MARGIN)),
            max_body: self.max_body_bytes,
            pinned: self.version,
            negotiated: tokio::sync::OnceCell::new(),
        }))
    }
}

/// What the default call timeout adds to the request timeout: room to retry failures that
/// come quickly (a refused connection, a 503) after a slow attempt.
const CALL_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url)
            .field("token", &self.token)
            .field("user_name", &self.user_name)
            .field("ca", &self.ca)
            .field("identity", &self.identity)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("retry", &self.retry)
            .field("version", &self.version)
            .field("user_agent", &self.user_agent)
            .finish()
    }
}
