//! Which Slurm nodes a workload must not get, by what Kubernetes says about its nodes: taints
//! and tolerations, `nodeSelector`, required node affinity, cordons, readiness and the node's
//! pod capacity. Slurm nodes that no Kubernetes node stands for are excluded too: no kubelet
//! could run the pod there. The result goes into the job's `excluded_nodes` at its submission,
//! and again while it pends whenever it changes (never `required_nodes`, whose stale names a
//! slurmctld restart turns into killed jobs: Slinky #43).

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, Taint, Toleration};
use kube::ResourceExt;

use crate::keys;

/// The Slurm node name a Kubernetes node stands for.
pub fn slurm_name(node: &Node) -> String {
    node.labels()
        .get(keys::SLURM_NODENAME_LABEL)
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| node.name_any())
}

/// Why a node cannot take a pod, or `None` when it can.
pub fn unfit(pod: &Pod, node: &Node, pods_on_node: usize) -> Option<String> {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return Some("cordoned".into());
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return Some("not Ready".into());
    }
    let pod_spec = pod.spec.clone().unwrap_or_default();
    let tolerations = pod_spec.tolerations.unwrap_or_default();
    // The bridge's own taint: the bridge gives its pods the toleration before binding them.
    let ours = |taint: &Taint| {
        pod_spec
            .scheduler_name
            .as_deref()
            .is_some_and(|s| crate::taint::is_ours(taint, s))
    };
    for taint in spec.taints.iter().flatten() {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !ours(taint)
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            return Some(format!(
                "taint {}={}:{}",
                taint.key,
                taint.value.clone().unwrap_or_default(),
                taint.effect
            ));
        }
    }
    let labels = node.labels();
    for (key, value) in pod_spec.node_selector.iter().flatten() {
        if labels.get(key) != Some(value) {
            return Some(format!("nodeSelector {key}={value}"));
        }
    }
    let required = pod_spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution);
    if let Some(required) = required {
        let name = node.name_any();
        let any_term = required.node_selector_terms.iter().any(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .all(|r| requirement(r, labels.get(&r.key).map(String::as_str)))
                && term
                    .match_fields
                    .iter()
                    .flatten()
                    .all(|r| r.key == "metadata.name" && requirement(r, Some(name.as_str())))
        });
        if !any_term {
            return Some("required node affinity".into());
        }
    }
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("pods"))
        .and_then(|q| q.0.parse::<usize>().ok());
    if capacity.is_some_and(|c| pods_on_node >= c) {
        return Some("no pod capacity left".into());
    }
    None
}

/// Whether toleration `t` tolerates `taint` (Kubernetes' matching rules).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    let key_matches = match t.key.as_deref() {
        None | Some("") => t.operator.as_deref() == Some("Exists"),
        Some(key) => key == taint.key,
    };
    key_matches
        && match t.operator.as_deref() {
            Some("Exists") => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        }
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// The Slurm nodes (of `slurm_nodes`) that `pods` must not be given: those whose Kubernetes node
/// any of the pods cannot use, and those no Kubernetes node stands for. `pods_on` counts the
/// non-terminal pods bound to each Kubernetes node.
pub fn excluded_nodes<N: Borrow<Node>>(
    pods: &[&Pod],
    nodes: &[N],
    slurm_nodes: &BTreeSet<String>,
    pods_on: &BTreeMap<String, usize>,
) -> Vec<String> {
    let mut usable = BTreeSet::new();
    for node in nodes.iter().map(Borrow::borrow) {
        let fits = pods
            .iter()
            .all(|p| unfit(p, node, pods_on.get(&node.name_any()).copied().unwrap_or(0)).is_none());
        if fits {
            usable.insert(slurm_name(node));
        }
    }
    slurm_nodes
        .iter()
        .filter(|n| !usable.contains(*n))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        let mut node: Node = serde_yaml::from_str(yaml).unwrap();
        let status = node.status.get_or_insert_with(Default::default);
        if status.conditions.is_none() {
            status.conditions = Some(vec![
                serde_yaml::from_str("{type: Ready, status: 'True'}").unwrap(),
            ]);
        }
        node
    }

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn kubernetes_rules() {
        let plain = pod("spec: {containers: []}\n");
        assert_eq!(unfit(&plain, &node("metadata: {name: n}\n"), 0), None);
        assert_eq!(
            unfit(
                &plain,
                &node("metadata: {name: n}\nspec: {unschedulable: true}\n"),
                0
            )
            .as_deref(),
            Some("cordoned")
        );
        let tainted = node(
            "metadata: {name: n}\nspec: {taints: [{key: gpu, value: 'yes', effect: NoSchedule}]}\n",
        );
        assert!(
            unfit(&plain, &tainted, 0)
                .unwrap()
                .contains("taint gpu=yes:NoSchedule")
        );
        let tolerant = pod("spec: {containers: [], tolerations: [{key: gpu, operator: Exists}]}\n");
        assert_eq!(unfit(&tolerant, &tainted, 0), None);
        let prefer =
            node("metadata: {name: n}\nspec: {taints: [{key: gpu, effect: PreferNoSchedule}]}\n");
        assert_eq!(unfit(&plain, &prefer, 0), None);
        // The bridge's own taint is no obstacle to its pods (it adds their toleration), but
        // another bridge's is.
        let managed = node(
            "metadata: {name: n}\nspec: {taints: [{key: slinky.slurm.net/managed-node, value: b1, effect: NoExecute}]}\n",
        );
        let of_b1 = pod("spec: {containers: [], schedulerName: b1}\n");
        let of_b2 = pod("spec: {containers: [], schedulerName: b2}\n");
        assert_eq!(unfit(&of_b1, &managed, 0), None);
        assert!(unfit(&of_b2, &managed, 0).is_some());

        let selective = pod("spec: {containers: [], nodeSelector: {zone: a}}\n");
        assert!(
            unfit(
                &selective,
                &node("metadata: {name: n, labels: {zone: b}}\n"),
                0
            )
            .is_some()
        );
        assert_eq!(
            unfit(
                &selective,
                &node("metadata: {name: n, labels: {zone: a}}\n"),
                0
            ),
            None
        );

        let affine = pod(
            "spec:\n  containers: []\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: cores, operator: Gt, values: ['8']}]\n        - matchFields: [{key: metadata.name, operator: In, values: [special]}]\n",
        );
        assert!(
            unfit(
                &affine,
                &node("metadata: {name: n, labels: {cores: '4'}}\n"),
                0
            )
            .is_some()
        );
        assert_eq!(
            unfit(
                &affine,
                &node("metadata: {name: n, labels: {cores: '16'}}\n"),
                0
            ),
            None
        );
        assert_eq!(
            unfit(&affine, &node("metadata: {name: special}\n"), 0),
            None
        );

        let full = node("metadata: {name: n}\nstatus: {allocatable: {pods: '2'}}\n");
        assert_eq!(unfit(&plain, &full, 1), None);
        assert!(unfit(&plain, &full, 2).is_some());

        let not_ready =
            node("metadata: {name: n}\nstatus: {conditions: [{type: Ready, status: 'Unknown'}]}\n");
        assert!(unfit(&plain, &not_ready, 0).is_some());
    }

    #[test]
    fn excluded_are_slurm_names() {
        let nodes = vec![
            node("metadata: {name: k1}\n"),
            node(
                "metadata: {name: k2, labels: {slinky.slurm.net/slurm-nodename: s2}}\nspec: {unschedulable: true}\n",
            ),
            node("metadata: {name: k3, labels: {slinky.slurm.net/slurm-nodename: s3}}\n"),
        ];
        let slurm: BTreeSet<String> = ["k1", "s2", "s3", "only-in-slurm"].map(String::from).into();
        let plain = pod("spec: {containers: []}\n");
        assert_eq!(
            excluded_nodes(&[&plain], &nodes, &slurm, &BTreeMap::new()),
            ["only-in-slurm", "s2"]
        );
    }
}
