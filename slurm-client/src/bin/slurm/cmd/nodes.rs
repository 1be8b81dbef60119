//! `slurm nodes …`: `sinfo -N`, `scontrol show node`, drain/resume/down.

use anyhow::Context as _;
use clap::Subcommand;
use slurm_client::{Client, Node, NodeQuery};

use crate::batch;
use crate::cmd::Context;
use crate::format;
use crate::output::{self, emit};
use crate::table::{Details, Table};

#[derive(Subcommand, Debug)]
pub enum NodesCommand {
    /// List nodes, like `sinfo -N` (JSON: an array of Node).
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// Show one node in detail, like `scontrol show node` (JSON: a Node).
    Show {
        /// Node name.
        name: String,
    },
    /// Drain nodes: running jobs finish, no new ones start (JSON: one {node, action, ok,
    /// error} per node).
    Drain {
        /// Node names (or hostlists such as node[1-3]).
        #[arg(required = true)]
        names: Vec<String>,
        /// Why (shown by sinfo -R).
        #[arg(long, short = 'r', required = true)]
        reason: String,
    },
    /// Return drained, down or failed nodes to service.
    Resume {
        /// Node names (or hostlists).
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Set nodes down now, killing their jobs.
    Down {
        /// Node names (or hostlists).
        #[arg(required = true)]
        names: Vec<String>,
        /// Why.
        #[arg(long, short = 'r', required = true)]
        reason: String,
    },
}

#[derive(clap::Args, Debug, Default)]
pub struct ListArgs {
    /// Only nodes in these states or with these flags, e.g. idle,drain (comma-separated).
    #[arg(long, short = 't', value_delimiter = ',', value_name = "STATE")]
    states: Vec<String>,
    /// Only nodes in these partitions (comma-separated).
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "PARTITION")]
    partitions: Vec<String>,
    /// Include hidden nodes.
    #[arg(long, short = 'a')]
    all: bool,
}

pub async fn run(ctx: &Context, command: Option<NodesCommand>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(NodesCommand::List(ListArgs::default())) {
        NodesCommand::List(args) => list(ctx, &client, args).await,
        NodesCommand::Show { name } => {
            let response = client
                .get_node(&name)
                .await
                .with_context(|| format!("node {name}"))?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, show_node)
        }
        NodesCommand::Drain { names, reason } => {
            batch::each(
                ctx.output,
                "Node",
                "node",
                "drain",
                "draining",
                &names,
                |name| {
                    let (client, name, reason) = (client.clone(), name.clone(), reason.clone());
                    async move { client.drain_node(&name, &reason).await.map(|_| ()) }
                },
            )
            .await
        }
        NodesCommand::Resume { names } => {
            batch::each(
                ctx.output,
                "Node",
                "node",
                "resume",
                "resumed",
                &names,
                |name| {
                    let (client, name) = (client.clone(), name.clone());
                    async move { client.resume_node(&name).await.map(|_| ()) }
                },
            )
            .await
        }
        NodesCommand::Down { names, reason } => {
            batch::each(ctx.output, "Node", "node", "down", "down", &names, |name| {
                let (client, name, reason) = (client.clone(), name.clone(), reason.clone());
                async move { client.down_node(&name, &reason).await.map(|_| ()) }
            })
            .await
        }
    }
}

async fn list(ctx: &Context, client: &Client, args: ListArgs) -> anyhow::Result<()> {
    let query = NodeQuery::new().all(args.all);
    let response = client.list_nodes(&query).await?;
    output::warnings(&response.warnings);
    let nodes: Vec<Node> = response
        .value
        .nodes
        .into_iter()
        .filter(|n| {
            args.states.is_empty()
                || args.states.iter().any(|s| {
                    n.state.as_str().eq_ignore_ascii_case(s)
                        || n.state_flags
                            .iter()
                            .any(|f| f.as_str().eq_ignore_ascii_case(s))
                })
        })
        .filter(|n| {
            args.partitions.is_empty() || n.partitions.iter().any(|p| args.partitions.contains(p))
        })
        .collect();
    emit(ctx.output, &nodes, |nodes| node_table(nodes))
}

fn node_table(nodes: &[Node]) -> String {
    let mut t = Table::new(&[
        "NODE",
        "STATE",
        "CPUS(A/I/T)",
        "MEMORY(A/T)",
        "LOAD",
        "PARTITIONS",
        "REASON",
    ]);
    for n in nodes {
        t.row(vec![
            n.name.clone(),
            state(n),
            format!("{}/{}/{}", n.cpus_allocated, n.cpus_idle, n.cpus),
            format!(
                "{}/{}",
                format::memory_mb(n.memory_allocated_mb),
                format::memory_mb(n.memory_mb)
            ),
            n.cpu_load
                .map(|l| format!("{:.2}", f64::from(l) / 100.0))
                .unwrap_or_else(|| format::NONE.into()),
            format::list(&n.partitions),
            format::opt(n.reason.as_deref()),
        ]);
    }
    t.render()
}

/// The base state with its flags, e.g. `IDLE+DRAIN`.
fn state(node: &Node) -> String {
    std::iter::once(node.state.to_string())
        .chain(node.state_flags.iter().map(ToString::to_string))
        .collect::<Vec<_>>()
        .join("+")
}

fn show_node(n: &Node) -> String {
    let mut d = Details::new();
    d.add("NodeName", n.name.clone())
        .add("Hostname", format::opt(n.hostname.as_deref()))
        .add("Address", format::opt(n.address.as_deref()))
        .add("State", state(n))
        .add("Reason", format::opt(n.reason.as_deref()))
        .add("ReasonSetBy", format::opt(n.reason_set_by.as_deref()))
        .add("ReasonTime", format::time(n.reason_changed_at))
        .add(
            "CPUs",
            format!(
                "{} total, {} allocated, {} idle",
                n.cpus, n.cpus_allocated, n.cpus_idle
            ),
        )
        .add(
            "CPULoad",
            format::opt(n.cpu_load.map(|l| format!("{:.2}", f64::from(l) / 100.0))),
        )
        .add(
            "Topology",
            match (n.sockets, n.cores_per_socket, n.threads_per_core) {
                (Some(s), Some(c), Some(t)) => {
                    format!("{s} sockets x {c} cores x {t} threads")
                }
                _ => String::new(),
            },
        )
        .add(
            "Memory",
            format!(
                "{} total, {} allocated, {} free",
                format::memory_mb(n.memory_mb),
                format::memory_mb(n.memory_allocated_mb),
                n.memory_free_mb
                    .value()
                    .map(format::memory_mb)
                    .unwrap_or_else(|| format::NONE.into())
            ),
        )
        .add("Gres", format::opt(n.gres.as_deref()))
        .add("GresUsed", format::opt(n.gres_used.as_deref()))
        .add("TRES", crate::cmd::tres(&n.tres))
        .add("TRESUsed", crate::cmd::tres(&n.tres_used))
        .add("Features", format::list(&n.features))
        .add("ActiveFeatures", format::list(&n.active_features))
        .add("Partitions", format::list(&n.partitions))
        .add("Reservation", format::opt(n.reservation.as_deref()))
        .add("Weight", format::opt(n.weight))
        .add("Comment", format::opt(n.comment.as_deref()))
        .add("Extra", format::opt(n.extra.as_deref()))
        .add("BootTime", format::time(n.boot_time))
        .add("SlurmdStartTime", format::time(n.slurmd_start_time))
        .add("LastBusy", format::time(n.last_busy))
        .add("Version", format::opt(n.version.as_deref()))
        .add("Arch", format::opt(n.architecture.as_deref()))
        .add("OS", format::opt(n.operating_system.as_deref()));
    d.render()
}
