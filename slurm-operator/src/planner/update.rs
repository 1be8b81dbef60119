//! RollingUpdate: which old-revision pods to replace now.

use std::collections::HashMap;

use jiff::Timestamp;
use slurm_client::model::{Node, NodeState};

use super::drain::REASON_PREFIX;
use super::victims::{Candidate, sort_for_deletion};
use super::view::{MaxUnavailable, NodeSetView, PodView};

/// Old-revision pods to condemn now, from `pods` (the live pods of this scaling mode, none
/// terminating or terminal): every unhealthy one, then healthy ones in deletion order while
/// fewer than `maxUnavailable` are unavailable. New-revision pods that are not available, or
/// whose Slurm node does not take jobs yet (see [`takes_jobs`]; `nodes`: the Slurm nodes, when
/// known), replica slots without a live pod, and cordoned old pods count as unavailable (see
/// [`within_budget`]).
pub fn rolling_update_victims<'a>(
    nodeset: &NodeSetView,
    max_unavailable: MaxUnavailable,
    pods: &[Candidate<'a>],
    nodes: Option<&HashMap<String, Node>>,
    now: Timestamp,
) -> Vec<Candidate<'a>> {
    let total = nodeset.replicas;
    let (new, old): (Vec<Candidate<'a>>, Vec<Candidate<'a>>) = pods
        .iter()
        .copied()
        .partition(|c| c.pod.revision == nodeset.update_revision);
    let (mut victims, mut healthy_old): (Vec<Candidate<'a>>, Vec<Candidate<'a>>) =
        old.into_iter().partition(|c| !c.pod.is_healthy());
    let live = u32::try_from(pods.len()).unwrap_or(u32::MAX);
    let empty_slots = total.saturating_sub(live);
    let unavailable_new = new
        .iter()
        .filter(|c| {
            !c.pod.is_available(nodeset.min_ready_seconds, now)
                || nodes.is_some_and(|nodes| !takes_jobs(c.pod, nodes))
        })
        .count() as u32;
    let budget = max_unavailable
        .scaled(total)
        .saturating_sub(empty_slots + unavailable_new) as usize;
    sort_for_deletion(&mut healthy_old);
    let take = within_budget(&healthy_old, budget);
    victims.extend(healthy_old.into_iter().take(take));
    victims
}

/// How many of `order`'s first pods to condemn so that they and the cordoned pods (whose Slurm
/// nodes the operator drains, or an administrator had drained) number at most `budget`. A pod
/// condemned in an earlier pass may no longer come first (a job's deadline became known): it
/// still takes no jobs until cordon sync lifts its drain, so the pod that now comes first waits
/// for that rather than drain a second node.
fn within_budget(order: &[Candidate<'_>], budget: usize) -> usize {
    let cordoned = order.iter().filter(|c| c.cordoned).count();
    (0..=budget.min(order.len()))
        .rev()
        .find(|&k| k + cordoned - order[..k].iter().filter(|c| c.cordoned).count() <= budget)
        .unwrap_or(0)
}

/// Whether a new pod's Slurm node takes jobs, as far as the rollout is concerned: registered,
/// answering, and not drained or down for a reason of the operator's. A replacement registers
/// under the old pod's name, whose record the preStop hook left DOWN and drained (`slurm-operator:
/// Pod is terminating`) until the operator lifts that: Kubernetes calls the pod ready before
/// Slurm would run a job there, and the next old pod drained at that moment would leave one
/// node fewer than `maxUnavailable` allows. An administrator's drain or down does not hold the
/// rollout. A pod without a hostname is judged by Kubernetes alone.
fn takes_jobs(pod: &PodView, nodes: &HashMap<String, Node>) -> bool {
    if pod.slurm_node.is_empty() {
        return true;
    }
    let Some(node) = nodes.get(&pod.slurm_node) else {
        return false;
    };
    let ours = node
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with(REASON_PREFIX));
    let held = ours && (node.is_draining() || node.state == NodeState::Down);
    !(node.is_not_responding() || node.is_down_not_responding() || held)
}
