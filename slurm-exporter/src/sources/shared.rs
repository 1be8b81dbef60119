//! Listings more than one source needs, fetched at most once per collection.
//!
//! Every collection (tick) gets a fresh [`Shared`]: the first source to ask for a listing
//! fetches it, the others of the same collection get the same answer (or the same failure).
//! If the asking source is cancelled by its time limit, the next one fetches it instead.

use std::sync::Arc;
use std::time::Duration;

use slurm_client::{Partition, Request};
use tokio::sync::OnceCell;

use super::{Ctx, Failure};

/// The listings of one collection.
#[derive(Debug, Default)]
pub struct Shared {
    partitions: OnceCell<Result<Arc<[Partition]>, Failure>>,
    reachable: OnceCell<Result<(), Failure>>,
}

impl Shared {
    /// Every partition (the jobs and partitions sources both need them).
    pub async fn partitions(&self, ctx: &Ctx) -> Result<Arc<[Partition]>, Failure> {
        self.partitions
            .get_or_init(|| async {
                let list = ctx.call(ctx.client.list_partitions(None)).await?;
                Ok(list.into_value().partitions.into())
            })
            .await
            .clone()
    }

    /// Whether slurmrestd answers at all: one `ping` per collection, tried once (no retries)
    /// within `limit`, outside the cap on requests in flight so that it never waits behind a
    /// listing that is stuck. Asked only about a source whose collection is overdue.
    pub async fn reachable(&self, ctx: &Ctx, limit: Duration) -> Result<(), Failure> {
        self.reachable
            .get_or_init(|| async {
                let ping = async {
                    let version = ctx.client.version().await?;
                    let request = Request::get(format!("/slurm/{version}/ping/"))
                        .idempotent(false)
                        .timeout(limit);
                    ctx.client.request::<serde_json::Value>(request).await
                };
                match tokio::time::timeout(limit, ping).await {
                    Ok(answer) => answer.map(drop).map_err(Failure::from),
                    Err(_) => Err(Failure {
                        kind: "timeout",
                        message: format!("slurmrestd did not answer a ping within {limit:?}"),
                    }),
                }
            })
            .await
            .clone()
    }
}
