//! Following jobs and nodes over time without re-reading everything: [`JobTracker`] and
//! [`NodeTracker`] keep the last known set and turn each poll into [`Change`] events.
//!
//! # How it stays cheap
//!
//! Every poll after the first sends `update_time=<last_update of the previous answer>`.
//! slurmctld then answers "nothing changed" (jobs: an empty list; nodes: HTTP 304 without
//! a body) unless something changed since that time, so polling a quiet cluster moves a
//! few hundred bytes instead of the whole job list (tens of MB on a large cluster).
//!
//! slurmctld has no "only what changed" mode: when anything changed, it sends *every* job
//! (or node). The tracker diffs that against its set. Because such an answer is complete,
//! purged jobs are found for free — they are simply missing — so no periodic full re-list
//! is needed to detect removals. Purging a job counts as a change in slurmctld, so the next
//! poll after a purge carries the full list. Trade-off: `update_time` has one-second
//! resolution and slurmctld re-sends the list while the last change is at most one second
//! older than the previous answer, so right after a change one extra full answer arrives.
//!
//! REST v0.0.40/41 reject numeric `update_time`s (Slurm 24.11 bug), so there the tracker
//! sends the relative form `now-<n>seconds`, computed with this machine's clock; a clock
//! running behind the server's could miss a change until the next one. Use
//! [`Tracker::resync_every`] to bound that (a full re-list every N polls).
//!
//! Events report meaningful changes only: fields that move on every scheduler pass or
//! every node heartbeat (a job's `last_sched_evaluation`; a node's `cpu_load`,
//! `memory_free_mb`, `last_busy`) do not by themselves make a `Changed` event, but the
//! [`snapshot`](Tracker::snapshot) always holds the latest values.

use std::collections::HashMap;
use std::hash::Hash;

use crate::model::{Job, JobQuery, Node, NodeQuery};
use crate::{Client, Error};

/// A change between two polls.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    /// Seen for the first time (every item, on the first poll).
    Added(T),
    /// Known before and different now.
    Changed {
        /// As it was.
        old: T,
        /// As it is.
        new: T,
    },
    /// Gone (a job purged from slurmctld's memory, a node deleted).
    Removed(T),
}

impl<T> Change<T> {
    /// The item as it is now (or was, when removed).
    pub fn item(&self) -> &T {
        match self {
            Change::Added(t) | Change::Removed(t) | Change::Changed { new: t, .. } => t,
        }
    }
}

/// What one poll did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Poll<T> {
    /// The changes, in no particular order.
    pub changes: Vec<Change<T>>,
    /// slurmctld said nothing changed (nothing was transferred but the envelope).
    pub unchanged: bool,
    /// How many items the answer carried (0 when unchanged).
    pub received: usize,
    /// Whether this poll was a full re-list (the first one, or a resync).
    pub full: bool,
}

/// What a tracker follows: how to fetch the set and how to compare items.
pub trait Tracked: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The key identifying an item.
    type Key: Hash + Eq + Clone + std::fmt::Debug + Send + Sync;

    /// The item's key.
    fn key(&self) -> Self::Key;

    /// Whether two versions of an item differ in a way worth an event.
    fn differs(&self, other: &Self) -> bool;

    /// Fetches the set; `None` when `update_time` was given and nothing changed since.
    /// The second value is the answer's `last_update`.
    fn fetch(
        client: &Client,
        update_time: Option<i64>,
    ) -> impl std::future::Future<Output = Result<(Option<Vec<Self>>, Option<i64>), Error>> + Send;
}

impl Tracked for Job {
    type Key = u32;

    fn key(&self) -> u32 {
        self.id
    }

    fn differs(&self, other: &Self) -> bool {
        let mut a = self.clone();
        a.last_sched_evaluation = other.last_sched_evaluation;
        a != *other
    }

    async fn fetch(
        client: &Client,
        update_time: Option<i64>,
    ) -> Result<(Option<Vec<Job>>, Option<i64>), Error> {
        let query = JobQuery {
            update_time,
            ..JobQuery::default()
        };
        let list = client.list_jobs(&query).await?.value;
        Ok(((!list.unchanged).then_some(list.jobs), list.last_update))
    }
}

impl Tracked for Node {
    type Key = String;

    fn key(&self) -> String {
        self.name.clone()
    }

    fn differs(&self, other: &Self) -> bool {
        let mut a = self.clone();
        a.cpu_load = other.cpu_load;
        a.memory_free_mb = other.memory_free_mb;
        a.last_busy = other.last_busy;
        a != *other
    }

    async fn fetch(
        client: &Client,
        update_time: Option<i64>,
    ) -> Result<(Option<Vec<Node>>, Option<i64>), Error> {
        let query = NodeQuery {
            update_time,
            ..NodeQuery::default()
        };
        let list = client.list_nodes(&query).await?.value;
        Ok(((!list.unchanged).then_some(list.nodes), list.last_update))
    }
}

/// Follows a set of jobs or nodes; see the [module docs](self).
///
/// ```no_run
/// # async fn demo(client: slurm_client::Client) -> Result<(), slurm_client::Error> {
/// use slurm_client::{Change, JobTracker};
/// let mut tracker = JobTracker::new(client);
/// loop {
///     for change in tracker.poll().await?.changes {
///         match change {
///             Change::Added(job) => println!("new job {} ({})", job.id, job.state),
///             Change::Changed { old, new } => println!("job {}: {} -> {}", new.id, old.state, new.state),
///             Change::Removed(job) => println!("job {} purged", job.id),
///         }
///     }
///     tokio::time::sleep(std::time::Duration::from_secs(10)).await;
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Tracker<T: Tracked> {
    client: Client,
    items: HashMap<T::Key, T>,
    last_update: Option<i64>,
    resync_every: Option<u32>,
    polls_since_full: u32,
}

/// A [`Tracker`] of jobs, keyed by job id.
pub type JobTracker = Tracker<Job>;
/// A [`Tracker`] of nodes, keyed by node name.
pub type NodeTracker = Tracker<Node>;

impl<T: Tracked> Tracker<T> {
    /// A tracker that knows nothing yet: the first poll lists everything as `Added`.
    pub fn new(client: Client) -> Self {
        Tracker {
            client,
            items: HashMap::new(),
            last_update: None,
            resync_every: None,
            polls_since_full: 0,
        }
    }

    /// Re-lists everything (ignoring `update_time`) every `polls` polls, as a safety net
    /// against missed changes (see the [module docs](self)). Off by default.
    pub fn resync_every(mut self, polls: u32) -> Self {
        self.resync_every = (polls > 0).then_some(polls);
        self
    }

    /// Asks slurmctld what changed since the last poll.
    pub async fn poll(&mut self) -> Result<Poll<T>, Error> {
        let resync = self
            .resync_every
            .is_some_and(|n| self.polls_since_full + 1 >= n);
        let update_time = if resync { None } else { self.last_update };
        let (items, last_update) = T::fetch(&self.client, update_time).await?;
        let full = update_time.is_none();
        if full {
            self.polls_since_full = 0;
        } else {
            self.polls_since_full += 1;
        }
        let Some(items) = items else {
            return Ok(Poll {
                changes: Vec::new(),
                unchanged: true,
                received: 0,
                full,
            });
        };
        // A complete answer without a time (should not happen) keeps the old one.
        if last_update.is_some() {
            self.last_update = last_update;
        }
        let received = items.len();
        Ok(Poll {
            changes: apply(&mut self.items, items),
            unchanged: false,
            received,
            full,
        })
    }

    /// The current set, as of the last poll.
    pub fn snapshot(&self) -> impl Iterator<Item = &T> {
        self.items.values()
    }

    /// One item of the current set.
    pub fn get(&self, key: &T::Key) -> Option<&T> {
        self.items.get(key)
    }

    /// How many items the current set has.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the current set is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `last_update` of the last complete answer, sent as `update_time` next time.
    pub fn last_update(&self) -> Option<i64> {
        self.last_update
    }
}

/// Replaces `known` by `fresh` (a complete set) and says what changed.
fn apply<T: Tracked>(known: &mut HashMap<T::Key, T>, fresh: Vec<T>) -> Vec<Change<T>> {
    let mut changes = Vec::new();
    let mut next = HashMap::with_capacity(fresh.len());
    for item in fresh {
        let key = item.key();
        match known.remove(&key) {
            None => changes.push(Change::Added(item.clone())),
            Some(old) if old.differs(&item) => changes.push(Change::Changed {
                old,
                new: item.clone(),
            }),
            Some(_) => {}
        }
        next.insert(key, item);
    }
    changes.extend(known.drain().map(|(_, old)| Change::Removed(old)));
    *known = next;
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobState;

    fn job(id: u32, state: JobState) -> Job {
        Job {
            id,
            state,
            ..Job::default()
        }
    }

    #[test]
    fn diff_reports_added_changed_removed() {
        let mut known = HashMap::new();
        let first = apply(
            &mut known,
            vec![job(1, JobState::Pending), job(2, JobState::Running)],
        );
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|c| matches!(c, Change::Added(_))));

        let mut j1 = job(1, JobState::Pending);
        j1.last_sched_evaluation = Some(42);
        let second = apply(&mut known, vec![j1, job(3, JobState::Pending)]);
        assert_eq!(second.len(), 2, "{second:?}");
        assert!(second.contains(&Change::Added(job(3, JobState::Pending))));
        assert!(second.contains(&Change::Removed(job(2, JobState::Running))));
        // The volatile field was stored even though it made no event.
        assert_eq!(known[&1].last_sched_evaluation, Some(42));

        let third = apply(
            &mut known,
            vec![job(1, JobState::Running), job(3, JobState::Pending)],
        );
        assert_eq!(third.len(), 1);
        let Change::Changed { old, new } = &third[0] else {
            panic!("{third:?}")
        };
        assert_eq!(
            (old.state.clone(), new.state.clone()),
            (JobState::Pending, JobState::Running)
        );
        assert_eq!(third[0].item().id, 1);
    }

    #[test]
    fn node_heartbeat_fields_make_no_event() {
        let mut known = HashMap::new();
        let node = Node {
            name: "n1".into(),
            ..Node::default()
        };
        apply(&mut known, vec![node.clone()]);
        let mut busy = node.clone();
        busy.cpu_load = Some(300);
        busy.last_busy = Some(5);
        assert!(apply(&mut known, vec![busy.clone()]).is_empty());
        busy.reason = Some("bad".into());
        assert_eq!(apply(&mut known, vec![busy]).len(), 1);
    }
}
