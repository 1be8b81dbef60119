//! Node pinning (`spec.pinToNode`, StatefulSet mode): each ordinal remembers the Kubernetes
//! node its pod ran on (`status.ordinalToNode`), and a pod made again for that ordinal may only
//! be scheduled there, so that what a worker keeps on its node (a local volume, a cache) is
//! found again.
//!
//! A pin is dropped when its node no longer exists or no longer matches the pod template's
//! `nodeSelector` and required node affinity, as Slinky's guide says. Taints do not drop a pin:
//! a cordoned or not-ready node is the "node maintenance" the guide means, and its pods wait in
//! `Pending` until it is back. (Slinky's code also drops a pin for an untolerated taint, so a
//! cordon there forgets every pin of the node; we follow its guide.)

use std::collections::BTreeMap;

use super::daemon::{HOSTNAME_LABEL, KubeNode, Placement};
use super::view::{PodPhase, PodView};

/// The node an ordinal's new pod is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePin {
    /// `metadata.name` of the Kubernetes node.
    pub node: String,
    /// Its `kubernetes.io/hostname` label, matched as well (schedulers that read labels only).
    pub hostname_label: Option<String>,
}

/// `status.ordinalToNode` for this pass: the recorded pins whose node still exists and still
/// matches `placement`, then the node of every running pod (which wins over a recorded one).
/// Keys are ordinals without padding, as Slinky writes them. `node` looks a node up by name.
pub fn ordinal_to_node(
    recorded: &BTreeMap<String, String>,
    pods: &[PodView],
    placement: &Placement,
    node: impl Fn(&str) -> Option<KubeNode>,
) -> BTreeMap<String, String> {
    let valid = |name: &str| node(name).is_some_and(|n| placement.selects(&n));
    let mut pins: BTreeMap<String, String> = recorded
        .iter()
        .filter(|(ordinal, name)| ordinal.parse::<u32>().is_ok() && valid(name))
        .map(|(o, n)| (o.clone(), n.clone()))
        .collect();
    for pod in pods {
        let (Some(ordinal), Some(name)) = (pod.ordinal, pod.k8s_node.as_deref()) else {
            continue;
        };
        if pod.phase == Some(PodPhase::Running) && !name.is_empty() && valid(name) {
            pins.insert(ordinal.to_string(), name.to_owned());
        }
    }
    pins
}

/// The pin of `ordinal` in `pins`, with the node's hostname label.
pub fn pin_of(
    pins: &BTreeMap<String, String>,
    ordinal: u32,
    node: impl Fn(&str) -> Option<KubeNode>,
) -> Option<NodePin> {
    let name = pins.get(&ordinal.to_string())?;
    Some(NodePin {
        node: name.clone(),
        hostname_label: node(name).and_then(|n| n.labels.get(HOSTNAME_LABEL).cloned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;

    fn node(name: &str, labels: &[(&str, &str)]) -> KubeNode {
        KubeNode {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ..KubeNode::default()
        }
    }

    fn pod(ordinal: u32, node: &str, phase: PodPhase) -> PodView {
        PodView {
            name: format!("w-{ordinal}"),
            ordinal: Some(ordinal),
            k8s_node: Some(node.into()),
            phase: Some(phase),
            ..PodView::default()
        }
    }

    fn gpu_only() -> Placement {
        Placement {
            node_selector: [("gpu".to_owned(), "yes".to_owned())].into(),
            ..Placement::default()
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn table() {
        let mut cordoned = node("c", &[("gpu", "yes")]);
        cordoned.unschedulable = true;
        cordoned.taints.push(Taint {
            key: "node.kubernetes.io/unreachable".into(),
            effect: "NoExecute".into(),
            ..Taint::default()
        });
        let nodes = [
            node("a", &[("gpu", "yes")]),
            node("b", &[("gpu", "yes")]),
            node("plain", &[]),
            cordoned,
        ];
        let lookup = |name: &str| nodes.iter().find(|n| n.name == name).cloned();
        let any = Placement::default();
        #[allow(clippy::type_complexity)]
        let cases: &[(
            &str,
            &[(&str, &str)],
            Vec<PodView>,
            &Placement,
            &[(&str, &str)],
        )] = &[
            (
                "a running pod is pinned to its node",
                &[],
                vec![pod(0, "a", PodPhase::Running)],
                &any,
                &[("0", "a")],
            ),
            (
                "a pending pod is not pinned yet",
                &[],
                vec![pod(0, "a", PodPhase::Pending)],
                &any,
                &[],
            ),
            (
                "a recorded pin stays while its pod is gone",
                &[("3", "b")],
                vec![],
                &any,
                &[("3", "b")],
            ),
            (
                "a running pod moves its pin",
                &[("0", "b")],
                vec![pod(0, "a", PodPhase::Running)],
                &any,
                &[("0", "a")],
            ),
            (
                "a node that is gone drops the pin",
                &[("0", "gone")],
                vec![],
                &any,
                &[],
            ),
            (
                "a node the template no longer selects drops the pin",
                &[("0", "plain"), ("1", "a")],
                vec![pod(2, "plain", PodPhase::Running)],
                &gpu_only(),
                &[("1", "a")],
            ),
            (
                "a cordoned, unreachable node keeps its pin",
                &[("0", "c")],
                vec![],
                &gpu_only(),
                &[("0", "c")],
            ),
            (
                "a key that is no ordinal is dropped",
                &[("x", "a"), ("-1", "a")],
                vec![],
                &any,
                &[],
            ),
        ];
        for (what, recorded, pods, placement, want) in cases {
            assert_eq!(
                ordinal_to_node(&map(recorded), pods, placement, lookup),
                map(want),
                "{what}"
            );
        }
    }

    #[test]
    fn pin_carries_the_hostname_label() {
        let nodes = [node("a.example.org", &[(HOSTNAME_LABEL, "a")])];
        let lookup = |name: &str| nodes.iter().find(|n| n.name == name).cloned();
        let pins = map(&[("0", "a.example.org"), ("1", "gone")]);
        assert_eq!(
            pin_of(&pins, 0, lookup),
            Some(NodePin {
                node: "a.example.org".into(),
                hostname_label: Some("a".into())
            })
        );
        assert_eq!(pin_of(&pins, 1, lookup).unwrap().hostname_label, None);
        assert_eq!(pin_of(&pins, 2, lookup), None);
    }
}
