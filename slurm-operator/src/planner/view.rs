//! What the planner is given: a NodeSet, its pods and the Slurm nodes, already fetched and
//! flattened by the reconciler.

use std::collections::HashMap;

use jiff::Timestamp;
use slurm_client::model::Node;

/// The parts of a NodeSet (StatefulSet scaling mode) the decisions depend on, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSetView {
    pub namespace: String,
    pub name: String,
    /// `metadata.uid`, written into the Slurm node comments (see [`super::pod_info`]).
    pub uid: String,
    /// `spec.replicas` (default 1).
    pub replicas: u32,
    /// `spec.ordinalPadding`: ordinals are zero-padded to this width in pod names.
    pub ordinal_padding: u32,
    /// `spec.minReadySeconds`.
    pub min_ready_seconds: u32,
    pub update: UpdateStrategy,
    /// `spec.workloadDisruptionProtection` (default true).
    pub workload_disruption_protection: bool,
    /// `controller-revision-hash` of the update revision.
    pub update_revision: String,
    /// The Slurm nodes' topology is set from the Kubernetes nodes: the cluster configures a
    /// topology and its nodes have one of their own to set (REST v0.0.43+, Slurm 25.05+).
    pub slurm_topology: bool,
}

impl NodeSetView {
    /// Pod name for `ordinal`: `<name>-<ordinal zero-padded to ordinalPadding>`.
    pub fn pod_name(&self, ordinal: u32) -> String {
        format!(
            "{}-{:0width$}",
            self.name,
            ordinal,
            width = self.ordinal_padding as usize
        )
    }
}

/// `spec.updateStrategy`. `ScheduledUpdate` is not planned here (it needs a reservation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateStrategy {
    RollingUpdate { max_unavailable: MaxUnavailable },
    OnDelete,
}

/// `rollingUpdate.maxUnavailable`, an IntOrString (default `"25%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl Default for MaxUnavailable {
    fn default() -> Self {
        MaxUnavailable::Percent(25)
    }
}

impl MaxUnavailable {
    /// Parses the IntOrString forms `3` / `"3"` / `"25%"`; `None` when malformed.
    pub fn parse(text: &str) -> Option<MaxUnavailable> {
        let text = text.trim();
        match text.strip_suffix('%') {
            Some(p) => p.trim().parse().ok().map(MaxUnavailable::Percent),
            None => text.parse().ok().map(MaxUnavailable::Count),
        }
    }

    /// The number of pods for `total` replicas: a count as is, a percentage rounded up; at
    /// least 1 so that an update always progresses.
    pub fn scaled(self, total: u32) -> u32 {
        let n = match self {
            MaxUnavailable::Count(n) => n,
            MaxUnavailable::Percent(p) => (u64::from(p) * u64::from(total)).div_ceil(100) as u32,
        };
        n.max(1)
    }
}

/// Kubernetes pod phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    /// `status.phase`; `None` for an absent or unrecognised value.
    pub fn parse(text: &str) -> Option<PodPhase> {
        Some(match text {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            _ => return None,
        })
    }
}

/// A True condition of a pod's Kubernetes node whose type is in `--propagated-node-conditions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProblem {
    pub reason: String,
    pub message: String,
}

/// One NodeSet pod, with the Kubernetes node it runs on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodView {
    pub name: String,
    /// From the name `<nodeset>-<n>`; `None` when the name has no ordinal.
    pub ordinal: Option<u32>,
    /// The Slurm node name (the pod's hostname).
    pub slurm_node: String,
    /// `status.phase`; `None` before the kubelet reported one (not yet "created").
    pub phase: Option<PodPhase>,
    /// The Ready condition is True.
    pub ready: bool,
    /// When the Ready condition last became True.
    pub ready_since: Option<Timestamp>,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `controller-revision-hash` label.
    pub revision: String,
    /// Annotation `pod-cordon` is `"true"`.
    pub cordoned: bool,
    /// Annotation `cordoned-by-operator` is `"true"`: the operator set that cordon, not an
    /// administrator.
    pub cordoned_by_operator: bool,
    /// Annotation `pod-deletion-cost` (0 when absent or malformed).
    pub deletion_cost: i32,
    /// Annotation `pod-deadline` (`None` when absent or malformed).
    pub deadline: Option<Timestamp>,
    /// `spec.nodeName`.
    pub k8s_node: Option<String>,
    /// The node has `spec.unschedulable` (cordoned).
    pub k8s_node_unschedulable: bool,
    /// The node's `node-cordon-reason` annotation, unsanitised; `Some("")` when present but empty.
    pub k8s_node_cordon_reason: Option<String>,
    /// The node's propagated problem conditions, in `--propagated-node-conditions` order.
    pub k8s_node_problems: Vec<NodeProblem>,
    /// Label `pod-protect` is `"true"`.
    pub protected: bool,
    /// Label `scaling-mode` is not `StatefulSet`: left over from the other mode.
    pub wrong_scaling_mode: bool,
    /// What its Kubernetes node asks of its Slurm node (topology, features); `None` while the
    /// pod has no node or the node is not known.
    pub node_wants: Option<super::node_sync::Wanted>,
    /// Annotation `topology.slinky.slurm.net/spec` of the pod.
    pub topology: Option<String>,
}

impl PodView {
    /// Has a phase (the kubelet saw it).
    pub fn is_created(&self) -> bool {
        self.phase.is_some()
    }

    /// Running and Ready.
    pub fn is_running_and_ready(&self) -> bool {
        self.phase == Some(PodPhase::Running) && self.ready
    }

    /// Running, Ready and not terminating.
    pub fn is_healthy(&self) -> bool {
        self.is_running_and_ready() && !self.deleting
    }

    /// Ready for at least `min_ready_seconds` (Kubernetes' `IsPodAvailable`).
    pub fn is_available(&self, min_ready_seconds: u32, now: Timestamp) -> bool {
        if !self.ready {
            return false;
        }
        if min_ready_seconds == 0 {
            return true;
        }
        self.ready_since.is_some_and(|since| {
            since
                .checked_add(jiff::SignedDuration::from_secs(i64::from(
                    min_ready_seconds,
                )))
                .is_ok_and(|t| t < now)
        })
    }

    /// Scheduled onto a Kubernetes node.
    pub fn is_assigned(&self) -> bool {
        self.k8s_node.as_deref().is_some_and(|n| !n.is_empty())
    }

    /// `<namespace>/<name>`, as Slinky writes pods in reasons.
    pub(crate) fn key(&self, namespace: &str) -> String {
        format!("{namespace}/{}", self.name)
    }
}

/// The Slurm node listing failed (slurmrestd unreachable, bad token, …): plan nothing that
/// depends on Slurm state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlurmUnavailable;

/// What is known about the Slurm nodes.
#[derive(Debug, Clone, Copy)]
pub enum SlurmView<'a> {
    /// Every Slurm node of the cluster, by name (the full listing, not filtered: a pod whose
    /// node is missing counts as not registered).
    Nodes(&'a HashMap<String, Node>),
    /// The cluster has no REST API configured: Slurm actions are skipped and drains are not
    /// waited for (Slinky's behaviour without a Slurm client).
    NotConfigured,
    /// The listing failed: fail closed.
    Unavailable,
}

impl<'a> From<Result<&'a HashMap<String, Node>, SlurmUnavailable>> for SlurmView<'a> {
    fn from(r: Result<&'a HashMap<String, Node>, SlurmUnavailable>) -> Self {
        match r {
            Ok(nodes) => SlurmView::Nodes(nodes),
            Err(SlurmUnavailable) => SlurmView::Unavailable,
        }
    }
}
