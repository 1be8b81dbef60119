//! What wakes the NodeSet reconciler besides the NodeSet itself.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::Controller as Runner;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::utils::{PredicateConfig, WatchStreamExt};
use tokio::sync::broadcast;

use super::super::Context;
use crate::crd::NodeSet;
use crate::keys::{
    ANNOTATION_FEATURES_SPEC, ANNOTATION_HOSTNAME_OVERRIDE, ANNOTATION_NODE_CORDON_REASON,
    ANNOTATION_TOPOLOGY_SPEC,
};
use crate::slurm::ClusterKey;

/// Cluster keys whose Slurm nodes changed, fanned out to the NodeSet watcher of every scope.
pub struct SlurmChanges(broadcast::Sender<ClusterKey>);

impl SlurmChanges {
    /// Forwards `rx` to every subscriber.
    pub fn fan_out(mut rx: tokio::sync::mpsc::UnboundedReceiver<ClusterKey>) -> SlurmChanges {
        let (tx, _) = broadcast::channel(1024);
        let sender = tx.clone();
        tokio::spawn(async move {
            while let Some(key) = rx.recv().await {
                let _ = sender.send(key);
            }
        });
        SlurmChanges(tx)
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ClusterKey> {
        self.0.subscribe()
    }
}

/// The NodeSet runner of the context's scope, woken by the NodeSets, their pods, cordon
/// changes of nodes, Controllers and Slurm node changes.
pub fn wire(ctx: &Arc<Context>, changes: broadcast::Receiver<ClusterKey>) -> Runner<NodeSet> {
    let cache = &ctx.cache;
    let store = cache.nodesets.store();
    let (for_nodes, for_controllers, for_slurm) = (store.clone(), store.clone(), store.clone());
    // Nodes change every few seconds (heartbeats); only what cordon_state hashes matters here.
    let propagated = ctx.propagated_node_conditions.clone();
    let nodes = cache.nodes.subscribe().predicate_filter(
        move |node: &Node| cordon_state(node, &propagated),
        PredicateConfig::default(),
    );
    let slurm = futures::stream::unfold(changes, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(key) => return Some((key, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .flat_map(move |key| {
        futures::stream::iter(in_cluster(&for_slurm, &key.namespace, &key.controller))
    });
    Runner::for_stream(cache.nodesets.subscribe(), store)
        .owns_stream(cache.pods.subscribe())
        .watches_stream(nodes, move |_node| {
            // Which NodeSets have pods on the node is not indexed; a cordon is rare, so all
            // are looked at (reads only; nothing is written unless something changed).
            for_nodes
                .state()
                .iter()
                .map(|n| ObjectRef::from_obj(&**n))
                .collect::<Vec<_>>()
        })
        .watches_stream(cache.controllers.subscribe(), move |c| {
            in_cluster(
                &for_controllers,
                &c.namespace().unwrap_or_default(),
                &c.name_any(),
            )
        })
        .reconcile_on(slurm)
}

fn in_cluster(
    store: &Store<NodeSet>,
    namespace: &str,
    controller: &str,
) -> Vec<ObjectRef<NodeSet>> {
    store
        .state()
        .iter()
        .filter(|n| {
            n.namespace().as_deref() == Some(namespace) && n.spec.controller_ref.name == controller
        })
        .map(|n| ObjectRef::from_obj(&**n))
        .collect()
}

/// What of a node the NodeSets act on: cordon and its reason (the annotation, or the conditions
/// of the `propagated` types), for DaemonSet mode and pinning the labels, taints and hostname
/// override that decide where a pod belongs, and the topology and features annotations.
fn cordon_state(node: &Node, propagated: &[String]) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut h);
    node.annotations()
        .get(ANNOTATION_NODE_CORDON_REASON)
        .hash(&mut h);
    for key in [
        ANNOTATION_HOSTNAME_OVERRIDE,
        ANNOTATION_TOPOLOGY_SPEC,
        ANNOTATION_FEATURES_SPEC,
    ] {
        node.annotations().get(key).hash(&mut h);
    }
    node.labels().hash(&mut h);
    for t in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&t.key, &t.value, &t.effect).hash(&mut h);
    }
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    for c in conditions.into_iter().flatten() {
        if propagated.contains(&c.type_) {
            (&c.type_, &c.status, &c.reason, &c.message).hash(&mut h);
        }
    }
    Some(h.finish())
}
