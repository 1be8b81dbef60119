//! The NodeSet, its pods and their Kubernetes nodes flattened into the planner's views.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::crd::{NodeSet, UpdateStrategyType};
use crate::nodeset::{MaxUnavailable, NodeProblem, NodeSetView, PodPhase, PodView, UpdateStrategy};
use crate::render::labels::{
    ANNOTATION_NODE_CORDON_REASON, ANNOTATION_POD_CORDON, ANNOTATION_POD_DEADLINE,
    ANNOTATION_POD_DELETION_COST, LABEL_CONTROLLER_REVISION_HASH, LABEL_POD_PROTECT,
    LABEL_SCALING_MODE,
};

/// The planner's view of `nodeset` at `update_revision`.
pub fn nodeset_view(nodeset: &NodeSet, update_revision: &str) -> NodeSetView {
    let spec = &nodeset.spec;
    let update = match spec.update_strategy_type() {
        UpdateStrategyType::OnDelete => UpdateStrategy::OnDelete,
        // ScheduledUpdate (a Slurm maintenance reservation) is not built yet: its pods are
        // replaced as with RollingUpdate, one drain at a time.
        _ => UpdateStrategy::RollingUpdate {
            max_unavailable: match spec.max_unavailable() {
                IntOrString::Int(n) => MaxUnavailable::Count(n.max(0) as u32),
                IntOrString::String(s) => MaxUnavailable::parse(&s).unwrap_or_default(),
            },
        },
    };
    NodeSetView {
        namespace: nodeset.namespace().unwrap_or_default(),
        name: nodeset.name_any(),
        replicas: spec.replicas().max(0) as u32,
        ordinal_padding: spec.ordinal_padding,
        min_ready_seconds: spec.min_ready_seconds.max(0) as u32,
        update,
        workload_disruption_protection: spec.workload_disruption_protection(),
        update_revision: update_revision.to_owned(),
    }
}

/// The planner's view of one pod; `nodes` holds the Kubernetes nodes the pods run on.
pub fn pod_view(nodeset: &str, pod: &Pod, nodes: &HashMap<String, Node>) -> PodView {
    let name = pod.name_any();
    let ordinal = name
        .strip_prefix(nodeset)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|n| n.parse().ok());
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let ready_condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let ready = ready_condition.is_some_and(|c| c.status == "True");
    let annotations = pod.annotations();
    let labels = pod.labels();
    let k8s_node = spec
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let node = k8s_node.as_ref().and_then(|n| nodes.get(n));
    PodView {
        ordinal,
        slurm_node: spec
            .and_then(|s| s.hostname.clone())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| name.clone()),
        phase: status
            .and_then(|s| s.phase.as_deref())
            .and_then(PodPhase::parse),
        ready,
        ready_since: ready
            .then(|| {
                ready_condition
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0)
            })
            .flatten(),
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        revision: labels
            .get(LABEL_CONTROLLER_REVISION_HASH)
            .cloned()
            .unwrap_or_default(),
        cordoned: annotations
            .get(ANNOTATION_POD_CORDON)
            .is_some_and(|v| v == "true"),
        deletion_cost: annotations
            .get(ANNOTATION_POD_DELETION_COST)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        deadline: annotations
            .get(ANNOTATION_POD_DEADLINE)
            .and_then(|v| crate::nodeset::deadline::parse(v)),
        k8s_node_unschedulable: node
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        k8s_node_cordon_reason: node
            .and_then(|n| n.annotations().get(ANNOTATION_NODE_CORDON_REASON).cloned()),
        k8s_node_problems: Vec::<NodeProblem>::new(),
        protected: labels.get(LABEL_POD_PROTECT).is_some_and(|v| v == "true"),
        wrong_scaling_mode: labels
            .get(LABEL_SCALING_MODE)
            .is_some_and(|m| m != "StatefulSet"),
        k8s_node,
        name,
    }
}
