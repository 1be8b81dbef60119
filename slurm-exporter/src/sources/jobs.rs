//! Jobs: counts by state, reason, partition, account, user and QoS; their resources; the
//! largest pending request per partition (the autoscaling signal).
//!
//! The listing is streamed ([`slurm_client::Client::for_each_job`]): each job is counted as
//! it arrives and dropped, so a 20,000-job listing (~155 MiB of JSON) is never held.

use slurm_client::{Job, JobQuery, StreamedJobs};

use super::job_families::JobFamilies;
use super::refresh::Refresh;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;
use tracing::debug;

/// The job source; follows changes with `update_time`.
pub struct Jobs {
    refresh: Refresh,
}

impl Jobs {
    /// A job source with this full-listing period.
    pub fn new(refresh: Refresh) -> Jobs {
        Jobs { refresh }
    }
}

impl Source for Jobs {
    fn kind(&self) -> SourceKind {
        SourceKind::Jobs
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let since = self.refresh.update_time();
            let mut counted = JobFamilies::new();
            // On an error the partial counts are dropped: the last snapshot stays.
            let listing = fetch(ctx, since, &mut counted).await?;
            if listing.unchanged {
                return Ok(Collected::Unchanged);
            }
            self.refresh.answered(listing.last_update, since.is_none());
            let partitions = partition_names(ctx).await;
            Ok(Collected::Families(counted.finish(&partitions)))
        })
    }
}

async fn fetch(
    ctx: &Ctx,
    since: Option<i64>,
    counted: &mut JobFamilies,
) -> Result<StreamedJobs, slurm_client::Error> {
    let mut query = JobQuery::new();
    query.update_time = since;
    let listing = ctx.client.for_each_job(&query, |job| counted.add(&job));
    Ok(ctx.call(listing).await?.into_value())
}

/// Every partition's name, so that partitions without jobs report 0 pending jobs and a
/// largest request of 0 (an autoscaler needs a 0, not a missing series). Needed only when
/// the jobs changed, and shared with the partitions source; on failure the partitions that
/// have jobs are still reported.
async fn partition_names(ctx: &Ctx) -> Vec<String> {
    match ctx.partitions().await {
        Ok(partitions) => partitions.iter().map(|p| p.name.clone()).collect(),
        Err(e) => {
            debug!(error = %e.message, "partition names unavailable");
            Vec::new()
        }
    }
}

/// The job families of `jobs`; `partitions` are reported even when no job is in them.
pub fn families(jobs: &[Job], partitions: &[String]) -> Vec<Family> {
    let mut counted = JobFamilies::new();
    for job in jobs {
        counted.add(job);
    }
    counted.finish(partitions)
}

#[cfg(test)]
mod tests {
    use super::families;

    #[test]
    fn partitions_without_jobs_report_zero() {
        let families = families(&[], &["gpu".to_owned()]);
        let value = |name: &str, labels: &[&str]| {
            families
                .iter()
                .find(|f| f.name() == name)
                .and_then(|f| f.get(labels))
        };
        assert_eq!(
            value("slurm_partition_pending_job_max_nodes", &["gpu"]),
            Some(0.0)
        );
        assert_eq!(
            value("slurm_partition_pending_job_max_cpus", &["gpu"]),
            Some(0.0)
        );
        assert_eq!(
            value("slurm_partition_jobs", &["gpu", "pending"]),
            Some(0.0)
        );
    }
}
