//! The NodeSet, its pods and their Kubernetes nodes flattened into the planner's views.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::crd::{NodeSet, ScalingMode, UpdateStrategyType};
use crate::keys::{
    ANNOTATION_CORDONED_BY_OPERATOR, ANNOTATION_NODE_CORDON_REASON, ANNOTATION_POD_CORDON,
    ANNOTATION_POD_DEADLINE, ANNOTATION_POD_DELETION_COST, LABEL_CONTROLLER_REVISION_HASH,
    LABEL_POD_PROTECT, LABEL_SCALING_MODE,
};
use crate::keys::{
    ANNOTATION_FEATURES_SPEC, ANNOTATION_HOSTNAME_OVERRIDE, ANNOTATION_TOPOLOGY_SPEC,
};
use crate::planner::node_sync::Wanted;
use crate::planner::{
    KubeNode, MaxUnavailable, NodeProblem, NodeSetView, Placement, PodPhase, PodView,
    UpdateStrategy,
};

/// The planner's view of `nodeset` at `update_revision`.
pub fn nodeset_view(nodeset: &NodeSet, update_revision: &str) -> NodeSetView {
    let spec = &nodeset.spec;
    let update = match spec.update_strategy_type() {
        // ScheduledUpdate replaces only the pods its reservation holds in maintenance
        // (`plan_scheduled`), never on its own.
        UpdateStrategyType::OnDelete | UpdateStrategyType::ScheduledUpdate => {
            UpdateStrategy::OnDelete
        }
        UpdateStrategyType::RollingUpdate => UpdateStrategy::RollingUpdate {
            max_unavailable: match spec.max_unavailable() {
                IntOrString::Int(n) => MaxUnavailable::Count(n.max(0) as u32),
                IntOrString::String(s) => MaxUnavailable::parse(&s).unwrap_or_default(),
            },
        },
    };
    NodeSetView {
        namespace: nodeset.namespace().unwrap_or_default(),
        name: nodeset.name_any(),
        uid: nodeset.uid().unwrap_or_default(),
        replicas: spec.replicas().max(0) as u32,
        ordinal_padding: spec.ordinal_padding,
        min_ready_seconds: spec.min_ready_seconds.max(0) as u32,
        update,
        workload_disruption_protection: spec.workload_disruption_protection(),
        update_revision: update_revision.to_owned(),
        slurm_topology: false,
    }
}

/// The planner's view of one pod; `nodes` holds the Kubernetes nodes the pods run on; pods
/// whose scaling-mode label is not `mode` are left over from the other mode;
/// `template_topology` is the topology annotation of the NodeSet's pod template.
pub fn pod_view(
    nodeset: &str,
    pod: &Pod,
    nodes: &HashMap<String, Node>,
    mode: ScalingMode,
    propagated_conditions: &[String],
    template_topology: Option<&str>,
) -> PodView {
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
        cordoned_by_operator: annotations
            .get(ANNOTATION_CORDONED_BY_OPERATOR)
            .is_some_and(|v| v == "true"),
        deletion_cost: annotations
            .get(ANNOTATION_POD_DELETION_COST)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        deadline: annotations
            .get(ANNOTATION_POD_DEADLINE)
            .and_then(|v| crate::planner::deadline::parse(v)),
        k8s_node_unschedulable: node
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        k8s_node_cordon_reason: node
            .and_then(|n| n.annotations().get(ANNOTATION_NODE_CORDON_REASON).cloned()),
        k8s_node_problems: node
            .map(|n| node_problems(n, propagated_conditions))
            .unwrap_or_default(),
        protected: labels.get(LABEL_POD_PROTECT).is_some_and(|v| v == "true"),
        wrong_scaling_mode: labels
            .get(LABEL_SCALING_MODE)
            .is_some_and(|m| m != mode.as_str()),
        node_wants: node.map(|n| {
            let annotations = n.annotations();
            Wanted::from_annotations(
                annotations
                    .get(ANNOTATION_TOPOLOGY_SPEC)
                    .map(String::as_str),
                template_topology,
                annotations
                    .get(ANNOTATION_FEATURES_SPEC)
                    .map(String::as_str),
            )
        }),
        topology: annotations.get(ANNOTATION_TOPOLOGY_SPEC).cloned(),
        k8s_node,
        name,
    }
}

/// The node's `True` conditions of the `propagated` types, in the node's order.
fn node_problems(node: &Node, propagated: &[String]) -> Vec<NodeProblem> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.status == "True" && propagated.contains(&c.type_))
        .map(|c| NodeProblem {
            reason: c
                .reason
                .clone()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| c.type_.clone()),
            message: c.message.clone().unwrap_or_default(),
        })
        .collect()
}

/// A Kubernetes node as the DaemonSet decisions see it.
pub fn kube_node(node: &Node) -> KubeNode {
    let spec = node.spec.as_ref();
    let annotations = node.annotations();
    KubeNode {
        name: node.name_any(),
        labels: node.labels().clone(),
        taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        hostname_override: annotations.get(ANNOTATION_HOSTNAME_OVERRIDE).cloned(),
        topology: annotations.get(ANNOTATION_TOPOLOGY_SPEC).cloned(),
    }
}

/// The scheduling constraints of a rendered worker pod spec, plus the daemon tolerations.
pub fn placement(spec: &PodSpec) -> Placement {
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    tolerations.extend(crate::planner::daemon::daemon_tolerations(
        spec.host_network == Some(true),
    ));
    Placement {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required: spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .clone()
            }),
        tolerations,
    }
}

/// The Kubernetes node a DaemonSet-mode pod runs on (`spec.nodeName`) or is pinned to (the
/// `metadata.name` match field of its required node affinity).
pub fn pinned_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec};
    use kube::api::ObjectMeta;

    use super::*;
    use crate::planner::cordon::node_cordoned_reason;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Default::default()
        }
    }

    #[test]
    fn propagated_node_conditions_make_the_cordon_reason() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![
                    condition(
                        "Ready",
                        "True",
                        "KubeletReady",
                        "kubelet is posting ready status",
                    ),
                    condition("GpuUnhealthy", "True", "XidError", "Xid 79 on GPU 3"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
                    condition("KernelDeadlock", "True", "", "task blocked"),
                ]),
                ..Default::default()
            }),
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("ns-0".into()),
                namespace: Some("slurm".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let nodes = HashMap::from([("n1".to_owned(), node)]);
        let propagated = [
            "GpuUnhealthy".to_owned(),
            "DiskPressure".to_owned(),
            "KernelDeadlock".to_owned(),
        ];
        let view = pod_view(
            "ns",
            &pod,
            &nodes,
            ScalingMode::StatefulSet,
            &propagated,
            None,
        );
        assert_eq!(
            node_cordoned_reason(&view, "slurm/ns-0"),
            "(XidError: Xid 79 on GPU 3); (KernelDeadlock: task blocked)"
        );
        // Without the flag: the default reason, as before.
        let view = pod_view("ns", &pod, &nodes, ScalingMode::StatefulSet, &[], None);
        assert_eq!(
            node_cordoned_reason(&view, "slurm/ns-0"),
            "Node (n1) was cordoned, Pod (slurm/ns-0) must be cordoned"
        );
    }
}
