//! The taint `slinky.slurm.net/managed-node=<schedulerName>:NoExecute` on every Kubernetes node
//! that is a Slurm node, as Slinky's bridge sets it: Slurm accounts for what runs there, so
//! pods that Slurm did not place (the default scheduler's) must stay off. The bridge's own pods
//! carry the toleration (the webhook adds it, and the bridge when it labels a pod). The taint
//! goes when the node is no longer a Slurm node (an external node deleted after its label went).
//!
//! Adding a `NoExecute` taint evicts what does not tolerate it, so it is added only to a node
//! the last Slurm node listing named; a failed listing changes no taint. Pure: the write is
//! [`crate::nodes`]'s.

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use crate::keys;

/// The taint a bridge named `scheduler` puts on its nodes.
pub fn managed(scheduler: &str) -> Taint {
    Taint {
        key: keys::MANAGED_NODE_TAINT.into(),
        value: Some(scheduler.into()),
        effect: "NoExecute".into(),
        time_added: None,
    }
}

/// The toleration of [`managed`], as the webhook and the bridge give it to the bridge's pods.
pub fn toleration(scheduler: &str) -> Toleration {
    Toleration {
        key: Some(keys::MANAGED_NODE_TAINT.into()),
        operator: Some("Equal".into()),
        value: Some(scheduler.into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: None,
    }
}

/// Whether `taint` is the one a bridge named `scheduler` sets.
pub fn is_ours(taint: &Taint, scheduler: &str) -> bool {
    taint.key == keys::MANAGED_NODE_TAINT && taint.value.as_deref() == Some(scheduler)
}

/// The node's new taint list, or `None` when it needs no change. Another bridge's taint (another
/// scheduler name) is left alone.
pub fn wanted(node: &Node, in_slurm: bool, scheduler: &str) -> Option<Vec<Taint>> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let has = taints.iter().any(|t| is_ours(t, scheduler));
    match (in_slurm, has) {
        (true, false) => Some(taints.into_iter().chain([managed(scheduler)]).collect()),
        (false, true) => Some(
            taints
                .into_iter()
                .filter(|t| !is_ours(t, scheduler))
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_slurm_node_gets_the_taint_and_keeps_its_others() {
        let n = node(
            "metadata: {name: k1}\nspec: {taints: [{key: gpu, value: 'yes', effect: NoSchedule}]}\n",
        );
        let taints = wanted(&n, true, "slurm-bridge-scheduler").unwrap();
        assert_eq!(taints.len(), 2);
        assert_eq!(taints[0].key, "gpu");
        assert_eq!(taints[1], managed("slurm-bridge-scheduler"));
        // Not a Slurm node, not tainted: nothing to do.
        assert_eq!(wanted(&n, false, "slurm-bridge-scheduler"), None);
    }

    #[test]
    fn the_taint_goes_with_the_slurm_node_and_only_ours() {
        let n = node(
            "metadata: {name: k1}\nspec: {taints: [\
             {key: slinky.slurm.net/managed-node, value: slurm-bridge-scheduler, effect: NoExecute},\
             {key: slinky.slurm.net/managed-node, value: other-bridge, effect: NoExecute}]}\n",
        );
        assert_eq!(wanted(&n, true, "slurm-bridge-scheduler"), None);
        let left = wanted(&n, false, "slurm-bridge-scheduler").unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].value.as_deref(), Some("other-bridge"));
    }
}
