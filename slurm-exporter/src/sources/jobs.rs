//! Jobs: counts by state, reason, partition, account, user and QoS; their resources; the
//! largest pending request per partition (the autoscaling signal).

use slurm_client::{Job, JobList, JobQuery, JobState};

use super::labels::{mib_to_bytes, partitions_of, state_label};
use super::refresh::Refresh;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;
use tracing::debug;

/// States reported per partition at 0 when no job is in them (`JobState`'s spellings, lowercased).
const STATES: [&str; 3] = ["pending", "running", "suspended"];

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
            let list = fetch(ctx, since).await?;
            if list.unchanged {
                return Ok(Collected::Unchanged);
            }
            self.refresh.answered(list.last_update, since.is_none());
            let partitions = partition_names(ctx).await;
            Ok(Collected::Families(families(&list.jobs, &partitions)))
        })
    }
}

/// Whether a job holds (running, suspended) or asks for (pending) resources.
fn is_active(job: &Job) -> bool {
    matches!(
        job.state,
        JobState::Pending | JobState::Running | JobState::Suspended
    )
}

async fn fetch(ctx: &Ctx, since: Option<i64>) -> Result<JobList, slurm_client::Error> {
    let query = JobQuery {
        update_time: since,
        ..JobQuery::default()
    };
    Ok(ctx.call(ctx.client.list_jobs(&query)).await?.into_value())
}

/// Every partition's name, so that partitions without jobs report 0 pending jobs and a
/// largest request of 0 (an autoscaler needs a 0, not a missing series). Asked only when
/// the jobs changed; on failure the partitions that have jobs are still reported.
async fn partition_names(ctx: &Ctx) -> Vec<String> {
    match ctx.call(ctx.client.list_partitions(None)).await {
        Ok(list) => list
            .into_value()
            .partitions
            .into_iter()
            .map(|p| p.name)
            .collect(),
        Err(e) => {
            debug!(error = %e, "partition names unavailable");
            Vec::new()
        }
    }
}

/// The job families; `partitions` are reported even when no job is in them.
pub fn families(jobs: &[Job], partitions: &[String]) -> Vec<Family> {
    let who = &["partition", "account", "user", "qos", "state"];
    let mut count = Family::gauge(
        "slurm_jobs",
        "Jobs known to slurmctld by partition, account, user, QoS and base state (finished jobs stay until MinJobAge passes). A pending job eligible for several partitions has them all in its partition label.",
        who,
    );
    let mut cpus = Family::gauge(
        "slurm_jobs_cpus",
        "CPUs allocated to running and suspended jobs, or requested by pending jobs.",
        who,
    );
    let mut memory = Family::gauge(
        "slurm_jobs_memory_bytes",
        "Memory allocated to running and suspended jobs, or requested by pending jobs.",
        who,
    );
    let mut gpus = Family::gauge(
        "slurm_jobs_gpus",
        "GPUs allocated to running and suspended jobs, or requested by pending jobs.",
        who,
    );
    let mut nodes = Family::gauge(
        "slurm_jobs_nodes",
        "Nodes allocated to running and suspended jobs, or requested (at least) by pending jobs.",
        who,
    );
    let mut pending = Family::gauge(
        "slurm_jobs_pending",
        "Pending jobs by partition and the reason they wait.",
        &["partition", "reason"],
    );
    let mut part_jobs = Family::gauge(
        "slurm_partition_jobs",
        "Jobs of the partition by base state; a pending job eligible for several partitions counts in each.",
        &["partition", "state"],
    );
    let mut max_nodes = Family::gauge(
        "slurm_partition_pending_job_max_nodes",
        "The largest node count a pending job of the partition asks for (0 when none is pending).",
        &["partition"],
    );
    let mut max_cpus = Family::gauge(
        "slurm_partition_pending_job_max_cpus",
        "The largest CPU count a pending job of the partition asks for (0 when none is pending).",
        &["partition"],
    );

    for p in partitions {
        for s in STATES {
            part_jobs.touch(&[p, s]);
        }
        max_nodes.touch(&[p]);
        max_cpus.touch(&[p]);
    }
    for job in jobs {
        let state = state_label(job.state.as_str());
        let labels = [
            job.partition.as_deref().unwrap_or(""),
            job.account.as_deref().unwrap_or(""),
            job.user.as_str(),
            job.qos.as_deref().unwrap_or(""),
            state.as_str(),
        ];
        count.add(&labels, 1.0);
        if is_active(job) {
            cpus.add(&labels, job_cpus(job));
            memory.add(&labels, job_memory_mib(job).map_or(0.0, mib_to_bytes));
            gpus.add(&labels, job.gpus() as f64);
            nodes.add(&labels, job_nodes(job));
        }
        for p in partitions_of(job.partition.as_deref()) {
            for s in STATES {
                part_jobs.touch(&[p, s]);
            }
            part_jobs.add(&[p, state.as_str()], 1.0);
            max_nodes.touch(&[p]);
            max_cpus.touch(&[p]);
            if job.is_pending() {
                bump_max(&mut max_nodes, p, job_nodes(job));
                bump_max(&mut max_cpus, p, job_cpus(job));
            }
        }
        if job.is_pending() {
            let reason = job.reason.as_deref().unwrap_or("None");
            pending.add(&[job.partition.as_deref().unwrap_or(""), reason], 1.0);
        }
    }

    vec![
        count, cpus, memory, gpus, nodes, pending, part_jobs, max_nodes, max_cpus,
    ]
}

fn bump_max(family: &mut Family, partition: &str, value: f64) {
    if family.get(&[partition]).is_none_or(|v| v < value) {
        family.set(&[partition], value);
    }
}

/// CPUs allocated, else requested.
fn job_cpus(job: &Job) -> f64 {
    job.tres_allocated
        .count("cpu")
        .or_else(|| job.cpus.value().map(u64::from))
        .or_else(|| job.tres_requested.count("cpu"))
        .unwrap_or(0) as f64
}

/// Nodes allocated, else requested.
fn job_nodes(job: &Job) -> f64 {
    job.tres_allocated
        .count("node")
        .or_else(|| job.node_count.value().map(u64::from))
        .or_else(|| job.tres_requested.count("node"))
        .unwrap_or(0) as f64
}

/// Memory (MiB) allocated, else requested.
fn job_memory_mib(job: &Job) -> Option<u64> {
    job.tres_allocated
        .memory_mb()
        .or_else(|| job.tres_requested.memory_mb())
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
