//! Partitions: configuration and state. Node, CPU and job counts per partition come from
//! the nodes and jobs sources (`slurm_partition_nodes`, `…_cpus`, `…_jobs`).

use slurm_client::{Limit, Partition};

use super::labels::{list_label, state_label};
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The partition source.
pub struct Partitions;

impl Source for Partitions {
    fn kind(&self) -> SourceKind {
        SourceKind::Partitions
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let partitions = ctx.partitions().await?;
            Ok(Collected::Families(families(&partitions)))
        })
    }
}

/// Minutes (`Limit`) as seconds; `None` when unset or unlimited.
pub fn minutes(limit: Limit<u32>) -> Option<f64> {
    limit.value().map(|m| f64::from(m) * 60.0)
}

/// The partition families.
pub fn families(partitions: &[Partition]) -> Vec<Family> {
    let p = &["partition"];
    let mut info = Family::info(
        "slurm_partition",
        "Facts about the partition: state, nodes, QoS, alternate, allowed accounts and QoS.",
        &[
            "partition",
            "state",
            "nodes",
            "qos",
            "alternate",
            "allowed_accounts",
            "allowed_qos",
        ],
    );
    let mut up = Family::gauge(
        "slurm_partition_up",
        "Whether the partition is UP (1) or not (0: DOWN, DRAIN or INACTIVE).",
        p,
    );
    let mut nodes = Family::gauge(
        "slurm_partition_config_nodes",
        "Nodes configured in the partition.",
        p,
    );
    let mut cpus = Family::gauge(
        "slurm_partition_config_cpus",
        "CPUs configured in the partition.",
        p,
    );
    let mut max_time = Family::gauge(
        "slurm_partition_max_time_seconds",
        "Time limit of jobs in the partition (absent when unlimited).",
        p,
    );
    let mut default_time = Family::gauge(
        "slurm_partition_default_time_seconds",
        "Default time limit of jobs in the partition (absent when none).",
        p,
    );
    let mut max_nodes = Family::gauge(
        "slurm_partition_max_nodes_per_job",
        "Most nodes a job of the partition may use (absent when unlimited).",
        p,
    );
    let mut tier = Family::gauge(
        "slurm_partition_priority_tier",
        "Scheduling priority tier of the partition.",
        p,
    );
    let mut factor = Family::gauge(
        "slurm_partition_priority_job_factor",
        "Job priority factor of the partition.",
        p,
    );
    for part in partitions {
        let name = [part.name.as_str()];
        let states: Vec<String> = part.state.iter().map(|s| state_label(s)).collect();
        info.info_series(&[
            part.name.as_str(),
            &list_label(&states),
            part.nodes.as_deref().unwrap_or(""),
            part.qos.as_deref().unwrap_or(""),
            part.alternate.as_deref().unwrap_or(""),
            part.allowed_accounts.as_deref().unwrap_or(""),
            part.allowed_qos.as_deref().unwrap_or(""),
        ]);
        up.set(&name, if part.is_up() { 1.0 } else { 0.0 });
        nodes.set(&name, part.node_count.into());
        cpus.set(&name, part.cpus.into());
        max_time.set_opt(&name, minutes(part.max_time_minutes));
        default_time.set_opt(&name, minutes(part.default_time_minutes));
        max_nodes.set_opt(&name, part.max_nodes.value().map(f64::from));
        tier.set(&name, part.priority_tier.into());
        factor.set(&name, part.priority_job_factor.into());
    }
    vec![
        info,
        up,
        nodes,
        cpus,
        max_time,
        default_time,
        max_nodes,
        tier,
        factor,
    ]
}
