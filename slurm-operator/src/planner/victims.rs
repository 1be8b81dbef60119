//! Which pods go first when a NodeSet shrinks or rolls (Slinky's `ActivePods` order).

use std::cmp::Ordering;

use jiff::Timestamp;

use super::view::{PodPhase, PodView};

/// A pod as the order sees it: the cordon and deadline are the ones the plan is about to
/// write, so a pod cordoned in this pass already sorts as cordoned.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub pod: &'a PodView,
    pub cordoned: bool,
    pub deadline: Option<Timestamp>,
}

impl<'a> Candidate<'a> {
    /// The pod with its own annotations.
    pub fn of(pod: &'a PodView) -> Candidate<'a> {
        Candidate {
            pod,
            cordoned: pod.cordoned,
            deadline: pod.deadline,
        }
    }
}

fn phase_weight(phase: Option<PodPhase>) -> u8 {
    match phase {
        Some(PodPhase::Unknown) => 1,
        Some(PodPhase::Running) => 2,
        _ => 0,
    }
}

/// `Less` when `a` should be deleted before `b`. The first criterion that differs decides:
/// unassigned before assigned; Pending before Unknown before Running; not ready before ready;
/// lower deletion cost; earlier deadline (none is earliest); cordoned before not; higher
/// ordinal; (both ready) more recently ready; newer (an unknown time counts as newest).
pub fn deletion_order(a: &Candidate<'_>, b: &Candidate<'_>) -> Ordering {
    let (pa, pb) = (a.pod, b.pod);
    // Two pods on different nodes are not ordered by assignment; only "none" vs "some" is.
    if pa.k8s_node != pb.k8s_node && (!pa.is_assigned() || !pb.is_assigned()) {
        let o = pa.is_assigned().cmp(&pb.is_assigned());
        if o.is_ne() {
            return o;
        }
    }
    phase_weight(pa.phase)
        .cmp(&phase_weight(pb.phase))
        .then(pa.ready.cmp(&pb.ready))
        .then(pa.deletion_cost.cmp(&pb.deletion_cost))
        .then(a.deadline.cmp(&b.deadline))
        .then(b.cordoned.cmp(&a.cordoned))
        .then(pb.ordinal.cmp(&pa.ordinal))
        .then_with(|| {
            if pa.ready && pb.ready {
                newest_first(pa.ready_since, pb.ready_since)
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| newest_first(pa.created, pb.created))
}

/// Later times first, an unknown time before any known one.
fn newest_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// Sorts `candidates` so that the first ones are the first to delete.
pub fn sort_for_deletion(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(deletion_order);
}
