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

    /// How long a whole request may take, body included (default 60 s).
    pub fn request_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.request_timeout = timeout;
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
            pinned: self.version,
            negotiated: tokio::sync::OnceCell::new(),
        }))
    }
}

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
            .field("retry", &self.retry)
            .field("version", &self.version)
            .field("user_agent", &self.user_agent)
            .finish()
    }
}
