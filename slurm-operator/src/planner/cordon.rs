//! Kubernetes → Slurm cordon sync for one pod that is staying (not condemned).
//!
//! A cordoned Kubernetes node drains the Slurm nodes of its pods; the `pod-cordon`
//! annotation drains one pod's Slurm node; otherwise the operator's own drain is lifted.
//! Slurm nodes drained by someone else, or down because slurmd stopped answering, are left
//! alone.

use slurm_client::model::Node;

use super::drain::{
    Drain, ExistingReason, Undrain, drain, operator_reason, reason_is_ours, resume,
    sanitize_reason, undrain,
};
use super::view::PodView;

/// What cordon sync wants for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CordonSync {
    /// New value of the `pod-cordon` annotation, if it changes.
    pub cordon: Option<bool>,
    pub drain: Option<Drain>,
    pub undrain: Option<Undrain>,
}

/// `Pod (<ns>/<pod>) was cordoned`.
pub fn pod_cordoned_reason(pod_key: &str) -> String {
    format!("Pod ({pod_key}) was cordoned")
}

/// `Pod (<ns>/<pod>) was uncordoned`.
pub fn pod_uncordoned_reason(pod_key: &str) -> String {
    format!("Pod ({pod_key}) was uncordoned")
}

/// The reason for a drain caused by the pod's Kubernetes node being cordoned: the node's
/// `node-cordon-reason` annotation (sanitised), else its propagated problem conditions as
/// `(<reason>: <message>)` joined by `; `, else `Node (<node>) was cordoned, Pod (<ns>/<pod>)
/// must be cordoned`.
pub fn node_cordoned_reason(pod: &PodView, pod_key: &str) -> String {
    if let Some(text) = &pod.k8s_node_cordon_reason {
        return sanitize_reason(text);
    }
    if !pod.k8s_node_problems.is_empty() {
        let joined: Vec<String> = pod
            .k8s_node_problems
            .iter()
            .map(|p| format!("({}: {})", p.reason, p.message))
            .collect();
        return sanitize_reason(&joined.join("; "));
    }
    format!(
        "Node ({}) was cordoned, Pod ({pod_key}) must be cordoned",
        pod.k8s_node.as_deref().unwrap_or_default()
    )
}

/// Cordon sync for `pod` (not terminating, not condemned) whose Slurm node is `node`
/// (`None`: not registered, nothing to do).
///
/// A cordon is the administrator's when the operator did not mark it as its own and the Slurm
/// node is undrained or drained for it ("was cordoned"): it stays. Any other cordon of a pod
/// that is staying was the operator's (its Kubernetes node was cordoned, or it was condemned and
/// then kept); that cause is gone, so it is lifted with the drain.
pub fn sync(pod: &PodView, node: Option<&Node>, pod_key: &str) -> CordonSync {
    let mut out = CordonSync::default();
    let Some(node) = node else { return out };
    if !pod.is_assigned() || node.is_down_not_responding() || !reason_is_ours(node) {
        return out;
    }
    if pod.k8s_node_unschedulable {
        if !pod.cordoned {
            out.cordon = Some(true);
        }
        out.drain = drain(
            node,
            &node_cordoned_reason(pod, pod_key),
            ExistingReason::Keep,
        );
        return out;
    }
    if pod.cordoned {
        let current = node.reason.as_deref().unwrap_or_default();
        let annotated = operator_reason(&pod_cordoned_reason(pod_key));
        let administrators =
            !pod.cordoned_by_operator && (current.is_empty() || current == annotated);
        if administrators {
            out.drain = drain(node, &pod_cordoned_reason(pod_key), ExistingReason::Keep);
            return out;
        }
        out.cordon = Some(false);
    } else if pod.cordoned_by_operator {
        // The administrator lifted the operator's cordon: only the mark is left to remove.
        out.cordon = Some(false);
    }
    if pod.is_healthy()
        && let Some(resume) = resume(node, &pod_uncordoned_reason(pod_key))
    {
        out.undrain = Some(resume);
        return out;
    }
    out.undrain = undrain(node, &pod_uncordoned_reason(pod_key));
    out
}
