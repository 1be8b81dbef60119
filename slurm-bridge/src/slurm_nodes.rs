//! The Slurm node names, followed with the client's change tracking (a quiet cluster answers
//! "unchanged" in a few bytes), for the excluded-nodes list of new jobs.
//!
//! A list read longer ago than the poll period plus twice [`CALL_TIMEOUT`] is not used
//! ([`SlurmNodes::names`] is `None`, so submissions wait and exclusions are left as they are):
//! a slurmrestd that does not answer fails each call within [`CALL_TIMEOUT`], retries included,
//! and nothing is decided from the list it gave before.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use slurm_client::{Client, NodeTracker};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The deadline of every call the bridge makes to slurmrestd, retries included (its requests
/// are small: it never lists the cluster's jobs). A hung slurmrestd fails a poll within it, so
/// the polls are marked failed (metrics `slurm_call` with an error, a warning) well within 20 s.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(8);

/// The names, shared; `None` until the first poll succeeded.
#[derive(Debug, Clone, Default)]
pub struct SlurmNodes {
    names: Arc<RwLock<Option<Read>>>,
    poll_now: Arc<Notify>,
}

/// The names and when the poll that read (or confirmed) them started; how old they may be.
#[derive(Debug, Clone)]
struct Read {
    names: BTreeSet<String>,
    at: Instant,
    limit: Duration,
}

impl SlurmNodes {
    /// The names, or `None` while unknown or read too long ago (see the module docs).
    pub fn names(&self) -> Option<BTreeSet<String>> {
        let read = self.names.read().expect("not poisoned");
        read.as_ref()
            .filter(|r| r.at.elapsed() <= r.limit)
            .map(|r| r.names.clone())
    }

    /// Asks for a poll now, without waiting for the period: the bridge has just registered or
    /// deleted a node, which pods waiting for a node should not learn a period later.
    pub fn poll_now(&self) {
        self.poll_now.notify_one();
    }

    /// Polls every `every` until the process ends; calls `changed` when the set changed.
    pub async fn follow(&self, client: Client, every: Duration, changed: impl Fn()) {
        let mut tracker = NodeTracker::new(client);
        let limit = every + 2 * CALL_TIMEOUT;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.poll_now.notified() => {}
            }
            let started = Instant::now();
            let was_fresh = self.names().is_some();
            match tracker.poll().await {
                Ok(poll) if poll.changes.is_empty() && was_fresh => {
                    if let Some(read) = self.names.write().expect("not poisoned").as_mut() {
                        read.at = started;
                    }
                }
                Ok(_) => {
                    let names: BTreeSet<String> =
                        tracker.snapshot().map(|n| n.name.clone()).collect();
                    let mut known = self.names.write().expect("not poisoned");
                    let same = known.as_ref().is_some_and(|r| r.names == names);
                    *known = Some(Read {
                        names,
                        at: started,
                        limit,
                    });
                    drop(known);
                    // A list that was too old to use is usable again: a change too.
                    if !same || !was_fresh {
                        changed();
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        stale_after_s = limit.as_secs(),
                        "cannot list the Slurm nodes; the last list is used until it is older than stale_after_s"
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_list_read_too_long_ago_is_not_used() {
        let nodes = SlurmNodes::default();
        let limit = Duration::from_secs(5) + 2 * CALL_TIMEOUT;
        *nodes.names.write().unwrap() = Some(Read {
            names: ["n1".to_string()].into(),
            at: Instant::now(),
            limit,
        });
        tokio::time::advance(limit).await;
        assert_eq!(nodes.names().unwrap().len(), 1);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(nodes.names(), None);
        assert!(limit < Duration::from_secs(22));
    }
}
