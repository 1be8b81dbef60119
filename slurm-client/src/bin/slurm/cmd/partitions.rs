//! `slurm partitions …`: the queues (`sinfo -s`, `scontrol show partition`).

use anyhow::Context as _;
use clap::Subcommand;
use slurm_client::Partition;

use crate::cmd::Context;
use crate::format;
use crate::output::{self, emit};
use crate::table::{Details, Table};

#[derive(Subcommand, Debug)]
pub enum PartitionsCommand {
    /// List partitions (the default; JSON: an array of Partition).
    #[command(visible_alias = "ls")]
    List,
    /// Show one partition in detail (JSON: a Partition).
    Show {
        /// Partition name.
        name: String,
    },
}

pub async fn run(ctx: &Context, command: Option<PartitionsCommand>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(PartitionsCommand::List) {
        PartitionsCommand::List => {
            let response = client.list_partitions(None).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value.partitions, |p| table(p))
        }
        PartitionsCommand::Show { name } => {
            let response = client
                .get_partition(&name)
                .await
                .with_context(|| format!("partition {name}"))?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, show)
        }
    }
}

fn table(partitions: &[Partition]) -> String {
    let mut t = Table::new(&[
        "PARTITION",
        "STATE",
        "NODES",
        "CPUS",
        "DEFAULT_TIME",
        "MAX_TIME",
        "NODELIST",
    ]);
    for p in partitions {
        t.row(vec![
            p.name.clone(),
            format::list(&p.state),
            p.node_count.to_string(),
            p.cpus.to_string(),
            format::minutes(p.default_time_minutes),
            format::minutes(p.max_time_minutes),
            format::opt(p.nodes.as_deref()),
        ]);
    }
    t.render()
}

fn show(p: &Partition) -> String {
    let mut d = Details::new();
    d.add("PartitionName", p.name.clone())
        .add("State", format::list(&p.state))
        .add("Nodes", format::opt(p.nodes.as_deref()))
        .add("TotalNodes", p.node_count.to_string())
        .add("TotalCPUs", p.cpus.to_string())
        .add("DefaultTime", format::minutes(p.default_time_minutes))
        .add("MaxTime", format::minutes(p.max_time_minutes))
        .add("MinNodes", p.min_nodes.to_string())
        .add("MaxNodes", format::limit(p.max_nodes))
        .add("MaxCPUsPerNode", format::limit(p.max_cpus_per_node))
        .add("PriorityTier", p.priority_tier.to_string())
        .add("PriorityJobFactor", p.priority_job_factor.to_string())
        .add("QOS", format::opt(p.qos.as_deref()))
        .add("AllowAccounts", format::opt(p.allowed_accounts.as_deref()))
        .add("DenyAccounts", format::opt(p.denied_accounts.as_deref()))
        .add("AllowGroups", format::opt(p.allowed_groups.as_deref()))
        .add("AllowQOS", format::opt(p.allowed_qos.as_deref()))
        .add("TRES", super::tres(&p.tres))
        .add(
            "TRESBillingWeights",
            format::opt(p.billing_weights.as_deref()),
        )
        .add("Alternate", format::opt(p.alternate.as_deref()))
        .add(
            "GraceTime",
            if p.grace_time > 0 {
                format!("{}s", p.grace_time)
            } else {
                String::new()
            },
        )
        .add("Cluster", format::opt(p.cluster.as_deref()));
    d.render()
}
