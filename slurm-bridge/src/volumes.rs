//! What a pod's persistent volumes allow, decided as kube-scheduler's VolumeBinding plugin
//! decides it:
//! - a claim that does not exist, is being deleted or is lost, and an unbound claim that binds
//!   at once (`Immediate`: "pod has unbound immediate PersistentVolumeClaims"), hold the pod
//!   back: no job is submitted and no binding made until that changes;
//! - a bound claim's PersistentVolume with node affinity (`spec.nodeAffinity.required`) rules
//!   out the nodes it does not match; so do a `WaitForFirstConsumer` claim's StorageClass
//!   `allowedTopologies`, and the node such a claim was given already
//!   (`volume.kubernetes.io/selected-node`);
//! - an unbound `WaitForFirstConsumer` claim is provisioned where the pod goes: once Slurm chose
//!   the node, the claim gets that annotation, and the pod is bound when its claims are.
//!
//! Generic ephemeral volumes are claims named `<pod>-<volume>` that the pod owns. A
//! `WaitForFirstConsumer` class without a provisioner (`kubernetes.io/no-provisioner`:
//! pre-created local volumes that kube-scheduler binds itself) is not handled: such a pod
//! waits, saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, PersistentVolume, PersistentVolumeClaim, Pod, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

use crate::feasible::slurm_name;
use crate::node_selector;

/// Claim annotation: the node a `WaitForFirstConsumer` claim is to be provisioned for.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Claim annotation the PV controller sets once it completed the claim's binding.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The claim class annotation older claims carry instead of `storageClassName`.
const LEGACY_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The provisioner of classes whose volumes an admin creates beforehand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// How long a pod waits for its claims to be bound after they were given its node before its
/// condition says the binding timed out: kube-scheduler's `bindTimeoutSeconds` default.
pub const BIND_TIMEOUT_SECONDS: i64 = 600;

/// The `SlurmJob` condition reasons of waiting for volumes.
pub mod reasons {
    /// A claim is missing, being deleted, lost, or unbound in `Immediate` mode; or its class is.
    pub const WAITING_FOR_VOLUME: &str = "WaitingForVolume";
    /// A claim of a `WaitForFirstConsumer` class without a provisioner.
    pub const UNSUPPORTED_VOLUME: &str = "UnsupportedVolume";
    /// The volumes allow too few Slurm nodes, or another node than Slurm's.
    pub const VOLUME_NODE_CONFLICT: &str = "VolumeNodeConflict";
    /// The claims were given the pod's node; waiting for them to be bound.
    pub const WAITING_FOR_BINDING: &str = "WaitingForVolumeBinding";
    /// … for longer than [`BIND_TIMEOUT_SECONDS`](super::BIND_TIMEOUT_SECONDS).
    pub const BINDING_TIMEOUT: &str = "VolumeBindingTimeout";
}

/// The storage objects the decisions read.
pub trait Objects {
    /// A claim of `namespace`.
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    /// A PersistentVolume.
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    /// A StorageClass.
    fn class(&self, name: &str) -> Option<Arc<StorageClass>>;
}

/// Whether a pod may be placed, as far as its claims go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Gate {
    /// No claim, or every claim bound.
    #[default]
    Ready,
    /// Not now: a `SlurmJob` condition reason and message.
    Blocked {
        /// CamelCase, one of [`reasons`].
        reason: String,
        /// Names the claims and what they wait for.
        message: String,
    },
    /// Unbound `WaitForFirstConsumer` claims, each with the node it names already, if any.
    Provision(Vec<(String, Option<String>)>),
}

impl Gate {
    /// The node a claim was given already: the pod must go there.
    pub fn pinned(&self) -> Option<&str> {
        match self {
            Gate::Provision(claims) => claims.iter().find_map(|(_, node)| node.as_deref()),
            _ => None,
        }
    }
}

/// What one pod's claims allow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volumes {
    /// Whether it may be placed now.
    pub gate: Gate,
    limits: Vec<Limit>,
}

/// A rule the pod's node must satisfy.
#[derive(Debug, Clone, PartialEq)]
enum Limit {
    /// A bound claim's volume's node affinity.
    Affinity {
        claim: String,
        volume: String,
        selector: NodeSelector,
    },
    /// An unbound claim given a node already.
    Selected { claim: String, node: String },
    /// A `WaitForFirstConsumer` class's allowed topologies.
    Topology {
        claim: String,
        class: String,
        terms: Vec<TopologySelectorTerm>,
    },
}

/// The claims `pod` uses: `persistentVolumeClaim` volumes, and `ephemeral` ones (`<pod>-<volume>`,
/// with whether the claim must be the pod's own).
pub fn claims_of(pod: &Pod) -> Vec<(String, bool)> {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some((c.claim_name.clone(), false))
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| (format!("{}-{}", pod.name_any(), v.name), true))
            }
        })
        .collect()
}

/// What `pod`'s claims allow, from the objects as they are now.
pub fn assess(pod: &Pod, objects: &impl Objects) -> Volumes {
    let ns = pod.namespace().unwrap_or_default();
    let mut blocked: Vec<(&'static str, String)> = Vec::new();
    let mut provision = Vec::new();
    let mut limits = Vec::new();
    for (name, ephemeral) in claims_of(pod) {
        let Some(claim) = objects.claim(&ns, &name) else {
            let message = if ephemeral {
                format!(
                    "waiting for the ephemeral volume controller to create persistentvolumeclaim {name:?}"
                )
            } else {
                format!("persistentvolumeclaim {name:?} not found")
            };
            blocked.push((reasons::WAITING_FOR_VOLUME, message));
            continue;
        };
        if ephemeral && !owned_by(&claim, pod) {
            blocked.push((
                reasons::WAITING_FOR_VOLUME,
                format!("persistentvolumeclaim {name:?} was not created for this pod"),
            ));
            continue;
        }
        if claim.metadata.deletion_timestamp.is_some() {
            blocked.push((
                reasons::WAITING_FOR_VOLUME,
                format!("persistentvolumeclaim {name:?} is being deleted"),
            ));
            continue;
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let volume = spec.volume_name.clone().filter(|v| !v.is_empty());
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some("Lost") {
            blocked.push((
                reasons::WAITING_FOR_VOLUME,
                format!(
                    "persistentvolumeclaim {name:?} is bound to non-existent persistentvolume {:?}",
                    volume.unwrap_or_default()
                ),
            ));
            continue;
        }
        let bound = phase == Some("Bound")
            || (volume.is_some() && claim.annotations().contains_key(BIND_COMPLETED));
        if bound {
            // A binder that binds claims without volumes (the test ground's, for Immediate
            // classes) leaves nothing to check.
            let Some(volume) = volume else { continue };
            match objects.volume(&volume) {
                None => blocked.push((
                    reasons::WAITING_FOR_VOLUME,
                    format!("persistentvolumeclaim {name:?} is bound to persistentvolume {volume:?}, which does not exist"),
                )),
                Some(pv) => {
                    let selector = pv
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_affinity.as_ref())
                        .and_then(|a| a.required.clone());
                    if let Some(selector) = selector {
                        limits.push(Limit::Affinity {
                            claim: name,
                            volume,
                            selector,
                        });
                    }
                }
            }
            continue;
        }
        let class_name = spec
            .storage_class_name
            .clone()
            .or_else(|| claim.annotations().get(LEGACY_CLASS).cloned())
            .unwrap_or_default();
        let immediate = || {
            (
                reasons::WAITING_FOR_VOLUME,
                format!("pod has unbound immediate PersistentVolumeClaims: {name:?}"),
            )
        };
        // A claim naming its volume already is the PV controller's to finish, in any mode.
        if class_name.is_empty() || volume.is_some() {
            blocked.push(immediate());
            continue;
        }
        let Some(class) = objects.class(&class_name) else {
            blocked.push((
                reasons::WAITING_FOR_VOLUME,
                format!("storageclass {class_name:?} of persistentvolumeclaim {name:?} not found"),
            ));
            continue;
        };
        if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
            blocked.push(immediate());
            continue;
        }
        if class.provisioner == NO_PROVISIONER {
            blocked.push((
                reasons::UNSUPPORTED_VOLUME,
                format!("persistentvolumeclaim {name:?}: storageclass {class_name:?} has no provisioner (pre-created volumes that kube-scheduler binds itself); the bridge only has claims provisioned on the node Slurm chose"),
            ));
            continue;
        }
        let selected = claim
            .annotations()
            .get(SELECTED_NODE)
            .filter(|n| !n.is_empty())
            .cloned();
        if let Some(node) = &selected {
            limits.push(Limit::Selected {
                claim: name.clone(),
                node: node.clone(),
            });
        }
        if let Some(terms) = class.allowed_topologies.clone().filter(|t| !t.is_empty()) {
            limits.push(Limit::Topology {
                claim: name.clone(),
                class: class_name,
                terms,
            });
        }
        provision.push((name, selected));
    }
    let gate = if let Some((reason, _)) = blocked.first() {
        Gate::Blocked {
            reason: (*reason).to_owned(),
            message: blocked
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        }
    } else if provision.is_empty() {
        Gate::Ready
    } else {
        Gate::Provision(provision)
    };
    Volumes { gate, limits }
}

fn owned_by(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    claim
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == pod.metadata.uid.as_ref())
}

impl Volumes {
    /// Why `node` cannot hold the pod's volumes, or `None` when it can.
    pub fn unfit(&self, node: &Node) -> Option<String> {
        self.limits.iter().find_map(|limit| match limit {
            Limit::Affinity {
                claim,
                volume,
                selector,
            } => (!node_selector::matches(selector, node)).then(|| {
                format!("volume node affinity conflict: persistentvolume {volume:?} of claim {claim:?}")
            }),
            Limit::Selected { claim, node: there } => (*there != node.name_any()).then(|| {
                format!("claim {claim:?} is being provisioned on {there} ({SELECTED_NODE})")
            }),
            Limit::Topology {
                claim,
                class,
                terms,
            } => (!terms.iter().any(|t| topology_matches(t, node))).then(|| {
                format!("storageclass {class:?} of claim {claim:?} does not allow the node (allowedTopologies)")
            }),
        })
    }

    /// Whether the pod's volumes rule out any node.
    pub fn limits_nodes(&self) -> bool {
        !self.limits.is_empty()
    }
}

fn topology_matches(term: &TopologySelectorTerm, node: &Node) -> bool {
    let labels = node.labels();
    term.match_label_expressions
        .iter()
        .flatten()
        .all(|r| labels.get(&r.key).is_some_and(|v| r.values.contains(v)))
}

/// The Slurm nodes (of `slurm_nodes`) whose Kubernetes node the volumes of any pod rule out,
/// each with why (the first pod's reason).
pub fn excluded_nodes<'a>(
    volumes: &[Volumes],
    nodes: impl IntoIterator<Item = &'a Node>,
    slurm_nodes: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if !volumes.iter().any(Volumes::limits_nodes) {
        return out;
    }
    for node in nodes {
        let slurm = slurm_name(node);
        if !slurm_nodes.contains(&slurm) {
            continue;
        }
        if let Some(why) = volumes.iter().find_map(|v| v.unfit(node)) {
            out.insert(slurm, why);
        }
    }
    out
}

/// Why a workload of `pods` pods waits when its volumes rule out `excluded` of the
/// `slurm_nodes` Slurm nodes, or `None` when enough are left (one pod a node).
pub fn too_few_nodes(
    slurm_nodes: usize,
    excluded: &BTreeMap<String, String>,
    pods: usize,
) -> Option<String> {
    let usable = slurm_nodes.saturating_sub(excluded.len());
    if usable >= pods {
        return None;
    }
    let mut why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, reason) in excluded {
        why.entry(reason).or_default().push(node);
    }
    let why: Vec<String> = why
        .into_iter()
        .map(|(reason, nodes)| format!("{reason} on {}", nodes.join(",")))
        .collect();
    Some(format!(
        "the pods' volumes allow {usable} of the {slurm_nodes} Slurm node(s); {pods} needed: {}",
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests;
