//! Typed async client for slurmrestd, Slurm's REST API.
//!
//! A [`Client`] talks to one slurmrestd over `http://`, `https://` or a Unix socket
//! (`unix:/path`), authenticates every request with a JWT from a [`TokenProvider`],
//! negotiates the newest REST version that is both compiled in (cargo features
//! `v0_0_40` … `v0_0_45`) and served, retries idempotent requests on transient
//! failures, and maps Slurm's `errors[]` to a single [`Error`] type.
//!
//! ```no_run
//! # async fn demo() -> Result<(), slurm_client::Error> {
//! let client = slurm_client::Client::from_env()?;
//! let negotiated = client.negotiate().await?;
//! println!(
//!     "REST {} on Slurm {}",
//!     negotiated.version,
//!     negotiated.release.as_deref().unwrap_or("?")
//! );
//! let diag = client.get_json(&format!("/slurm/{}/diag", negotiated.version)).await?;
//! println!("{diag:#}");
//! # Ok(()) }
//! ```
//!
//! # Environment
//!
//! [`Client::from_env`] and [`ClientBuilder::from_env`] read:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `SLURM_REST_URL` | required: `http://host:port`, `https://host:port` or `unix:/path/to/socket` |
//! | `SLURM_JWT` | a token (as printed by `scontrol token`; a `SLURM_JWT=` prefix is accepted) |
//! | `SLURM_JWT_FILE` | a file holding the token, re-read whenever it changes |
//! | `SLURM_JWT_KEY` | the cluster's HS256 key file (`jwt_hs256.key`): tokens are minted locally |
//! | `SLURM_JWT_LIFESPAN` | lifespan in seconds of minted tokens (default 1800) |
//! | `SLURM_USER_NAME` | sent as `X-SLURM-USER-NAME`; the user minted tokens stand for |
//! | `SLURM_REST_VERSION` | pin a REST version, e.g. `v0.0.42`, instead of negotiating |
//! | `SLURM_REST_CA_FILE` | extra CA certificate(s) (PEM) for `https://` |
//! | `SLURM_REST_CLIENT_CERT`, `SLURM_REST_CLIENT_KEY` | client certificate and key (PEM) |
//!
//! The first of `SLURM_JWT`, `SLURM_JWT_FILE` and `SLURM_JWT_KEY` that is set is used.
//! One of them is required unless the URL is a Unix socket (served with `rest_auth/local`).
//!
//! # Secrets
//!
//! Tokens and keys are held in [`secrecy`] types: no `Debug` output, log line or error
//! of this crate contains them.

mod auth;
mod builder;
mod classify;
mod client;
mod decode;
mod endpoint;
mod env;
mod envelope;
mod error;
pub mod model;
mod negotiate;
mod nonfinite;
mod ops;
mod request;
mod response;
mod retry;
mod tls;
mod transport;
mod version;

pub use auth::{
    JwtClaims, MintedToken, StaticToken, TokenError, TokenFile, TokenFuture, TokenProvider,
    mint_hs256,
};
pub use builder::ClientBuilder;
pub use client::Client;
pub use envelope::{Meta, SlurmError, SlurmWarning};
pub use error::{Error, ErrorKind};
pub use model::{
    Account, AccountSpec, Association, AssociationLimits, AssociationQuery, ClusterRecord,
    JobRecord, JobRecordQuery, Qos, QosLimits, QosSpec, StepRecord, TresRecord, User, UserSpec,
    Wckey,
};
pub use model::{
    ArrayInfo, ExitCode, Job, JobFlag, JobList, JobQuery, JobState, JobSubmission, JobUpdate,
    Limit, Node, NodeFlag, NodeList, NodeQuery, NodeState, NodeStateChange, NodeUpdate,
    SubmittedJob, Tres,
};
pub use negotiate::Negotiated;
pub use request::{Request, path_segment};
pub use response::Response;
pub use retry::RetryPolicy;
pub use version::{ApiVersion, ParseApiVersionError};

/// Re-exported: the HTTP [`Method`] used in [`Request`] and [`Error`].
pub use reqwest::Method;
/// Re-exported: [`SecretString`](secrecy::SecretString) and friends, used for tokens and keys.
pub use secrecy;

// Generated per-version modules (`slurm_client::v0_0_42`, ...), one cargo feature each;
// see src/generated/mod.rs. Owned by `cargo xtask generate`.
mod generated;
pub use generated::*;
