//! Kubernetes nodes → Slurm nodes:
//! - a node labelled `scheduler.slinky.slurm.net/external-node` is registered in Slurm as an
//!   external node (no slurmd: Slurm schedules, the kubelet runs), with its allocatable CPUs,
//!   memory and GPUs (`Gres=gpu:N`), and the partitions of `…/external-node-partitions` (default: the config's partition) as
//!   features; when the label goes, the Slurm node is drained and deleted once idle;
//!   an external node's features follow that annotation, and its topology the annotation
//!   `topology.slinky.slurm.net/spec` (absent: left alone; empty: out of every topology);
//! - a cordoned node's Slurm node is drained (reason `slurm-bridge: Node (<n>) was cordoned`),
//!   and resumed on uncordon — only drains with that reason: an admin's drain stays;
//! - a Kubernetes node that is a Slurm node gets the bridge's taint ([`crate::taint`]).
//!
//! Only Kubernetes nodes that are Slurm nodes (by name or `slinky.slurm.net/slurm-nodename`) or
//! carry the label are looked at; others never cost a Slurm call (Slinky #52).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use serde_json::json;
use slurm_client::model::NodeUpdate;
use slurm_client::{Client, NodeState, NodeTracker};

use crate::config::Config;
use crate::feasible::slurm_name;
use crate::keys;
use crate::metrics::Metrics;
use crate::node_size::{self, Registered, Resize, Size};
use crate::pods::FIELD_MANAGER;
use crate::taint;

/// How often the nodes are compared.
const EVERY: Duration = Duration::from_secs(5);

/// What to do about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAction {
    /// `POST new/node` with this line.
    Create(String),
    /// Drain with this reason.
    Drain(String),
    /// Resume (undrain).
    Resume,
    /// Delete the Slurm node.
    Delete,
    /// Drain an external node whose size changed (`changes` says how), to register it again.
    Resize {
        /// What changed, for the log.
        changes: String,
    },
    /// Bring an external node's features (its partitions) and topology in line with the
    /// Kubernetes node; `None` leaves that part as it is.
    Sync {
        /// New features (and active features).
        features: Option<Vec<String>>,
        /// New topology ("" takes the node out of every topology).
        topology: Option<String>,
    },
}

/// What Slurm says of a node, as far as this module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmSide {
    /// An external node (no slurmd).
    pub external: bool,
    /// Drained or draining.
    pub drain: bool,
    /// The drain reason.
    pub reason: Option<String>,
    /// Running jobs (allocated CPUs).
    pub busy: bool,
    /// Its features.
    pub features: Vec<String>,
    /// Its topology (`topo-switch:s1,…`).
    pub topology: Option<String>,
    /// Its CPUs, memory and GPUs.
    pub size: Size,
}

fn cordon_reason(node: &str) -> String {
    format!("{}Node ({node}) was cordoned", keys::DRAIN_REASON_PREFIX)
}

fn unlabel_reason(node: &str) -> String {
    format!(
        "{}Node ({node}) lost the {} label",
        keys::DRAIN_REASON_PREFIX,
        keys::EXTERNAL_NODE_LABEL
    )
}

/// An external node's features: the partitions of its annotation, else the config's.
fn partitions(node: &Node, config: &Config) -> Vec<String> {
    let listed: Vec<String> = node
        .annotations()
        .get(keys::EXTERNAL_NODE_PARTITIONS_ANNOTATION)
        .map(|p| {
            p.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if listed.is_empty() {
        vec![config.partition.clone()]
    } else {
        listed
    }
}

/// The node's topology annotation: `None` when absent (the bridge leaves Slurm's topology of
/// the node alone, which may come from topology.conf), `Some("")` to take it out of every
/// topology.
fn topology(node: &Node) -> Result<Option<String>, String> {
    let Some(spec) = node.annotations().get(keys::TOPOLOGY_ANNOTATION) else {
        return Ok(None);
    };
    let spec = spec.trim();
    if spec
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'')
    {
        return Err(format!(
            "node {}: annotation {} {spec:?} is not a Slurm topology (e.g. topo-switch:s1,topo-block:b1)",
            node.name_any(),
            keys::TOPOLOGY_ANNOTATION
        ));
    }
    Ok(Some(spec.to_owned()))
}

/// The `new/node` line of an external node standing for `node`: its allocatable CPUs, memory
/// and GPUs (`nvidia.com/gpu`, `amd.com/gpu` as `Gres=gpu:N`; Slurm needs `GresTypes=gpu`).
pub fn node_conf(node: &Node, config: &Config) -> Result<String, String> {
    let name = slurm_name(node);
    let Size {
        cpus,
        memory_mb,
        gpus,
    } = node_size::wanted(node)?;
    let gres = if gpus > 0 {
        format!(" Gres=gpu:{gpus}")
    } else {
        String::new()
    };
    let partitions = partitions(node, config).join(",");
    let topology = topology(node)?
        .filter(|t| !t.is_empty())
        .map(|t| format!(" Topology={t}"))
        .unwrap_or_default();
    // slurmctld resolves a node's name when it allocates it; the node's own address spares it a
    // DNS lookup that, for a Kubernetes node name, usually fails slowly.
    let address = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| format!(" NodeAddr={}", a.address))
        .unwrap_or_default();
    Ok(format!(
        "NodeName={name}{address} CPUs={cpus} RealMemory={memory_mb}{gres} State=EXTERNAL Feature={partitions}{topology}"
    ))
}

/// A `new/node` line without its GPUs, when it has any: a Slurm without `GresTypes=gpu` refuses
/// the node with them, and a node without its GPUs still takes the pods that need none.
pub fn without_gres(line: &str) -> Option<String> {
    let kept: Vec<&str> = line
        .split(' ')
        .filter(|w| !w.starts_with("Gres="))
        .collect();
    (kept.len() < line.split(' ').count()).then(|| kept.join(" "))
}

/// The action for one Kubernetes node and its Slurm node (`None`: not in Slurm).
pub fn decide(
    node: &Node,
    slurm: Option<&SlurmSide>,
    config: &Config,
) -> Option<Result<NodeAction, String>> {
    let name = slurm_name(node);
    let labelled = node.labels().contains_key(keys::EXTERNAL_NODE_LABEL);
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let ours = |s: &SlurmSide| {
        s.reason
            .as_deref()
            .is_some_and(|r| r.starts_with(keys::DRAIN_REASON_PREFIX))
    };
    match slurm {
        None if labelled => Some(node_conf(node, config).map(NodeAction::Create)),
        None => None,
        Some(s) if s.external && !labelled => {
            if !s.drain {
                Some(Ok(NodeAction::Drain(unlabel_reason(&name))))
            } else if !s.busy && ours(s) {
                Some(Ok(NodeAction::Delete))
            } else {
                None
            }
        }
        Some(s) if cordoned && !s.drain => Some(Ok(NodeAction::Drain(cordon_reason(&name)))),
        Some(s)
            if !cordoned
                && s.drain
                && s.reason.as_deref() == Some(cordon_reason(&name).as_str()) =>
        {
            Some(Ok(NodeAction::Resume))
        }
        Some(s) if s.external => match resize(node, &name, s) {
            Ok(Resize::Keep) => sync(node, s, config),
            Ok(Resize::Wait) => None,
            Ok(Resize::Drain) => Some(node_size::wanted(node).map(|w| NodeAction::Resize {
                changes: w.changes(&s.size),
            })),
            Ok(Resize::Delete) => Some(Ok(NodeAction::Delete)),
            Ok(Resize::Resume) => Some(Ok(NodeAction::Resume)),
            Err(e) => Some(Err(e)),
        },
        Some(_) => None,
    }
}

/// Whether an external node must be registered again with its Kubernetes node's size.
fn resize(node: &Node, name: &str, slurm: &SlurmSide) -> Result<Resize, String> {
    let registered = Registered {
        size: slurm.size,
        drain: slurm.drain,
        reason: slurm.reason.as_deref(),
        busy: slurm.busy,
    };
    Ok(node_size::decide(
        name,
        node_size::wanted(node)?,
        registered,
    ))
}

/// What an external node's features and topology lack of the Kubernetes node's.
fn sync(node: &Node, slurm: &SlurmSide, config: &Config) -> Option<Result<NodeAction, String>> {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    let wanted = partitions(node, config);
    let features = (sorted(&wanted) != sorted(&slurm.features)).then_some(wanted);
    let topology = match topology(node) {
        Ok(t) => t.filter(|t| Some(t.as_str()) != slurm.topology.as_deref().or(Some(""))),
        Err(e) => return Some(Err(e)),
    };
    (features.is_some() || topology.is_some())
        .then_some(Ok(NodeAction::Sync { features, topology }))
}

/// Compares the nodes every few seconds and applies what [`decide`] and [`taint::wanted`] say.
/// A failed Slurm listing skips the round: nothing is drained, deleted or tainted on a guess.
/// `changed` is called after a round that registered or deleted a Slurm node.
pub async fn run(
    kube: kube::Client,
    slurm: Client,
    config: Arc<Config>,
    nodes: Store<Node>,
    metrics: Arc<Metrics>,
    changed: impl Fn(),
) {
    let mut tracker = NodeTracker::new(slurm.clone());
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let polled = tracker.poll().await;
        metrics.slurm_call("list_nodes", polled.as_ref().err());
        if let Err(e) = polled {
            tracing::warn!(error = %e, "cannot list the Slurm nodes; no node is registered, drained or deleted this round");
            continue;
        }
        let known: BTreeMap<String, SlurmSide> = tracker
            .snapshot()
            .map(|n| {
                let external =
                    n.state == NodeState::Other("EXTERNAL".into()) || n.has_flag_named("EXTERNAL");
                (
                    n.name.clone(),
                    SlurmSide {
                        external,
                        drain: n.is_drain(),
                        reason: n.reason.clone().filter(|r| !r.is_empty()),
                        busy: n.cpus_allocated > 0,
                        features: n.features.clone(),
                        topology: n.topology.clone(),
                        size: Size::registered(n),
                    },
                )
            })
            .collect();
        let mut registered_or_deleted = false;
        for node in nodes.state() {
            let name = slurm_name(&node);
            let Some(action) = decide(&node, known.get(&name), &config) else {
                continue;
            };
            registered_or_deleted |=
                matches!(action, Ok(NodeAction::Create(_) | NodeAction::Delete));
            let result = match action {
                Err(e) => {
                    tracing::warn!(node = name, error = %e, "cannot register or update the external node");
                    continue;
                }
                Ok(NodeAction::Create(line)) => match slurm.create_node(&line).await {
                    Err(e) => match without_gres(&line) {
                        Some(plain) => {
                            tracing::warn!(node = name, error = %e, "Slurm refused the node with its GPUs (slurm.conf needs GresTypes=gpu, and slurmctld a gres.conf line such as Name=gpu File=/dev/nvidia[0-7]); registering it without them");
                            metrics.slurm_call("node_update", Some(&e));
                            slurm.create_node(&plain).await.map(drop)
                        }
                        None => Err(e),
                    },
                    Ok(_) => Ok(()),
                },
                Ok(NodeAction::Drain(reason)) => slurm.drain_node(&name, &reason).await.map(drop),
                Ok(NodeAction::Resize { changes }) => {
                    tracing::info!(
                        node = name,
                        changes,
                        "the node's size changed: draining it, to register it again once idle"
                    );
                    slurm
                        .drain_node(&name, &node_size::reason(&name))
                        .await
                        .map(drop)
                }
                Ok(NodeAction::Resume) => slurm.resume_node(&name).await.map(drop),
                Ok(NodeAction::Delete) => slurm.delete_node(&name).await.map(drop),
                Ok(NodeAction::Sync { features, topology }) => {
                    let mut update = NodeUpdate::new();
                    if let Some(features) = features {
                        update = update.active_features(features.clone()).features(features);
                    }
                    if let Some(topology) = topology {
                        update = update.topology(topology);
                    }
                    slurm.update_node(&name, &update).await.map(drop)
                }
            };
            metrics.slurm_call("node_update", result.as_ref().err());
            match result {
                Ok(()) => tracing::info!(node = name, "updated the Slurm node"),
                Err(e) => tracing::warn!(node = name, error = %e, "cannot update the Slurm node"),
            }
        }
        for node in nodes.state() {
            let in_slurm = config.taint_nodes && known.contains_key(&slurm_name(&node));
            let Some(taints) = taint::wanted(&node, in_slurm, &config.scheduler_name) else {
                continue;
            };
            match write_taints(&kube, &node, taints).await {
                Ok(()) => tracing::info!(
                    node = node.name_any(),
                    tainted = in_slurm,
                    "updated the node's taint"
                ),
                Err(e) => {
                    tracing::warn!(node = node.name_any(), error = %e, "cannot update the node's taint")
                }
            }
        }
        if registered_or_deleted {
            changed();
        }
    }
}

/// Writes `taints` to the node, on the condition that it has not changed since it was read (a
/// taint list is replaced whole; a 409 means the next round tries again with the fresh node).
async fn write_taints(client: &kube::Client, node: &Node, taints: Vec<Taint>) -> kube::Result<()> {
    let patch = json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "spec": {"taints": taints},
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    Api::<Node>::all(client.clone())
        .patch(&node.name_any(), &params, &Patch::Merge(patch))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn side(external: bool, drain: bool, reason: Option<&str>, busy: bool) -> SlurmSide {
        SlurmSide {
            external,
            drain,
            reason: reason.map(String::from),
            busy,
            features: vec!["slurm-bridge".into()],
            topology: None,
            size: Size {
                cpus: 4,
                memory_mb: 8192,
                gpus: 0,
            },
        }
    }

    #[test]
    fn labelled_node_is_registered() {
        let n = node(
            "metadata: {name: k1, labels: {scheduler.slinky.slurm.net/external-node: 'true'}, annotations: {scheduler.slinky.slurm.net/external-node-partitions: 'a, b'}}\nstatus: {capacity: {cpu: '4', memory: 8Gi}, addresses: [{type: InternalIP, address: 10.0.0.7}]}\n",
        );
        assert_eq!(
            decide(&n, None, &Config::default()),
            Some(Ok(NodeAction::Create(
                "NodeName=k1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=EXTERNAL Feature=a,b"
                    .into()
            )))
        );
        // Allocatable, not capacity, and the GPUs as Gres.
        let gpus = node(
            "metadata: {name: k2, labels: {scheduler.slinky.slurm.net/external-node: 'true'}}\nstatus: {capacity: {cpu: '8', memory: 16Gi, nvidia.com/gpu: '4'}, allocatable: {cpu: 7500m, memory: 15Gi, nvidia.com/gpu: '2'}}\n",
        );
        let line = node_conf(&gpus, &Config::default()).unwrap();
        assert_eq!(
            line,
            "NodeName=k2 CPUs=7 RealMemory=15360 Gres=gpu:2 State=EXTERNAL Feature=slurm-bridge"
        );
        assert_eq!(
            without_gres(&line).as_deref(),
            Some("NodeName=k2 CPUs=7 RealMemory=15360 State=EXTERNAL Feature=slurm-bridge")
        );
        assert_eq!(without_gres("NodeName=k2 CPUs=7"), None);
        // Not labelled, not in Slurm: never looked up.
        assert_eq!(
            decide(&node("metadata: {name: cp}\n"), None, &Config::default()),
            None
        );
    }

    #[test]
    fn topology_goes_into_the_node_line_and_a_bad_one_is_named() {
        let n = node(
            "metadata: {name: k1, labels: {scheduler.slinky.slurm.net/external-node: 'true'}, annotations: {topology.slinky.slurm.net/spec: 'topo-switch:s1,topo-block:b1'}}\nstatus: {capacity: {cpu: '2'}}\n",
        );
        assert_eq!(
            node_conf(&n, &Config::default()).unwrap(),
            "NodeName=k1 CPUs=2 RealMemory=1 State=EXTERNAL Feature=slurm-bridge Topology=topo-switch:s1,topo-block:b1"
        );
        let bad = node(
            "metadata: {name: k1, annotations: {topology.slinky.slurm.net/spec: 'a b'}}\nstatus: {capacity: {cpu: '2'}}\n",
        );
        let err = node_conf(&bad, &Config::default()).unwrap_err();
        assert!(err.contains("topology.slinky.slurm.net/spec"), "{err}");
    }

    #[test]
    fn an_external_node_follows_its_partitions_and_topology() {
        let c = Config::default();
        let labelled = |annotations: &str| {
            node(&format!(
                "metadata: {{name: k1, labels: {{scheduler.slinky.slurm.net/external-node: 'true'}}, annotations: {{{annotations}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi}}}}\n"
            ))
        };
        let registered = side(true, false, None, false);
        // In line: nothing to do; without the annotation, Slurm's topology is left alone.
        assert_eq!(decide(&labelled(""), Some(&registered), &c), None);
        let placed = SlurmSide {
            topology: Some("default:s1".into()),
            ..registered.clone()
        };
        assert_eq!(decide(&labelled(""), Some(&placed), &c), None);
        assert_eq!(
            decide(
                &labelled("scheduler.slinky.slurm.net/external-node-partitions: 'a,b'"),
                Some(&registered),
                &c
            ),
            Some(Ok(NodeAction::Sync {
                features: Some(vec!["a".into(), "b".into()]),
                topology: None
            }))
        );
        assert_eq!(
            decide(
                &labelled("topology.slinky.slurm.net/spec: 'topo-block:b2'"),
                Some(&placed),
                &c
            ),
            Some(Ok(NodeAction::Sync {
                features: None,
                topology: Some("topo-block:b2".into())
            }))
        );
        // Empty: out of every topology, once.
        assert_eq!(
            decide(
                &labelled("topology.slinky.slurm.net/spec: ''"),
                Some(&placed),
                &c
            ),
            Some(Ok(NodeAction::Sync {
                features: None,
                topology: Some(String::new())
            }))
        );
        assert_eq!(
            decide(
                &labelled("topology.slinky.slurm.net/spec: ''"),
                Some(&registered),
                &c
            ),
            None
        );
    }

    #[test]
    fn an_external_node_whose_size_changed_is_registered_again() {
        let c = Config::default();
        let with_gpus = node(
            "metadata: {name: k1, labels: {scheduler.slinky.slurm.net/external-node: 'true'}}\nstatus: {allocatable: {cpu: '6', memory: 8Gi, nvidia.com/gpu: '2'}}\n",
        );
        let registered = side(true, false, None, true);
        assert_eq!(
            decide(&with_gpus, Some(&registered), &c),
            Some(Ok(NodeAction::Resize {
                changes: "cpus 4 → 6, gpus 0 → 2".into()
            }))
        );
        let drained = side(true, true, Some(&node_size::reason("k1")), false);
        assert_eq!(
            decide(&with_gpus, Some(&drained), &c),
            Some(Ok(NodeAction::Delete))
        );
        // GPUs alone: left as they are.
        let same_cpus = node(
            "metadata: {name: k1, labels: {scheduler.slinky.slurm.net/external-node: 'true'}}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, nvidia.com/gpu: '2'}}\n",
        );
        assert_eq!(decide(&same_cpus, Some(&registered), &c), None);
    }

    #[test]
    fn cordon_drains_and_uncordon_resumes_only_its_own_drain() {
        let cordoned = node("metadata: {name: k1}\nspec: {unschedulable: true}\n");
        let free = node("metadata: {name: k1}\n");
        let c = Config::default();
        assert_eq!(
            decide(&cordoned, Some(&side(false, false, None, false)), &c),
            Some(Ok(NodeAction::Drain(
                "slurm-bridge: Node (k1) was cordoned".into()
            )))
        );
        let ours = side(
            false,
            true,
            Some("slurm-bridge: Node (k1) was cordoned"),
            false,
        );
        assert_eq!(decide(&free, Some(&ours), &c), Some(Ok(NodeAction::Resume)));
        let admins = side(false, true, Some("bad DIMM"), false);
        assert_eq!(decide(&free, Some(&admins), &c), None);
    }

    #[test]
    fn unlabelled_external_node_goes_once_idle() {
        let n = node("metadata: {name: k1}\n");
        let c = Config::default();
        assert!(matches!(
            decide(&n, Some(&side(true, false, None, true)), &c),
            Some(Ok(NodeAction::Drain(_)))
        ));
        let draining = side(true, true, Some(&unlabel_reason("k1")), true);
        assert_eq!(decide(&n, Some(&draining), &c), None);
        let idle = side(true, true, Some(&unlabel_reason("k1")), false);
        assert_eq!(decide(&n, Some(&idle), &c), Some(Ok(NodeAction::Delete)));
        // An admin's drain of an external node is not ours to delete.
        assert_eq!(
            decide(&n, Some(&side(true, true, Some("maint"), false)), &c),
            None
        );
    }
}
