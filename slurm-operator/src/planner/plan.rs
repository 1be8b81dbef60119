//! One reconcile pass of a NodeSet (StatefulSet mode) as a list of actions.
//!
//! Order of decisions, as Slinky runs its steps: deadlines and cordon sync first (they feed
//! the deletion order), then scaling (create at the lowest free ordinals, or condemn the
//! first pods in deletion order), then, at the right size, leftover pods of the other
//! scaling mode, terminal pods and the rolling update. Condemned pods are drained before
//! they are deleted. Terminating pods are counted and otherwise left alone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use jiff::Timestamp;
use slurm_client::model::Node;

use super::conditions::{SlurmCondition, slurm_conditions};
use super::cordon::{self, CordonSync};
use super::daemon::{DaemonPodToCreate, DaemonScaling};
use super::deadline;
use super::drain::{Drain, ExistingReason, Undrain, drain};
use super::node_sync::{self, NodeSync};
use super::pod_info::{NodeComment, comment_change};
use super::scheduled;
use super::status::{NodeSetCounters, replica_counts, slurm_counts};
use super::update::rolling_update_victims;
use super::victims::{Candidate, sort_for_deletion};
use super::view::{NodeSetView, PodPhase, PodView, SlurmView, UpdateStrategy};
use crate::keys::{
    ANNOTATION_CORDONED_BY_OPERATOR, ANNOTATION_POD_CORDON, ANNOTATION_POD_DEADLINE,
    ANNOTATION_TOPOLOGY_SPEC,
};

/// Requeue while something waits on time or on Slurm: a condemned pod for its node to drain,
/// a pod held while Slurm cannot be asked, a ready pod for its slurmd to register.
pub const DRAIN_REQUEUE: Duration = Duration::from_secs(30);

/// Requeue with nothing pending (Slinky requeues every 30 s). Every change a NodeSet acts on
/// wakes it (its pods, the nodes under them, its Controller, its cluster's Slurm node and job
/// changes, polled in [`crate::slurm`]), and a pass at rest reads only the operator's caches,
/// so this is a backstop against a missed wake-up (a lagging Slurm change broadcast), not a poll.
pub const RESYNC: Duration = Duration::from_secs(600);

/// How long a Ready pod's slurmd gets to register before the pod counts as "not registered" and
/// is replaced: readiness only says slurmd listens, and on a loaded machine its registration
/// (and the next node poll) can lag behind. Slinky replaces such a pod at once.
pub const REGISTRATION_GRACE_SECS: u32 = 60;

/// Everything the reconciler observed for one NodeSet.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub nodeset: &'a NodeSetView,
    /// Every pod the NodeSet owns, terminating ones included.
    pub pods: &'a [PodView],
    pub slurm: SlurmView<'a>,
    /// Latest time-limit end of the running jobs, per Slurm node (see [`deadline`]); `None`
    /// when the job listing was not made or failed: `pod-deadline` is left as it is.
    pub deadlines: Option<&'a HashMap<String, Timestamp>>,
    pub now: Timestamp,
}

/// A pod to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodToCreate {
    pub ordinal: u32,
    /// `<nodeset>-<padded ordinal>`.
    pub name: String,
}

/// Why a pod is deleted (for events and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// More pods than replicas.
    ScaleIn,
    /// Old revision, replaced by the rolling update.
    Update,
    /// Left over from the other scaling mode.
    ScalingMode,
    /// Phase Failed or Succeeded: slurmd is gone; the pod is recreated.
    Terminal,
    /// Running and available, but its Slurm node is not registered.
    NotRegistered,
    /// DaemonSet mode: its Kubernetes node is gone or no longer eligible.
    Ineligible,
    /// DaemonSet mode: its hostname is no longer its node's.
    HostnameMismatch,
    /// DaemonSet mode: a second pod on one node.
    Duplicate,
}

/// A pod to delete now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodToDelete {
    pub pod: String,
    pub reason: DeleteReason,
}

/// Set (`Some`) or remove (`None`) an annotation on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationChange {
    pub pod: String,
    pub key: &'static str,
    pub value: Option<String>,
}

/// Set (`true`) or remove the `pod-protect` label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectChange {
    pub pod: String,
    pub protect: bool,
}

/// The complete set of `SlurmNodeState*` conditions a pod should carry (others with that
/// prefix are removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodConditions {
    pub pod: String,
    pub conditions: Vec<SlurmCondition>,
}

/// The actions of one pass. Apply order: annotations, drains and undrains, creates, deletes,
/// labels, pod conditions, status.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub create: Vec<PodToCreate>,
    /// DaemonSet mode: one pod per node.
    pub create_daemon: Vec<DaemonPodToCreate>,
    pub delete: Vec<PodToDelete>,
    pub annotations: Vec<AnnotationChange>,
    pub drain: Vec<Drain>,
    pub undrain: Vec<Undrain>,
    pub protect: Vec<ProtectChange>,
    /// Slurm node comments naming their pod (Slinky's pod info).
    pub comments: Vec<NodeComment>,
    /// Slurm node topology and `k8s/` features from the Kubernetes nodes (see
    /// [`super::node_sync`]).
    pub node_syncs: Vec<NodeSync>,
    /// What of the nodes' annotations was not taken, said in the log (no action).
    pub ignored: Vec<String>,
    /// Defunct Slurm node records to delete (`pruneSlurmNodeRecords`, see [`super::prune`]).
    pub prune: Vec<String>,
    /// Pods not listed keep their conditions (the Slurm listing failed).
    pub conditions: Vec<PodConditions>,
    /// Condemned pods waiting for their Slurm node to drain and go idle.
    pub waiting_for_drain: Vec<String>,
    /// Condemned pods kept because Slurm could not be asked.
    pub held: Vec<String>,
    pub status: NodeSetCounters,
    /// `status.ordinalToNode` with `pinToNode` (see [`super::pinning`]); `None` clears it.
    pub ordinal_to_node: Option<BTreeMap<String, String>>,
    /// When to look again: [`DRAIN_REQUEUE`] while something waits on Slurm or on the
    /// registration grace, `minReadySeconds` + 1 s while a ready pod is not yet available
    /// (the sooner of the two), else [`RESYNC`].
    pub requeue_after: Duration,
}

/// Plans one pass.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    plan_scheduled(input, None)
}

/// [`plan`] for a ScheduledUpdate whose reservation `reservation` exists in Slurm: old pods
/// whose Slurm node is in maintenance inside it are condemned (drained, then deleted).
/// `None`: no such reservation, or it could not be looked up — nothing is replaced.
pub fn plan_scheduled(input: &PlanInput<'_>, reservation: Option<&str>) -> Plan {
    plan_with(input, reservation, Scaling::Ordinals)
}

/// How pods are counted and placed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scaling<'a> {
    /// StatefulSet mode: `replicas` pods at ordinals.
    Ordinals,
    /// DaemonSet mode: the per-node decisions of [`super::daemon`]; `nodeset.replicas` holds
    /// the eligible node count.
    Daemon(&'a DaemonScaling),
}

/// [`plan_scheduled`] in either scaling mode.
pub(crate) fn plan_with(
    input: &PlanInput<'_>,
    reservation: Option<&str>,
    scaling: Scaling<'_>,
) -> Plan {
    let ns = input.nodeset;
    let nodes = match input.slurm {
        SlurmView::Nodes(nodes) => Some(nodes),
        _ => None,
    };
    let mut plan = Plan::default();
    let live: Vec<&PodView> = input.pods.iter().filter(|p| !p.deleting).collect();

    // Deadlines and cordon sync come first: the deletion order sees their results.
    let mut cordon_syncs: HashMap<&str, CordonSync> = HashMap::new();
    let mut candidates: HashMap<&str, Candidate<'_>> = HashMap::new();
    for &pod in &live {
        let mut c = Candidate::of(pod);
        if let Some(deadlines) = input.deadlines {
            c.deadline = deadlines.get(&pod.slurm_node).copied();
            if c.deadline.map(deadline::truncate) != pod.deadline.map(deadline::truncate) {
                plan.annotations.push(AnnotationChange {
                    pod: pod.name.clone(),
                    key: ANNOTATION_POD_DEADLINE,
                    value: c.deadline.map(deadline::format),
                });
            }
        }
        // A topology reaches the pod only where the cluster has one: slurmd registers with it.
        if let Some(wants) = pod.node_wants.as_ref().filter(|_| ns.slurm_topology) {
            let topology = (!wants.topology.is_empty()).then(|| wants.topology.clone());
            if pod.topology.as_deref().unwrap_or_default() != wants.topology {
                plan.annotations.push(AnnotationChange {
                    pod: pod.name.clone(),
                    key: ANNOTATION_TOPOLOGY_SPEC,
                    value: topology,
                });
            }
        }
        if let Some(nodes) = nodes {
            let key = pod.key(&ns.namespace);
            let sync = cordon::sync(pod, nodes.get(&pod.slurm_node), &key);
            // Only a new cordon counts: a pod cordoned for an earlier condemnation must keep
            // sorting first, or every pass would pick another victim.
            c.cordoned = pod.cordoned || sync.cordon == Some(true);
            cordon_syncs.insert(&pod.name, sync);
        }
        candidates.insert(&pod.name, c);
    }
    let candidate = |pod: &PodView| candidates[pod.name.as_str()];

    let mode_pods = input.pods.iter().filter(|p| !p.wrong_scaling_mode);
    let count = mode_pods.clone().count() as u32;
    let terminating = mode_pods.filter(|p| p.deleting).count() as u32;
    let daemon = match scaling {
        Scaling::Daemon(d) => Some(d),
        Scaling::Ordinals => None,
    };
    let daemon_condemned =
        |p: &PodView| daemon.is_some_and(|d| d.condemn.iter().any(|(n, _)| *n == p.name));
    let mode_live: Vec<&PodView> = live
        .iter()
        .copied()
        .filter(|p| !p.wrong_scaling_mode && !daemon_condemned(p))
        .collect();

    let mut condemned: Vec<(&PodView, DeleteReason)> = Vec::new();
    // DaemonSet mode: the per-node decisions, then the steady-state steps below.
    if let Some(d) = daemon {
        plan.create_daemon = d.create.clone();
        for (name, reason) in &d.condemn {
            if let Some(pod) = live.iter().find(|p| p.name == *name) {
                condemned.push((pod, *reason));
            }
        }
    }
    if daemon.is_none() && count < ns.replicas {
        let used: BTreeSet<u32> = input.pods.iter().filter_map(|p| p.ordinal).collect();
        plan.create = (0..)
            .filter(|o| !used.contains(o))
            .take((ns.replicas - count) as usize)
            .map(|ordinal| PodToCreate {
                ordinal,
                name: ns.pod_name(ordinal),
            })
            .collect();
    } else if daemon.is_none() && count > ns.replicas {
        // Terminating pods are already on their way out and make up part of the excess.
        let excess = (count - ns.replicas).saturating_sub(terminating) as usize;
        let mut order: Vec<Candidate<'_>> = mode_live.iter().map(|p| candidate(p)).collect();
        sort_for_deletion(&mut order);
        condemned.extend(
            order
                .into_iter()
                .take(excess)
                .map(|c| (c.pod, DeleteReason::ScaleIn)),
        );
    } else {
        condemned.extend(
            live.iter()
                .filter(|p| p.wrong_scaling_mode)
                .map(|p| (*p, DeleteReason::ScalingMode)),
        );
        let (terminal, running): (Vec<&PodView>, Vec<&PodView>) = mode_live
            .iter()
            .partition(|p| matches!(p.phase, Some(PodPhase::Failed | PodPhase::Succeeded)));
        for pod in terminal {
            delete(&mut plan, pod, DeleteReason::Terminal);
        }
        if let UpdateStrategy::RollingUpdate { max_unavailable } = ns.update {
            let pool: Vec<Candidate<'_>> = running.iter().map(|p| candidate(p)).collect();
            condemned.extend(
                rolling_update_victims(ns, max_unavailable, &pool, nodes, input.now)
                    .into_iter()
                    .map(|c| (c.pod, DeleteReason::Update)),
            );
        }
        if let (Some(name), Some(nodes)) = (reservation, nodes) {
            let old = scheduled::under_reservation(&running, &ns.update_revision, nodes, name);
            condemned.extend(old.into_iter().map(|p| (p, DeleteReason::Update)));
        }
    }

    for (pod, reason) in &condemned {
        condemn(&mut plan, input, pod, *reason);
    }

    // Pods whose slurmd should be registered by now but is not (Slinky's `SlurmNodes`).
    let mut registering = false;
    if let Some(nodes) = nodes {
        for pod in &mode_live {
            if is_settled(&plan, &condemned, pod)
                || pod.slurm_node.is_empty()
                || nodes.contains_key(&pod.slurm_node)
                || !pod.is_healthy()
            {
                continue;
            }
            if !pod.is_available(ns.min_ready_seconds.max(REGISTRATION_GRACE_SECS), input.now) {
                // Nothing else wakes the NodeSet when the grace ends without a registration.
                registering = true;
                continue;
            }
            delete(&mut plan, pod, DeleteReason::NotRegistered);
        }
    }

    for &pod in &live {
        if is_settled(&plan, &condemned, pod) {
            continue;
        }
        if let Some(sync) = cordon_syncs.remove(pod.name.as_str()) {
            if let Some(cordon) = sync.cordon {
                set_cordon(&mut plan, pod, cordon);
            }
            plan.drain.extend(sync.drain);
            plan.undrain.extend(sync.undrain);
        }
    }

    for &pod in &live {
        match input.slurm {
            SlurmView::Nodes(nodes) => {
                let node = nodes.get(&pod.slurm_node);
                let protect = ns.workload_disruption_protection && node.is_some_and(Node::is_busy);
                if protect != pod.protected {
                    plan.protect.push(ProtectChange {
                        pod: pod.name.clone(),
                        protect,
                    });
                }
                plan.conditions.push(PodConditions {
                    pod: pod.name.clone(),
                    conditions: slurm_conditions(node),
                });
                if let Some(node) = node.filter(|_| pod.is_assigned()) {
                    plan.comments.extend(comment_change(ns, pod, node));
                    if let Some(wants) = &pod.node_wants {
                        plan.node_syncs.extend(node_sync::node_sync(
                            node,
                            wants,
                            ns.slurm_topology,
                        ));
                        plan.ignored.extend(wants.rejected.iter().map(|r| {
                            format!(
                                "Kubernetes node {}: annotation value {r:?} is not a plain topology or feature name; not set on Slurm node {}",
                                pod.k8s_node.as_deref().unwrap_or_default(),
                                node.name
                            )
                        }));
                    }
                }
            }
            SlurmView::NotConfigured => plan.conditions.push(PodConditions {
                pod: pod.name.clone(),
                conditions: Vec::new(),
            }),
            SlurmView::Unavailable => {}
        }
    }

    dedupe_slurm_actions(&mut plan);

    plan.status = NodeSetCounters {
        pods: replica_counts(ns, input.pods, input.now),
        slurm: match input.slurm {
            SlurmView::Nodes(nodes) => Some(slurm_counts(input.pods, nodes)),
            SlurmView::NotConfigured => Some(Default::default()),
            SlurmView::Unavailable => None,
        },
    };
    let waiting = registering || !plan.waiting_for_drain.is_empty() || !plan.held.is_empty();
    plan.requeue_after = if waiting { DRAIN_REQUEUE } else { RESYNC };
    if plan.status.pods.ready != plan.status.pods.available {
        let wait = Duration::from_secs(u64::from(ns.min_ready_seconds) + 1);
        plan.requeue_after = plan.requeue_after.min(wait);
    }
    plan
}

/// Drain before delete: delete once the Slurm node is drained and idle (or not registered,
/// or there is no Slurm), else cordon the pod and drain its node; keep it when Slurm cannot
/// be asked.
fn condemn(plan: &mut Plan, input: &PlanInput<'_>, pod: &PodView, why: DeleteReason) {
    let nodes = match input.slurm {
        SlurmView::Unavailable => {
            plan.held.push(pod.name.clone());
            return;
        }
        SlurmView::NotConfigured => return delete(plan, pod, why),
        SlurmView::Nodes(nodes) => nodes,
    };
    let Some(node) = nodes.get(&pod.slurm_node) else {
        return delete(plan, pod, why);
    };
    if node.is_drained_idle() {
        return delete(plan, pod, why);
    }
    if !pod.cordoned {
        set_cordon(plan, pod, true);
    }
    let reason = format!(
        "Pod ({}) is pending termination for scale-in",
        pod.key(&input.nodeset.namespace)
    );
    plan.drain
        .extend(drain(node, &reason, ExistingReason::ReplaceOurs));
    plan.waiting_for_drain.push(pod.name.clone());
}

fn delete(plan: &mut Plan, pod: &PodView, reason: DeleteReason) {
    plan.delete.push(PodToDelete {
        pod: pod.name.clone(),
        reason,
    });
}

/// The operator's own cordon (`true`: set, with its mark) or the lifting of a cordon (both
/// annotations removed). The act layer writes one pod's changes in one patch, so the cordon and
/// its mark never part.
fn set_cordon(plan: &mut Plan, pod: &PodView, cordon: bool) {
    for key in [ANNOTATION_POD_CORDON, ANNOTATION_CORDONED_BY_OPERATOR] {
        plan.annotations.push(AnnotationChange {
            pod: pod.name.clone(),
            key,
            value: cordon.then(|| "true".to_string()),
        });
    }
}

/// Already condemned or deleted in this pass.
fn is_settled(plan: &Plan, condemned: &[(&PodView, DeleteReason)], pod: &PodView) -> bool {
    condemned.iter().any(|(p, _)| p.name == pod.name)
        || plan.delete.iter().any(|d| d.pod == pod.name)
}

/// One Slurm action per node; a node both drained and undrained (two pods claiming one
/// hostname) is only drained.
fn dedupe_slurm_actions(plan: &mut Plan) {
    let mut seen = BTreeSet::new();
    plan.drain.retain(|d| seen.insert(d.node.clone()));
    let mut undrained = BTreeSet::new();
    plan.undrain
        .retain(|u| !seen.contains(&u.node) && undrained.insert(u.node.clone()));
}
