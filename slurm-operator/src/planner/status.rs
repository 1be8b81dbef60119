//! NodeSet status counters from the pods and their Slurm nodes.

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;
use slurm_client::model::{Node, NodeState};

use super::conditions::base_state;
use super::view::{NodeSetView, PodView};

/// Pod counters of `NodeSet.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaCounts {
    /// Pods the kubelet reported a phase for (terminating ones included).
    pub replicas: u32,
    /// Running and Ready.
    pub ready: u32,
    /// Running, Ready for `minReadySeconds`.
    pub available: u32,
    /// `replicas - available`.
    pub unavailable: u32,
    /// Not terminating and at the update revision.
    pub updated: u32,
    /// `spec.replicas`.
    pub desired: u32,
}

/// Slurm counters of `NodeSet.status`, over the Slurm nodes of the NodeSet's pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlurmCounts {
    /// Registered Slurm nodes among the pods'.
    pub total: u32,
    /// Base state Idle.
    pub idle: u32,
    /// Base state Allocated or Mixed.
    pub allocated: u32,
    /// Base state Down.
    pub down: u32,
    /// `DRAIN` flag set.
    pub drain: u32,
}

/// All counters; `slurm` is `None` when the Slurm listing failed (keep the old values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeSetCounters {
    pub pods: ReplicaCounts,
    pub slurm: Option<SlurmCounts>,
}

/// Counts the pods.
pub fn replica_counts(nodeset: &NodeSetView, pods: &[PodView], now: Timestamp) -> ReplicaCounts {
    let mut c = ReplicaCounts {
        desired: nodeset.replicas,
        ..ReplicaCounts::default()
    };
    for pod in pods {
        if pod.is_created() {
            c.replicas += 1;
            if !pod.deleting && pod.revision == nodeset.update_revision {
                c.updated += 1;
            }
        }
        if pod.is_running_and_ready() {
            c.ready += 1;
            if pod.is_available(nodeset.min_ready_seconds, now) {
                c.available += 1;
            }
        }
    }
    c.unavailable = c.replicas.saturating_sub(c.available);
    c
}

/// Counts the Slurm nodes that belong to `pods` (each node once).
pub fn slurm_counts(pods: &[PodView], nodes: &HashMap<String, Node>) -> SlurmCounts {
    let names: BTreeSet<&str> = pods.iter().map(|p| p.slurm_node.as_str()).collect();
    let mut c = SlurmCounts::default();
    for node in names.into_iter().filter_map(|n| nodes.get(n)) {
        c.total += 1;
        match base_state(node) {
            Some(NodeState::Idle) => c.idle += 1,
            Some(NodeState::Allocated | NodeState::Mixed) => c.allocated += 1,
            Some(NodeState::Down) => c.down += 1,
            _ => {}
        }
        if node.is_draining() {
            c.drain += 1;
        }
    }
    c
}
