//! The bridge's decisions: what to do about one workload, from its pods and what Slurm last said
//! about its job. Pure, so every drift case is a table test; the scheduler loop only gathers
//! the inputs and applies the actions in order (stopping at the first that fails).
//!
//! Rules that keep pods safe:
//! - Nothing is done when the job's state is unknown (slurmrestd unreachable, an error):
//!   no submit, no cancel, no delete. A restart of slurmctld or slurmrestd changes nothing.
//! - A pod is deleted only when Slurm reports its job ended (or requeued, which revokes the
//!   allocation), never because a lookup failed. A job Slurm no longer knows (purged, or a
//!   slurmctld that lost its state) leaves bound pods running, with a condition saying so.
//! - A job is cancelled only when none of its pods is alive: a pod still terminating on its
//!   node keeps its job (Slinky #16); or, for a refit, when Slurm started it where Kubernetes
//!   would not admit a pod and none of its pods is bound, after its pods' labels are taken off
//!   (so that its end ends none of them). A pod whose deletion was asked for but that no kubelet
//!   reports as ended is let go after its grace period plus [`OVERDUE_AFTER_GRACE`]
//!   (Slinky #49).

use std::collections::{BTreeMap, BTreeSet};

use slurm_client::JobState;

pub use crate::volumes::Gate;
use crate::volumes::{BIND_TIMEOUT_SECONDS, SELECTED_NODE, reasons};

/// How long after a deleted pod's grace period the bridge stops waiting for a kubelet.
pub const OVERDUE_AFTER_GRACE: i64 = 60;

/// A pod's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not started, or starting.
    Pending,
    /// Running.
    Running,
    /// Ended: Succeeded or Failed.
    Ended,
}

/// What the decisions need to know of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// Its name.
    pub name: String,
    /// Its `slurm-jobid` label.
    pub job_id: Option<u32>,
    /// Its `slurm-node` annotation (a Kubernetes node name).
    pub assigned_node: Option<String>,
    /// `spec.nodeName`.
    pub bound_node: Option<String>,
    /// Its phase.
    pub phase: Phase,
    /// Seconds since its deletion was asked for, and its grace period; `None` when not deleted.
    pub deleting: Option<(i64, i64)>,
    /// Whether it holds the bridge's finalizer.
    pub finalizer: bool,
    /// Its `SlurmJob` condition as it is: `(status, reason, message)`.
    pub condition: Option<(String, String, String)>,
    /// Seconds since that condition was last written.
    pub condition_age: Option<i64>,
    /// Whether its persistent volumes let it be placed (see [`volumes`](crate::volumes)).
    pub volumes: Gate,
    /// Kubernetes nodes of its running job's allocation that would not admit it now, with why
    /// (filled for an unbound pod of a running job only).
    pub unfit_on: BTreeMap<String, String>,
}

impl PodView {
    /// Whether the pod no longer needs its job: ended, or deleted and never bound, or deleted
    /// and overdue.
    pub fn gone(&self) -> bool {
        if self.phase == Phase::Ended {
            return true;
        }
        match self.deleting {
            None => false,
            Some(_) if self.bound_node.is_none() => true,
            Some((since, grace)) => since > grace + OVERDUE_AFTER_GRACE,
        }
    }
}

/// What Slurm last said about the workload's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobView {
    /// No job: none was submitted, or its id is not known.
    None,
    /// Not known right now (the read failed or has not happened): act on nothing.
    Unknown,
    /// Slurm answered that it has no such job.
    Missing(u32),
    /// Slurm's answer.
    Known {
        /// The job id.
        id: u32,
        /// Its state.
        state: JobState,
        /// Why it pends (`Priority`, `Resources`, …).
        reason: Option<String>,
        /// The Kubernetes node names of its allocation, in Slurm's order; a Slurm node no
        /// Kubernetes node stands for is `None`.
        nodes: Vec<(String, Option<String>)>,
    },
}

/// Everything about one workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Its pods (including those being deleted), sorted by name.
    pub pods: Vec<PodView>,
    /// Its job.
    pub job: JobView,
    /// How many live pods its job needs before it is submitted.
    pub gang: Gang,
}

/// A workload's gang size, or why it is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gang {
    /// How many live pods the job needs before it is submitted.
    Size(usize),
    /// Not known: the pods name a PodGroup that does not exist (yet). Nothing is submitted, so
    /// that a gang never starts partially; the text says so on the pods.
    Unknown(String),
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Submit the workload's job for these pods, then label them.
    Submit {
        /// The pods the job is for.
        pods: Vec<String>,
    },
    /// Label the pod with its job id and add the finalizer.
    Label {
        /// The pod.
        pod: String,
        /// The job.
        job_id: u32,
    },
    /// Give the pod's unbound `WaitForFirstConsumer` claims its node
    /// (`volume.kubernetes.io/selected-node`), for their provisioner.
    SelectNode {
        /// The pod.
        pod: String,
        /// The Kubernetes node.
        node: String,
        /// The claims.
        claims: Vec<String>,
    },
    /// Annotate the pod with its node and bind it there.
    Bind {
        /// The pod.
        pod: String,
        /// The Kubernetes node.
        node: String,
        /// The job whose allocation holds the node.
        job_id: u32,
    },
    /// Take the pods' job away from them (their `slurm-jobid` label), then cancel it, so that
    /// they are submitted again: Slurm started the job on a node where Kubernetes would not
    /// admit a pod (Slurm does not count the pods it did not place there), and none of the
    /// job's pods is bound yet. The new job excludes that node while the pod does not fit.
    Refit {
        /// The job.
        job_id: u32,
        /// Its pods.
        pods: Vec<String>,
        /// The node refused, and why, for the event.
        node: String,
        why: String,
    },
    /// Cancel the job.
    Cancel {
        /// The job.
        job_id: u32,
        /// Why, for the event.
        why: String,
    },
    /// Delete the pod (gracefully).
    Delete {
        /// The pod.
        pod: String,
        /// Why, for the event and condition.
        why: String,
    },
    /// Remove the bridge's finalizer from the pod.
    Release {
        /// The pod.
        pod: String,
    },
    /// Set the pod's `SlurmJob` condition (only emitted when it differs from what the pod has).
    Condition {
        /// The pod.
        pod: String,
        /// `True` when the job runs, `False` otherwise.
        status: String,
        /// A CamelCase reason.
        reason: String,
        /// For people.
        message: String,
    },
}

/// The actions for `w`, in the order they must be applied.
pub fn decide(w: &Workload) -> Vec<Action> {
    let mut actions = Vec::new();
    let live: Vec<&PodView> = w.pods.iter().filter(|p| !p.gone()).collect();
    let release = |actions: &mut Vec<Action>| {
        for p in w.pods.iter().filter(|p| p.gone() && p.finalizer) {
            actions.push(Action::Release {
                pod: p.name.clone(),
            });
        }
    };
    match &w.job {
        JobView::Unknown => {}
        JobView::None => {
            release(&mut actions);
            let waiting: Vec<&PodView> = live
                .iter()
                .filter(|p| p.bound_node.is_none() && p.deleting.is_none())
                .copied()
                .collect();
            if waiting.is_empty() {
                return actions;
            }
            let gang = match &w.gang {
                Gang::Size(n) => *n,
                Gang::Unknown(why) => {
                    for p in waiting {
                        condition(&mut actions, p, "False", "WaitingForPodGroup", why);
                    }
                    return actions;
                }
            };
            if waiting.len() >= gang {
                if held_by_volumes(&mut actions, &waiting) {
                    return actions;
                }
                actions.push(Action::Submit {
                    pods: waiting.iter().map(|p| p.name.clone()).collect(),
                });
            } else {
                let message = format!(
                    "waiting for {} more pod(s) of the group before submitting its Slurm job",
                    gang - waiting.len()
                );
                for p in waiting {
                    condition(&mut actions, p, "False", "WaitingForGroup", &message);
                }
            }
        }
        JobView::Missing(id) => {
            release(&mut actions);
            for p in &live {
                if p.bound_node.is_some() {
                    let message = format!(
                        "Slurm no longer knows job {id}; the pod keeps running (the bridge deletes pods only for jobs Slurm reports ended)"
                    );
                    condition(&mut actions, p, "False", "JobUnknownToSlurm", &message);
                }
            }
            let unbound: Vec<String> = live
                .iter()
                .filter(|p| p.bound_node.is_none() && p.deleting.is_none())
                .map(|p| p.name.clone())
                .collect();
            let gang = match &w.gang {
                Gang::Size(n) => *n,
                Gang::Unknown(why) => {
                    for p in live.iter().filter(|p| p.bound_node.is_none()) {
                        condition(&mut actions, p, "False", "WaitingForPodGroup", why);
                    }
                    return actions;
                }
            };
            if !unbound.is_empty()
                && unbound.len() >= gang
                && live.iter().all(|p| p.bound_node.is_none())
            {
                let waiting: Vec<&PodView> = live
                    .iter()
                    .filter(|p| p.deleting.is_none())
                    .copied()
                    .collect();
                if held_by_volumes(&mut actions, &waiting) {
                    return actions;
                }
                actions.push(Action::Submit { pods: unbound });
            }
        }
        JobView::Known {
            id,
            state,
            reason,
            nodes,
        } => {
            let id = *id;
            let alive_state = matches!(
                state,
                JobState::Pending | JobState::Running | JobState::Suspended
            ) || matches!(state, JobState::Other(_));
            if alive_state && live.is_empty() {
                actions.push(Action::Cancel {
                    job_id: id,
                    why: "none of its pods is alive any more".into(),
                });
                release(&mut actions);
                return actions;
            }
            release(&mut actions);
            for p in live.iter().filter(|_| alive_state) {
                if p.job_id != Some(id) && p.deleting.is_none() {
                    actions.push(Action::Label {
                        pod: p.name.clone(),
                        job_id: id,
                    });
                }
            }
            match state {
                JobState::Pending => {
                    for p in &live {
                        if p.bound_node.is_some() {
                            actions.push(Action::Delete {
                                pod: p.name.clone(),
                                why: format!("Slurm job {id} was requeued: its allocation is gone"),
                            });
                        } else if let Some(reason) = reason {
                            // Without a reason Slurm's scheduler has not looked at the job yet,
                            // and most jobs start at that first look: no write (and no event)
                            // per pod on the way to its binding.
                            let message = format!("waiting in Slurm: job {id} ({reason})");
                            condition(&mut actions, p, "False", "Pending", &message);
                        }
                    }
                }
                JobState::Running => {
                    if let Some(refit) = refit(id, &live, nodes) {
                        actions.push(refit);
                    } else {
                        bind(&mut actions, id, &live, nodes);
                    }
                }
                state if state.is_finished() => {
                    let why = format!("Slurm job {id} ended: {state}");
                    // Only the job's own pods: a pod that joined later waits for a job of its own.
                    for p in live.iter().filter(|p| p.job_id == Some(id)) {
                        if p.deleting.is_none() {
                            condition(&mut actions, p, "False", "JobEnded", &why);
                            actions.push(Action::Delete {
                                pod: p.name.clone(),
                                why: why.clone(),
                            });
                        }
                    }
                }
                // Suspended, or a state this build does not know: leave everything as it is.
                _ => {}
            }
        }
    }
    actions
}

/// A refit of job `id` when a pod would be bound where Kubernetes does not admit it and no pod
/// of the job holds a node yet (with one bound, the job's allocation is in use: the pod waits
/// for room instead, see [`bind`]).
fn refit(id: u32, live: &[&PodView], nodes: &[(String, Option<String>)]) -> Option<Action> {
    if live.iter().any(|p| p.bound_node.is_some()) {
        return None;
    }
    let (pod, node) = placements(live, nodes)
        .into_iter()
        .find(|(p, node)| p.unfit_on.contains_key(*node))?;
    Some(Action::Refit {
        job_id: id,
        pods: live
            .iter()
            .filter(|p| p.deleting.is_none())
            .map(|p| p.name.clone())
            .collect(),
        node: node.to_owned(),
        why: pod.unfit_on[node].clone(),
    })
}

/// The node of the allocation each unbound, undeleted pod goes to: the one it was given
/// before, or one no other pod of the job holds. A pod without one is left out.
fn placements<'a>(
    live: &[&'a PodView],
    nodes: &'a [(String, Option<String>)],
) -> Vec<(&'a PodView, &'a str)> {
    let held: BTreeSet<&str> = live
        .iter()
        .filter_map(|p| {
            p.bound_node
                .as_deref()
                .or(p.assigned_node.as_deref())
                .or(p.volumes.pinned())
        })
        .collect();
    let allocated: BTreeSet<&str> = nodes.iter().filter_map(|(_, k)| k.as_deref()).collect();
    let mut free = nodes
        .iter()
        .filter_map(|(_, k8s)| k8s.as_deref())
        .filter(|k| !held.contains(k));
    live.iter()
        .filter(|p| p.bound_node.is_none() && p.deleting.is_none())
        .filter_map(|p| {
            let node = match p.assigned_node.as_deref().or(p.volumes.pinned()) {
                Some(node) if allocated.contains(node) => Some(node),
                _ => free.next(),
            };
            node.map(|n| (*p, n))
        })
        .collect()
}

/// Gives each unbound pod a node of the allocation that no other pod of the job holds, where
/// Kubernetes admits it; a pod that does not fit there now waits for room.
fn bind(actions: &mut Vec<Action>, id: u32, live: &[&PodView], nodes: &[(String, Option<String>)]) {
    let placed: BTreeMap<&str, &str> = placements(live, nodes)
        .into_iter()
        .map(|(p, n)| (p.name.as_str(), n))
        .collect();
    for p in live {
        if let Some(node) = &p.bound_node {
            let message = format!("Slurm job {id} runs on {node}");
            condition(actions, p, "True", "Running", &message);
            continue;
        }
        if p.deleting.is_some() {
            continue;
        }
        match placed.get(p.name.as_str()) {
            Some(node) if p.unfit_on.contains_key(*node) => {
                let message = format!(
                    "Slurm job {id} placed the pod on {node}, where Kubernetes does not admit it now ({}); it is bound there once it fits",
                    p.unfit_on[*node]
                );
                condition(actions, p, "False", "WaitingForFit", &message);
            }
            Some(node) => bind_with_volumes(actions, id, p, node),
            None => {
                let unmapped: Vec<&str> = nodes
                    .iter()
                    .filter(|(_, k8s)| k8s.is_none())
                    .map(|(s, _)| s.as_str())
                    .collect();
                if unmapped.is_empty() {
                    // A member beyond the gang's size (a ReplicaSet scaled up, a replacement
                    // still waiting for a member to leave): it joins when a node frees up.
                    let message = format!(
                        "every node of Slurm job {id}'s allocation ({}) holds another pod of the group; this pod joins the allocation when one of them leaves",
                        nodes.len()
                    );
                    condition(actions, p, "False", "WaitingForRoom", &message);
                } else {
                    let message = format!(
                        "Slurm job {id} got node(s) {} that no Kubernetes node stands for",
                        unmapped.join(",")
                    );
                    condition(actions, p, "False", "NoNode", &message);
                }
            }
        }
    }
}

/// Holds back the submission of `waiting` while a pod's volumes do (see [`Gate::Blocked`]):
/// each such pod says why, the others that they wait for it. `true` when held.
fn held_by_volumes(actions: &mut Vec<Action>, waiting: &[&PodView]) -> bool {
    let blocked: Vec<&str> = waiting
        .iter()
        .filter(|p| matches!(p.volumes, Gate::Blocked { .. }))
        .map(|p| p.name.as_str())
        .collect();
    if blocked.is_empty() {
        return false;
    }
    let others = format!(
        "waiting for the volumes of pod(s) {} of the group before submitting its Slurm job",
        blocked.join(",")
    );
    for p in waiting {
        match &p.volumes {
            Gate::Blocked { reason, message } => condition(actions, p, "False", reason, message),
            _ => condition(actions, p, "False", "WaitingForGroup", &others),
        }
    }
    true
}

/// Binds `p` to `node` of job `id`'s allocation once its claims are bound; until then gives
/// its unbound `WaitForFirstConsumer` claims the node and says that it waits for them, and
/// after [`BIND_TIMEOUT_SECONDS`] that they were not bound in time. The job keeps the node:
/// the claims are the node's now (their provisioner may still bind them), and ending the job
/// would end the pod.
fn bind_with_volumes(actions: &mut Vec<Action>, id: u32, p: &PodView, node: &str) {
    let claims = match &p.volumes {
        Gate::Ready => {
            actions.push(Action::Bind {
                pod: p.name.clone(),
                node: node.to_owned(),
                job_id: id,
            });
            return;
        }
        // A claim deleted or changed after the submission.
        Gate::Blocked { reason, message } => {
            condition(actions, p, "False", reason, message);
            return;
        }
        Gate::Provision(claims) => claims,
    };
    let elsewhere: Vec<String> = claims
        .iter()
        .filter_map(|(c, there)| {
            there
                .as_deref()
                .filter(|t| *t != node)
                .map(|t| format!("{c:?} on {t}"))
        })
        .collect();
    if !elsewhere.is_empty() {
        let message = format!(
            "Slurm job {id} placed the pod on {node}, but claim(s) {} are being provisioned elsewhere ({SELECTED_NODE})",
            elsewhere.join(", ")
        );
        condition(actions, p, "False", reasons::VOLUME_NODE_CONFLICT, &message);
        return;
    }
    let unselected: Vec<String> = claims
        .iter()
        .filter(|(_, there)| there.is_none())
        .map(|(c, _)| c.clone())
        .collect();
    if !unselected.is_empty() {
        actions.push(Action::SelectNode {
            pod: p.name.clone(),
            node: node.to_owned(),
            claims: unselected,
        });
    }
    let names: Vec<&str> = claims.iter().map(|(c, _)| c.as_str()).collect();
    let names = names.join(",");
    let current = p.condition.as_ref().map(|(_, r, _)| r.as_str());
    let overdue = current == Some(reasons::BINDING_TIMEOUT)
        || (current == Some(reasons::WAITING_FOR_BINDING)
            && p.condition_age.is_some_and(|a| a >= BIND_TIMEOUT_SECONDS));
    if overdue {
        let message = format!(
            "claim(s) {names} not bound {BIND_TIMEOUT_SECONDS} s after {SELECTED_NODE}={node}: check their StorageClass's provisioner; Slurm job {id} keeps the node, and the pod is bound once they are (delete the pod to free the node)"
        );
        condition(actions, p, "False", reasons::BINDING_TIMEOUT, &message);
    } else {
        let message = format!(
            "Slurm job {id} placed the pod on {node}; waiting for claim(s) {names} to be provisioned and bound there"
        );
        condition(actions, p, "False", reasons::WAITING_FOR_BINDING, &message);
    }
}

fn condition(actions: &mut Vec<Action>, pod: &PodView, status: &str, reason: &str, message: &str) {
    let wanted = (status.to_owned(), reason.to_owned(), message.to_owned());
    if pod.condition.as_ref() != Some(&wanted) {
        actions.push(Action::Condition {
            pod: pod.name.clone(),
            status: wanted.0,
            reason: wanted.1,
            message: wanted.2,
        });
    }
}

#[cfg(test)]
mod tests;
