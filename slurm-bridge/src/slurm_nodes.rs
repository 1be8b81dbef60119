//! The Slurm node names, followed with the client's change tracking (a quiet cluster answers
//! "unchanged" in a few bytes), for the excluded-nodes list of new jobs.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use slurm_client::{Client, NodeTracker};
use tokio::sync::Notify;

/// The names, shared; `None` until the first poll succeeded.
#[derive(Debug, Clone, Default)]
pub struct SlurmNodes {
    names: Arc<RwLock<Option<BTreeSet<String>>>>,
    poll_now: Arc<Notify>,
}

impl SlurmNodes {
    /// The names, or `None` while unknown.
    pub fn names(&self) -> Option<BTreeSet<String>> {
        self.names.read().expect("not poisoned").clone()
    }

    /// Asks for a poll now, without waiting for the period: the bridge has just registered or
    /// deleted a node, which pods waiting for a node should not learn a period later.
    pub fn poll_now(&self) {
        self.poll_now.notify_one();
    }

    /// Polls every `every` until the process ends; calls `changed` when the set changed.
    pub async fn follow(&self, client: Client, every: Duration, changed: impl Fn()) {
        let mut tracker = NodeTracker::new(client);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.poll_now.notified() => {}
            }
            match tracker.poll().await {
                Ok(poll) if poll.changes.is_empty() && self.names().is_some() => {}
                Ok(_) => {
                    let names: BTreeSet<String> =
                        tracker.snapshot().map(|n| n.name.clone()).collect();
                    let mut known = self.names.write().expect("not poisoned");
                    if known.as_ref() != Some(&names) {
                        *known = Some(names);
                        drop(known);
                        changed();
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the Slurm nodes; keeping the last list")
                }
            }
        }
    }
}
