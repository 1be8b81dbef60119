//! The job families, counted one job at a time: a listing streamed from slurmrestd is
//! aggregated as it arrives, and only these per-label counters are kept, never the jobs.

use slurm_client::{Job, JobState};

use super::labels::{mib_to_bytes, partitions_of, state_label};
use crate::family::Family;

/// States reported per partition at 0 when no job is in them (`JobState`'s spellings, lowercased).
const STATES: [&str; 3] = ["pending", "running", "suspended"];

/// The job families being counted.
pub struct JobFamilies {
    count: Family,
    cpus: Family,
    memory: Family,
    gpus: Family,
    nodes: Family,
    pending: Family,
    part_jobs: Family,
    max_nodes: Family,
    max_cpus: Family,
}

impl Default for JobFamilies {
    fn default() -> Self {
        JobFamilies::new()
    }
}

impl JobFamilies {
    /// Families with no job counted yet.
    pub fn new() -> JobFamilies {
        let who = &["partition", "account", "user", "qos", "state"];
        JobFamilies {
            count: Family::gauge(
                "slurm_jobs",
                "Jobs known to slurmctld by partition, account, user, QoS and base state (finished jobs stay until MinJobAge passes). A pending job eligible for several partitions has them all in its partition label.",
                who,
            ),
            cpus: Family::gauge(
                "slurm_jobs_cpus",
                "CPUs allocated to running and suspended jobs, or requested by pending jobs.",
                who,
            ),
            memory: Family::gauge(
                "slurm_jobs_memory_bytes",
                "Memory allocated to running and suspended jobs, or requested by pending jobs.",
                who,
            ),
            gpus: Family::gauge(
                "slurm_jobs_gpus",
                "GPUs allocated to running and suspended jobs, or requested by pending jobs.",
                who,
            ),
            nodes: Family::gauge(
                "slurm_jobs_nodes",
                "Nodes allocated to running and suspended jobs, or requested (at least) by pending jobs.",
                who,
            ),
            pending: Family::gauge(
                "slurm_jobs_pending",
                "Pending jobs by partition and the reason they wait.",
                &["partition", "reason"],
            ),
            part_jobs: Family::gauge(
                "slurm_partition_jobs",
                "Jobs of the partition by base state; a pending job eligible for several partitions counts in each.",
                &["partition", "state"],
            ),
            max_nodes: Family::gauge(
                "slurm_partition_pending_job_max_nodes",
                "The largest node count a pending job of the partition asks for (0 when none is pending).",
                &["partition"],
            ),
            max_cpus: Family::gauge(
                "slurm_partition_pending_job_max_cpus",
                "The largest CPU count a pending job of the partition asks for (0 when none is pending).",
                &["partition"],
            ),
        }
    }

    /// Counts one job.
    pub fn add(&mut self, job: &Job) {
        let state = state_label(job.state.as_str());
        let labels = [
            job.partition.as_deref().unwrap_or(""),
            job.account.as_deref().unwrap_or(""),
            job.user.as_str(),
            job.qos.as_deref().unwrap_or(""),
            state.as_str(),
        ];
        self.count.add(&labels, 1.0);
        if is_active(job) {
            self.cpus.add(&labels, job_cpus(job));
            self.memory
                .add(&labels, job_memory_mib(job).map_or(0.0, mib_to_bytes));
            self.gpus.add(&labels, job.gpus() as f64);
            self.nodes.add(&labels, job_nodes(job));
        }
        for p in partitions_of(job.partition.as_deref()) {
            self.touch_partition(p);
            self.part_jobs.add(&[p, state.as_str()], 1.0);
            if job.is_pending() {
                bump_max(&mut self.max_nodes, p, job_nodes(job));
                bump_max(&mut self.max_cpus, p, job_cpus(job));
            }
        }
        if job.is_pending() {
            let reason = job.reason.as_deref().unwrap_or("None");
            self.pending
                .add(&[job.partition.as_deref().unwrap_or(""), reason], 1.0);
        }
    }

    /// The families; `partitions` are reported even when no job is in them.
    pub fn finish(mut self, partitions: &[String]) -> Vec<Family> {
        for p in partitions {
            self.touch_partition(p);
        }
        vec![
            self.count,
            self.cpus,
            self.memory,
            self.gpus,
            self.nodes,
            self.pending,
            self.part_jobs,
            self.max_nodes,
            self.max_cpus,
        ]
    }

    /// A partition's per-state counts and largest requests exist (at 0 until counted).
    fn touch_partition(&mut self, p: &str) {
        for s in STATES {
            self.part_jobs.touch(&[p, s]);
        }
        self.max_nodes.touch(&[p]);
        self.max_cpus.touch(&[p]);
    }
}

/// Whether a job holds (running, suspended) or asks for (pending) resources.
fn is_active(job: &Job) -> bool {
    matches!(
        job.state,
        JobState::Pending | JobState::Running | JobState::Suspended
    )
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
