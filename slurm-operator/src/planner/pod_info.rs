//! The Slurm node `comment` that names a NodeSet pod's Kubernetes side, as Slinky writes it:
//! JSON `{"namespace","podName","node","nodeSetName","nodeSetUID"}`. `scontrol show node` then
//! tells an admin which pod and Kubernetes node a Slurm node is, and tools that map one to the
//! other read it.

use serde::{Deserialize, Serialize};
use slurm_client::model::Node;

use super::view::{NodeSetView, PodView};

/// The comment's fields, in Slinky's order and spelling.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodInfo {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub pod_name: String,
    #[serde(default)]
    pub node: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_set_name: String,
    #[serde(
        rename = "nodeSetUID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub node_set_uid: String,
}

impl PodInfo {
    pub fn of(nodeset: &NodeSetView, pod: &PodView) -> PodInfo {
        PodInfo {
            namespace: nodeset.namespace.clone(),
            pod_name: pod.name.clone(),
            node: pod.k8s_node.clone().unwrap_or_default(),
            node_set_name: nodeset.name.clone(),
            node_set_uid: nodeset.uid.clone(),
        }
    }

    /// A node comment read back; `None` when it is not this JSON (an admin's free text).
    pub fn parse(comment: &str) -> Option<PodInfo> {
        serde_json::from_str(comment).ok()
    }

    /// The comment text.
    pub fn to_comment(&self) -> String {
        serde_json::to_string(self).expect("plain strings serialize")
    }
}

/// Set a Slurm node's comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeComment {
    pub node: String,
    pub comment: String,
}

/// The comment to write on `node` for `pod`, or `None` when it already says so (compared as
/// parsed JSON, so key order and spacing do not cause writes). A comment that is not this JSON
/// is replaced, as Slinky does: the node is the pod's.
pub fn comment_change(nodeset: &NodeSetView, pod: &PodView, node: &Node) -> Option<NodeComment> {
    let wanted = PodInfo::of(nodeset, pod).to_comment();
    (!says(node.comment.as_deref(), &wanted)).then(|| NodeComment {
        node: node.name.clone(),
        comment: wanted,
    })
}

/// Whether a node's `current` comment already says what the comment `wanted` says.
pub fn says(current: Option<&str>, wanted: &str) -> bool {
    current
        .and_then(PodInfo::parse)
        .is_some_and(|c| Some(c) == PodInfo::parse(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views() -> (NodeSetView, PodView) {
        let ns = NodeSetView {
            namespace: "slurm".into(),
            name: "cpu".into(),
            uid: "u-1".into(),
            ..crate::planner::tests::nodeset(1)
        };
        let pod = PodView {
            name: "cpu-0".into(),
            slurm_node: "cpu-0".into(),
            k8s_node: Some("kube-7".into()),
            ..PodView::default()
        };
        (ns, pod)
    }

    #[test]
    fn slinkys_json() {
        let (ns, pod) = views();
        assert_eq!(
            PodInfo::of(&ns, &pod).to_comment(),
            r#"{"namespace":"slurm","podName":"cpu-0","node":"kube-7","nodeSetName":"cpu","nodeSetUID":"u-1"}"#
        );
    }

    #[test]
    fn written_only_when_it_differs() {
        let (ns, pod) = views();
        let mut node = Node::default();
        node.name = "cpu-0".into();
        let change = comment_change(&ns, &pod, &node).expect("no comment yet");
        assert_eq!(change.node, "cpu-0");
        node.comment = Some(change.comment);
        assert_eq!(comment_change(&ns, &pod, &node), None);
        // the same fields in another order and spacing
        node.comment = Some(
            r#"{ "nodeSetUID":"u-1", "node":"kube-7", "podName":"cpu-0", "namespace":"slurm", "nodeSetName":"cpu" }"#
                .into(),
        );
        assert_eq!(comment_change(&ns, &pod, &node), None);
        // the pod moved to another Kubernetes node; an admin's free text
        for old in [
            r#"{"namespace":"slurm","podName":"cpu-0","node":"kube-1"}"#,
            "rack 4",
        ] {
            node.comment = Some(old.into());
            assert!(comment_change(&ns, &pod, &node).is_some(), "{old}");
        }
    }
}
