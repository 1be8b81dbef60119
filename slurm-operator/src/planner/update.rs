//! RollingUpdate: which old-revision pods to replace now.

use jiff::Timestamp;

use super::victims::{Candidate, sort_for_deletion};
use super::view::{MaxUnavailable, NodeSetView};

/// Old-revision pods to condemn now, from `pods` (the live pods of this scaling mode, none
/// terminating or terminal): every unhealthy one, then healthy ones in deletion order while
/// fewer than `maxUnavailable` are unavailable. New-revision pods that are not available and
/// replica slots without a live pod count as unavailable; a pod being drained is still
/// available, and sorts first again because it is cordoned.
pub fn rolling_update_victims<'a>(
    nodeset: &NodeSetView,
    max_unavailable: MaxUnavailable,
    pods: &[Candidate<'a>],
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
        .filter(|c| !c.pod.is_available(nodeset.min_ready_seconds, now))
        .count() as u32;
    let budget = max_unavailable
        .scaled(total)
        .saturating_sub(empty_slots + unavailable_new);
    sort_for_deletion(&mut healthy_old);
    victims.extend(healthy_old.into_iter().take(budget as usize));
    victims
}
