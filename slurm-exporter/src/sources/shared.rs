//! Listings more than one source needs, fetched at most once per collection.
//!
//! Every collection (tick) gets a fresh [`Shared`]: the first source to ask for a listing
//! fetches it, the others of the same collection get the same answer (or the same failure).
//! If the asking source is cancelled by its time limit, the next one fetches it instead.

use std::sync::Arc;

use slurm_client::Partition;
use tokio::sync::OnceCell;

use super::{Ctx, Failure};

/// The listings of one collection.
#[derive(Debug, Default)]
pub struct Shared {
    partitions: OnceCell<Result<Arc<[Partition]>, Failure>>,
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
}
