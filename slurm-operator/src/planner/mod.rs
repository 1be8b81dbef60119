//! NodeSet decisions (StatefulSet scaling mode; DaemonSet mode in [`daemon`]), as pure
//! functions of what the reconciler observed: which pods to create, which to drain and then
//! delete, cordon sync between Kubernetes nodes and Slurm drains, `SlurmNodeState*` pod
//! conditions, the `pod-protect` label, `pod-deadline`, the Slurm node comments and the status
//! counters. Nothing here
//! talks to the API server or to Slurm; [`plan::plan`] returns a [`Plan`] that the reconciler
//! applies.
//!
//! Safety rules that hold throughout: a pod is deleted only once its Slurm node is drained
//! and idle (or not registered); when the Slurm listing failed nothing is deleted, drained or
//! undrained; a drain whose reason lacks [`drain::REASON_PREFIX`] belongs to someone else and
//! is never lifted; terminating pods are counted but never acted on.

pub mod adopt;
pub mod claims;
pub mod conditions;
pub mod cordon;
pub mod daemon;
pub mod deadline;
pub mod drain;
pub mod history;
pub mod node_sync;
pub mod pinning;
pub mod plan;
pub mod pod_info;
pub mod prune;
pub mod scheduled;
pub mod status;
pub mod update;
pub mod victims;
pub mod view;

#[cfg(test)]
mod tests;

pub use conditions::{CONDITION_PREFIX, SlurmCondition, slurm_conditions};
pub use daemon::{DaemonInput, DaemonPodToCreate, KubeNode, Placement, daemon_plan};
pub use drain::{Drain, REASON_PREFIX, Undrain};
pub use plan::{
    AnnotationChange, DRAIN_REQUEUE, DeleteReason, Plan, PlanInput, PodConditions, PodToCreate,
    PodToDelete, ProtectChange, RESYNC, plan, plan_scheduled,
};
pub use status::{NodeSetCounters, ReplicaCounts, SlurmCounts};
pub use view::{
    MaxUnavailable, NodeProblem, NodeSetView, PodPhase, PodView, SlurmUnavailable, SlurmView,
    UpdateStrategy,
};
