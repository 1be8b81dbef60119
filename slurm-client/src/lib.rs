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
//! use slurm_client::{Client, JobQuery, JobState};
//!
//! let client = Client::from_env()?;
//! let jobs = client.list_jobs(&JobQuery::new().state(JobState::Running)).await?.value;
//! for job in &jobs.jobs {
//!     println!("{} {} {} on {}", job.id, job.name, job.state, job.nodes.as_deref().unwrap_or("-"));
//! }
//! # Ok(()) }
//! ```
//!
//! # The version-neutral API
//!
//! Everything a scheduler bridge, exporter or operator needs is a method on [`Client`]
//! returning plain types from [`model`] — the same whichever REST version was negotiated:
//!
//! | domain | methods |
//! | --- | --- |
//! | jobs | [`list_jobs`](Client::list_jobs), [`for_each_job`](Client::for_each_job) (streamed, for large clusters), [`get_job`](Client::get_job), [`submit_job`](Client::submit_job), [`update_job`](Client::update_job), [`cancel_job`](Client::cancel_job), [`signal_job`](Client::signal_job), [`hold_job`](Client::hold_job), [`release_job`](Client::release_job), [`requeue_job`](Client::requeue_job) |
//! | nodes | [`list_nodes`](Client::list_nodes), [`get_node`](Client::get_node), [`update_node`](Client::update_node), [`drain_node`](Client::drain_node), [`resume_node`](Client::resume_node), [`down_node`](Client::down_node), [`delete_node`](Client::delete_node), [`create_node`](Client::create_node) |
//! | partitions | [`list_partitions`](Client::list_partitions), [`get_partition`](Client::get_partition) |
//! | reservations | [`list_reservations`](Client::list_reservations), [`get_reservation`](Client::get_reservation), [`create_reservation`](Client::create_reservation), [`update_reservation`](Client::update_reservation), [`delete_reservation`](Client::delete_reservation) |
//! | controller | [`diag`](Client::diag), [`ping`](Client::ping), [`reconfigure`](Client::reconfigure), [`licenses`](Client::licenses), [`shares`](Client::shares) |
//! | accounting (slurmdbd) | [`list_accounts`](Client::list_accounts), [`get_account`](Client::get_account), [`create_account`](Client::create_account), [`delete_account`](Client::delete_account), [`list_users`](Client::list_users), [`get_user`](Client::get_user), [`create_user`](Client::create_user), [`delete_user`](Client::delete_user), [`list_associations`](Client::list_associations), [`get_association`](Client::get_association), [`delete_associations`](Client::delete_associations), [`list_qos`](Client::list_qos), [`get_qos`](Client::get_qos), [`put_qos`](Client::put_qos), [`delete_qos`](Client::delete_qos), [`list_clusters`](Client::list_clusters), [`get_cluster`](Client::get_cluster), [`list_tres`](Client::list_tres), [`list_wckeys`](Client::list_wckeys), [`get_wckey`](Client::get_wckey), [`create_wckey`](Client::create_wckey), [`delete_wckey`](Client::delete_wckey), [`job_history`](Client::job_history), [`get_job_record`](Client::get_job_record) |
//! | following changes | [`JobTracker`], [`NodeTracker`] ([`tracking`]) |
//! | hostlists (`node[1-3,5]`) | [`hostlist::expand`], [`hostlist::compress`] (pure functions, no request) |
//!
//! Each returns a [`Response`] (the value plus slurmrestd's warnings and meta). An operation
//! the negotiated version does not have gives [`Error::Unsupported`] (e.g. writing
//! reservations before REST v0.0.43). The raw per-version bindings (`v0_0_4x` modules)
//! and [`Client::request`] remain available for anything else.
//!
//! The lower-level transport, for a request the typed API does not cover:
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
//! | `SLURM_JWT_LIFESPAN` | lifespan of minted tokens, e.g. `1800` (seconds) or `30m` (default 30 minutes) |
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
//!
//! # Stability
//!
//! Semantic versioning covers the version-neutral API on [`Client`] (with
//! [`ClientBuilder`], [`Request`], [`Response`] and [`Error`]), the [`model`] types,
//! [`tracking`], [`hostlist`] and authentication ([`TokenProvider`] and its providers,
//! [`JwtClaims`], [`mint_hs256`], [`verify_hs256`]).
//!
//! - Structs and enums marked `#[non_exhaustive]` may gain fields or variants in a minor
//!   release (a patch release while the crate is 0.x). Read their fields, but build them
//!   with their constructors and setters (e.g. [`JobSubmission::wrap`], [`JobQuery::new`],
//!   [`NodeUpdate::new`], [`JwtClaims::new`]) rather than struct literals, and give a
//!   `match` on such an enum a wildcard arm.
//! - The generated per-version modules (`v0_0_40` … `v0_0_45`) keep the shape progenitor
//!   gives them and change whenever the upstream OpenAPI specs or this crate's overlay
//!   change. Such a change is breaking: while the crate is 0.x it bumps the minor version.
//! - `__bench` and `__fuzz` are hidden from the documentation and are not API.
//! - The minimum supported Rust version is the `rust-version` in Cargo.toml; raising it
//!   is a minor-version change.
//!
//! CI checks semver with `cargo-semver-checks` against the last tagged release.

#![warn(missing_docs)]

#[doc(hidden)]
#[path = "bench.rs"]
pub mod __bench;
#[doc(hidden)]
#[path = "fuzz.rs"]
pub mod __fuzz;
mod auth;
mod body;
mod builder;
mod classify;
mod client;
mod deadline;
mod decode;
mod duration;
mod endpoint;
mod env;
mod envelope;
mod error;
pub mod hostlist;
pub mod model;
mod negotiate;
mod nonfinite;
mod ops;
mod parallel;
mod request;
mod response;
mod retry;
mod stream;
mod tls;
pub mod tracking;
mod transport;
mod version;

pub use auth::{
    JwtClaims, JwtError, MintedToken, StaticToken, TokenError, TokenFile, TokenFuture,
    TokenProvider, mint_hs256, verify_hs256,
};
pub use builder::ClientBuilder;
pub use client::Client;
pub use duration::{InvalidDuration, parse_duration};
pub use envelope::{Meta, SlurmError, SlurmWarning};
pub use error::{Error, ErrorKind};
pub use hostlist::HostlistError;
pub use model::{
    Account, AccountSpec, Association, AssociationLimits, AssociationQuery, ClusterRecord,
    JobRecord, JobRecordQuery, Qos, QosLimits, QosSpec, StepRecord, TresRecord, User, UserSpec,
    Wckey,
};
pub use model::{
    ArrayInfo, BackfillStats, ControllerPing, Diag, ExitCode, GresLayout, Job, JobCounters,
    JobFlag, JobList, JobQuery, JobState, JobStatus, JobSubmission, JobUpdate, License, Limit,
    Node, NodeFlag, NodeLayout, NodeList, NodeQuery, NodeState, NodeStateChange, NodeUpdate,
    Partition, PartitionList, Ping, Reservation, ReservationList, ReservationSpec,
    ReservationUpdate, RpcStat, RpcUserStat, SchedulerStats, Share, Shares, SharesQuery,
    StreamedJobs, SubmittedJob, Tres,
};
pub use negotiate::Negotiated;
pub use request::{Request, path_segment};
pub use response::Response;
pub use retry::RetryPolicy;
pub use tracking::{Change, JobTracker, NodeTracker, Poll, Tracked, Tracker};
pub use version::{ApiVersion, ParseApiVersionError};

/// Re-exported: the HTTP [`Method`] used in [`Request`] and [`Error`].
pub use reqwest::Method;
/// Re-exported: [`SecretString`](secrecy::SecretString) and friends, used for tokens and keys.
pub use secrecy;

// Generated per-version modules (`slurm_client::v0_0_42`, ...), one cargo feature each;
// see src/generated/mod.rs. Owned by `cargo xtask generate`.
mod generated;
pub use generated::*;

/// The README's Rust examples, compiled (and, unless `no_run`, run) by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
