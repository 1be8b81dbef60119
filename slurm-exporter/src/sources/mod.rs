//! Collection sources: each fetches one kind of data from slurmrestd and turns it into
//! metric families. A source owns its families: no family is written by two sources.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use clap::ValueEnum;
use slurm_client::{Client, Partition};
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::family::Family;
use refresh::Refresh;
use shared::Shared;

pub mod associations;
pub mod diag;
pub mod job_families;
pub mod jobs;
pub mod labels;
pub mod licenses;
pub mod nodes;
pub mod partitions;
pub mod qos;
pub mod refresh;
pub mod reservations;
pub mod shared;
pub mod shares;

/// The sources, in the order their families appear in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum SourceKind {
    /// Scheduler, backfill and RPC statistics (`sdiag`).
    Diag,
    /// Nodes, their states and resources, and per-partition node counts.
    Nodes,
    /// Jobs by state, reason, partition, account and user, and their resources.
    Jobs,
    /// Partition settings and totals.
    Partitions,
    /// Reservations.
    Reservations,
    /// Licenses.
    Licenses,
    /// Fairshare (`sshare`).
    Shares,
    /// QoS limits and usage (slurmdbd).
    Qos,
    /// Associations (slurmdbd).
    Associations,
}

impl SourceKind {
    /// The label value used in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Diag => "diag",
            SourceKind::Nodes => "nodes",
            SourceKind::Jobs => "jobs",
            SourceKind::Partitions => "partitions",
            SourceKind::Reservations => "reservations",
            SourceKind::Licenses => "licenses",
            SourceKind::Shares => "shares",
            SourceKind::Qos => "qos",
            SourceKind::Associations => "associations",
        }
    }

    /// Whether the source reads slurmdbd (`/slurmdb/`) rather than slurmctld.
    pub fn is_accounting(self) -> bool {
        matches!(self, SourceKind::Qos | SourceKind::Associations)
    }
}

/// Why a collection failed: a short kind for the error counter and a message for logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// `slurm_client::Error::label()`, or `timeout` for the source's own time limit.
    pub kind: &'static str,
    /// What went wrong, in words (never contains a token).
    pub message: String,
}

impl From<slurm_client::Error> for Failure {
    fn from(e: slurm_client::Error) -> Failure {
        Failure {
            kind: e.label(),
            message: e.to_string(),
        }
    }
}

/// What every source gets: the client, the cap on requests in flight, and the listings
/// shared by the sources of the same collection.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// The slurmrestd client.
    pub client: Client,
    permits: Arc<Semaphore>,
    shared: Arc<Shared>,
}

impl Ctx {
    /// A context allowing at most `max_in_flight` requests at once over all sources.
    pub fn new(client: Client, max_in_flight: usize) -> Ctx {
        Ctx {
            client,
            permits: Arc::new(Semaphore::new(max_in_flight)),
            shared: Arc::default(),
        }
    }

    /// The context of the next collection: the same client and cap, nothing shared yet.
    pub fn next_collection(&self) -> Ctx {
        Ctx {
            shared: Arc::default(),
            ..self.clone()
        }
    }

    /// Every partition, fetched once per collection.
    pub async fn partitions(&self) -> Result<Arc<[Partition]>, Failure> {
        self.shared.partitions(self).await
    }

    /// Whether slurmrestd answers a single ping within `limit`, asked once per collection.
    pub async fn reachable(&self, limit: std::time::Duration) -> Result<(), Failure> {
        self.shared.reachable(self, limit).await
    }

    /// Runs one request (one client call) once a slot is free.
    pub async fn call<T, F>(&self, request: F) -> Result<T, slurm_client::Error>
    where
        F: Future<Output = Result<T, slurm_client::Error>>,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        request.await
    }
}

/// What a successful collection produced.
#[derive(Debug)]
pub enum Collected {
    /// New families, replacing the source's previous ones.
    Families(Vec<Family>),
    /// Nothing changed since the last successful collection (change tracking): the
    /// previous families stay, without being rebuilt or rendered again.
    Unchanged,
}

/// The future a source's collection returns.
pub type CollectFuture<'a> = Pin<Box<dyn Future<Output = Result<Collected, Failure>> + Send + 'a>>;

/// One collection source. `collect` may keep state between calls (change tracking); it
/// can be cancelled at any await point by the source's time limit.
pub trait Source: Send {
    /// Which source this is.
    fn kind(&self) -> SourceKind;
    /// Fetches the data and builds the source's families.
    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a>;
}

/// The source of each kind.
pub fn make(kind: SourceKind, config: &Config) -> Box<dyn Source> {
    let refresh = || Refresh::new(config.full_refresh);
    match kind {
        SourceKind::Nodes => Box::new(nodes::Nodes::new(refresh())),
        SourceKind::Jobs => Box::new(jobs::Jobs::new(refresh())),
        SourceKind::Diag => Box::new(diag::DiagSource),
        SourceKind::Partitions => Box::new(partitions::Partitions),
        SourceKind::Reservations => Box::new(reservations::Reservations),
        SourceKind::Licenses => Box::new(licenses::Licenses),
        SourceKind::Shares => Box::new(shares::SharesSource),
        SourceKind::Qos => Box::new(qos::QosSource),
        SourceKind::Associations => Box::new(associations::Associations),
    }
}
