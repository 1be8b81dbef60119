//! Partitions (queues).

use serde::Serialize;

use super::{Limit, Tres};

/// A partition (`scontrol show partition`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Partition {
    /// Partition name.
    pub name: String,
    /// States, e.g. `["UP"]`, `["DRAIN"]`, `["INACTIVE"]`.
    pub state: Vec<String>,
    /// Nodes as configured, e.g. `"node[1-4]"`.
    pub nodes: Option<String>,
    /// Number of nodes.
    pub node_count: u32,
    /// Number of CPUs.
    pub cpus: u32,
    /// Default time limit of its jobs in minutes.
    pub default_time_minutes: Limit<u32>,
    /// Maximum time limit in minutes.
    pub max_time_minutes: Limit<u32>,
    /// Maximum nodes per job.
    pub max_nodes: Limit<u32>,
    /// Minimum nodes per job.
    pub min_nodes: u32,
    /// Maximum CPUs per node.
    pub max_cpus_per_node: Limit<u32>,
    /// Priority tier (scheduling order between partitions).
    pub priority_tier: u32,
    /// Priority job factor.
    pub priority_job_factor: u32,
    /// QOS whose limits apply to all its jobs.
    pub qos: Option<String>,
    /// Accounts allowed (comma-separated; `None`: all).
    pub allowed_accounts: Option<String>,
    /// Accounts denied.
    pub denied_accounts: Option<String>,
    /// Groups allowed.
    pub allowed_groups: Option<String>,
    /// QOS allowed.
    pub allowed_qos: Option<String>,
    /// Trackable resources it has.
    pub tres: Tres,
    /// TRES billing weights, as configured.
    pub billing_weights: Option<String>,
    /// Alternate partition.
    pub alternate: Option<String>,
    /// Grace time in seconds for preempted jobs.
    pub grace_time: u32,
    /// The cluster it belongs to.
    pub cluster: Option<String>,
}

impl Partition {
    /// Whether it is up (accepts and runs jobs).
    pub fn is_up(&self) -> bool {
        self.state.iter().any(|s| s == "UP")
    }
}

/// The answer to a partition listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PartitionList {
    /// The partitions.
    pub partitions: Vec<Partition>,
    /// When slurmctld produced the list.
    pub last_update: Option<i64>,
    /// True when `update_time` was given and nothing changed since (HTTP 304).
    pub unchanged: bool,
}
