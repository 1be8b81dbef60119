//! `pruneSlurmNodeRecords: NodeNotFound` (DaemonSet mode): the Slurm node records that a
//! NodeSet's pods left behind when their Kubernetes nodes went away (an autoscaler removed
//! them), deleted from Slurm so that `sinfo` stops listing dead nodes.
//!
//! A record is defunct only when everything says so, as in Slinky: slurmctld marks it `DOWN`
//! and not responding, its comment (see [`super::pod_info`]) names this NodeSet by namespace,
//! name and UID, no pod of the NodeSet has its hostname, and the Kubernetes node the comment
//! names is gone or would now give its pod another hostname.

use std::collections::HashMap;

use slurm_client::model::{Node, NodeFlag, NodeState};

use super::daemon::KubeNode;
use super::pod_info::PodInfo;
use super::view::{NodeSetView, PodView};

/// The names of the defunct Slurm nodes, sorted.
pub fn defunct_nodes(
    nodeset: &NodeSetView,
    pods: &[PodView],
    nodes: &HashMap<String, Node>,
    kube_nodes: &[KubeNode],
) -> Vec<String> {
    let mut out: Vec<String> = nodes
        .values()
        .filter_map(|n| {
            if n.state != NodeState::Down || !n.has_flag(&NodeFlag::NotResponding) {
                return None;
            }
            let info = PodInfo::parse(n.comment.as_deref()?)?;
            let ours = !nodeset.uid.is_empty()
                && info.namespace == nodeset.namespace
                && info.node_set_name == nodeset.name
                && info.node_set_uid == nodeset.uid;
            let claimed = pods.iter().any(|p| p.slurm_node == n.name);
            let home = kube_nodes
                .iter()
                .find(|k| k.name == info.node)
                .is_some_and(|k| k.hostname() == n.name);
            (ours && !claimed && !home).then(|| n.name.clone())
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeset() -> NodeSetView {
        crate::planner::tests::nodeset(2)
    }

    fn slurm_node(name: &str, down: bool, flags: &[&str], comment: Option<String>) -> Node {
        let mut n = Node::default();
        n.name = name.into();
        n.state = if down {
            NodeState::Down
        } else {
            NodeState::Idle
        };
        n.state_flags = flags.iter().map(|f| NodeFlag::parse(f)).collect();
        n.comment = comment;
        n
    }

    fn ours(pod: &str, k8s_node: &str) -> Option<String> {
        let ns = nodeset();
        Some(
            PodInfo {
                namespace: ns.namespace,
                pod_name: pod.into(),
                node: k8s_node.into(),
                node_set_name: ns.name,
                node_set_uid: ns.uid,
            }
            .to_comment(),
        )
    }

    #[test]
    fn only_records_everything_calls_defunct() {
        let dead = &["NOT_RESPONDING"];
        let nodes: HashMap<String, Node> = [
            // its Kubernetes node is gone: pruned
            slurm_node("kube-1", true, dead, ours("gpu-a", "kube-1")),
            // its node is back under the same hostname: a pod will come
            slurm_node("kube-2", true, dead, ours("gpu-b", "kube-2")),
            // its node now gives its pod another hostname: pruned
            slurm_node("old-3", true, dead, ours("gpu-c", "kube-3")),
            // a pod has the hostname
            slurm_node("kube-4", true, dead, ours("gpu-d", "kube-4")),
            // down but responding (an admin's DOWN, or slurmd restarting)
            slurm_node("kube-5", true, &[], ours("gpu-e", "kube-5")),
            // not responding but not down yet
            slurm_node("kube-6", false, dead, ours("gpu-f", "kube-6")),
            // another NodeSet's, and one nobody commented
            slurm_node(
                "kube-7",
                true,
                dead,
                Some(r#"{"namespace":"slurm","podName":"x","node":"kube-7","nodeSetName":"cpu","nodeSetUID":"u"}"#.into()),
            ),
            slurm_node("kube-8", true, dead, None),
        ]
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
        let kube = |name: &str| KubeNode {
            name: name.into(),
            ..KubeNode::default()
        };
        let mut renamed = kube("kube-3");
        renamed.hostname_override = Some("new-3".into());
        let kube_nodes = [kube("kube-2"), renamed, kube("kube-4")];
        let pods = [PodView {
            name: "gpu-d2".into(),
            slurm_node: "kube-4".into(),
            ..PodView::default()
        }];
        assert_eq!(
            defunct_nodes(&nodeset(), &pods, &nodes, &kube_nodes),
            ["kube-1", "old-3"]
        );
        let mut no_uid = nodeset();
        no_uid.uid.clear();
        assert!(defunct_nodes(&no_uid, &pods, &nodes, &kube_nodes).is_empty());
    }
}
