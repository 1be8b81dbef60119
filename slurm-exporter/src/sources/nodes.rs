//! Nodes: counts by state and flag, per-node resources and facts, per-partition totals.

use slurm_client::{Node, NodeList, NodeQuery};

use super::labels::{list_label, mib_to_bytes, state_label};
use super::refresh::Refresh;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// Base states always reported, at 0 when no node is in them (`NodeState`'s spellings, lowercased).
const STATES: [&str; 7] = [
    "idle",
    "mixed",
    "allocated",
    "down",
    "error",
    "future",
    "unknown",
];
/// Flags always reported, at 0 when no node carries them.
const FLAGS: [&str; 8] = [
    "drain",
    "maintenance",
    "not_responding",
    "completing",
    "fail",
    "powered_down",
    "reserved",
    "planned",
];

/// The node source; follows changes with `update_time`.
pub struct Nodes {
    refresh: Refresh,
}

impl Nodes {
    /// A node source with this full-listing period.
    pub fn new(refresh: Refresh) -> Nodes {
        Nodes { refresh }
    }
}

impl Source for Nodes {
    fn kind(&self) -> SourceKind {
        SourceKind::Nodes
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let since = self.refresh.update_time();
            let list = fetch(ctx, since).await?;
            if list.unchanged {
                return Ok(Collected::Unchanged);
            }
            self.refresh.answered(list.last_update, since.is_none());
            Ok(Collected::Families(families(&list.nodes)))
        })
    }
}

async fn fetch(ctx: &Ctx, since: Option<i64>) -> Result<NodeList, slurm_client::Error> {
    let mut query = NodeQuery::new();
    query.update_time = since;
    Ok(ctx.call(ctx.client.list_nodes(&query)).await?.into_value())
}

/// The node families.
pub fn families(nodes: &[Node]) -> Vec<Family> {
    let mut by_state = Family::gauge("slurm_nodes", "Nodes by base state.", &["state"]);
    let mut by_flag = Family::gauge(
        "slurm_nodes_flagged",
        "Nodes carrying a state flag (drain, maintenance, not_responding, …); a node can carry several.",
        &["flag"],
    );
    for s in STATES {
        by_state.touch(&[s]);
    }
    for f in FLAGS {
        by_flag.touch(&[f]);
    }

    let node = &["node"];
    let mut cpus = Family::gauge("slurm_node_cpus", "CPUs of the node.", node);
    let mut cpus_alloc = Family::gauge(
        "slurm_node_cpus_allocated",
        "CPUs of the node allocated to jobs.",
        node,
    );
    let mut cpus_idle = Family::gauge(
        "slurm_node_cpus_idle",
        "CPUs of the node not allocated.",
        node,
    );
    let mut load = Family::gauge(
        "slurm_node_cpu_load",
        "Load average of the node as slurmd reports it.",
        node,
    );
    let mut mem = Family::gauge(
        "slurm_node_memory_bytes",
        "Memory of the node configured for jobs (RealMemory).",
        node,
    );
    let mut mem_alloc = Family::gauge(
        "slurm_node_memory_allocated_bytes",
        "Memory of the node allocated to jobs.",
        node,
    );
    let mut mem_free = Family::gauge(
        "slurm_node_memory_free_bytes",
        "Free memory of the node as its operating system reports it.",
        node,
    );
    let mut gpus = Family::gauge("slurm_node_gpus", "GPUs of the node.", node);
    let mut gpus_alloc = Family::gauge(
        "slurm_node_gpus_allocated",
        "GPUs of the node allocated to jobs.",
        node,
    );
    let mut tres = Family::gauge(
        "slurm_node_tres",
        "Trackable resources of the node other than CPUs and memory (billing, gres/…, license/…).",
        &["node", "tres"],
    );
    let mut tres_alloc = Family::gauge(
        "slurm_node_tres_allocated",
        "Trackable resources of the node other than CPUs and memory allocated to jobs.",
        &["node", "tres"],
    );
    let mut last_busy = Family::gauge(
        "slurm_node_last_busy_timestamp_seconds",
        "When the node last ran a job (Unix time).",
        node,
    );
    let mut info = Family::info(
        "slurm_node",
        "Facts about the node: state and flags, partitions, features, reason, Slurm version.",
        &[
            "node",
            "state",
            "flags",
            "partitions",
            "features",
            "active_features",
            "reason",
            "version",
        ],
    );

    let part_state = &["partition", "state"];
    let mut part_nodes = Family::gauge(
        "slurm_partition_nodes",
        "Nodes of the partition by base state (a node in several partitions counts in each).",
        part_state,
    );
    let mut part_cpus = Family::gauge(
        "slurm_partition_cpus",
        "CPUs of the partition's nodes: allocated, idle (on nodes that can take jobs), other (on nodes down, drained, failing or not responding).",
        part_state,
    );
    let mut part_gpus = Family::gauge(
        "slurm_partition_gpus",
        "GPUs of the partition's nodes: allocated, idle (on nodes that can take jobs), other.",
        part_state,
    );

    for n in nodes {
        let state = state_label(n.state.as_str());
        by_state.add(&[state.as_str()], 1.0);
        let mut flags: Vec<String> = n
            .state_flags
            .iter()
            .map(|f| state_label(f.as_str()))
            .collect();
        flags.sort_unstable();
        flags.dedup();
        for f in &flags {
            by_flag.add(&[f.as_str()], 1.0);
        }

        let name = [n.name.as_str()];
        cpus.set(&name, n.cpus.into());
        cpus_alloc.set(&name, n.cpus_allocated.into());
        cpus_idle.set(&name, n.cpus_idle.into());
        load.set_opt(&name, n.cpu_load.map(|l| f64::from(l) / 100.0));
        mem.set(&name, mib_to_bytes(n.memory_mb));
        mem_alloc.set(&name, mib_to_bytes(n.memory_allocated_mb));
        mem_free.set_opt(&name, n.memory_free_mb.value().map(mib_to_bytes));
        let (g, g_used) = (n.gpus(), n.gpus_used());
        gpus.set(&name, g as f64);
        gpus_alloc.set(&name, g_used as f64);
        for res in n.tres.entries.keys() {
            if let Some(v) = n.tres.count(res).filter(|_| other_tres(res)) {
                tres.set(&[n.name.as_str(), res], v as f64);
                tres_alloc.set(
                    &[n.name.as_str(), res],
                    n.tres_used.count(res).unwrap_or(0) as f64,
                );
            }
        }
        last_busy.set_opt(&name, n.last_busy.map(|t| t as f64));
        info.info_series(&[
            n.name.as_str(),
            state.as_str(),
            &flags.join(","),
            &list_label(&n.partitions),
            &list_label(&n.features),
            &list_label(&n.active_features),
            n.reason.as_deref().unwrap_or(""),
            n.version.as_deref().unwrap_or(""),
        ]);

        let available = n.is_available();
        let cpu_idle = if available {
            f64::from(n.cpus.saturating_sub(n.cpus_allocated))
        } else {
            0.0
        };
        let cpu_other = f64::from(n.cpus.saturating_sub(n.cpus_allocated)) - cpu_idle;
        let gpu_idle = if available {
            g.saturating_sub(g_used) as f64
        } else {
            0.0
        };
        let gpu_other = g.saturating_sub(g_used) as f64 - gpu_idle;
        for p in &n.partitions {
            let p = p.as_str();
            for s in STATES {
                part_nodes.touch(&[p, s]);
            }
            part_nodes.add(&[p, state.as_str()], 1.0);
            part_cpus.add(&[p, "allocated"], n.cpus_allocated.into());
            part_cpus.add(&[p, "idle"], cpu_idle);
            part_cpus.add(&[p, "other"], cpu_other);
            part_gpus.add(&[p, "allocated"], g_used as f64);
            part_gpus.add(&[p, "idle"], gpu_idle);
            part_gpus.add(&[p, "other"], gpu_other);
        }
    }

    vec![
        by_state, by_flag, cpus, cpus_alloc, cpus_idle, load, mem, mem_alloc, mem_free, gpus,
        gpus_alloc, tres, tres_alloc, last_busy, info, part_nodes, part_cpus, part_gpus,
    ]
}

/// Whether a TRES goes into `slurm_node_tres`: CPUs, memory and the GPU total have their
/// own metrics (typed GPUs such as `gres/gpu:a100` do not).
fn other_tres(name: &str) -> bool {
    !matches!(name, "cpu" | "mem" | "gres/gpu")
}
