//! One Slurm REST client per Controller, reached through the cluster's RestApi Service with a
//! token the operator mints from the Controller's JWT key, and the cluster's nodes followed with
//! the client's change tracking (`update_time`: a quiet cluster answers "nothing changed")
//! instead of a full re-list every 30 s.
//!
//! A failed poll turns the view into [`NodeView::Unavailable`]: decisions that need Slurm then
//! keep everything as it is (fail closed), and the next successful poll restores the view.
//!
//! The same task follows the cluster's jobs (a [`JobTracker`], also with `update_time`) to
//! know, per Slurm node, when its last running job reaches its time limit: the
//! `nodeset.slinky.slurm.net/pod-deadline` annotation ([`SlurmClusters::deadlines`]). A
//! change of those deadlines wakes the cluster's NodeSets as a node change does; a failed
//! job poll makes them unknown (`None`), and the annotations are then left as they are.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use secrecy::SecretSlice;
use slurm_client::hostlist::{self, HostlistError};
use slurm_client::model::{Job, Node};
use slurm_client::tracking::{JobTracker, NodeTracker};
use slurm_client::{Client, MintedToken};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// A Slurm cluster: the namespace and name of its Controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    /// Namespace of the Controller (and of everything that refers to it).
    pub namespace: String,
    /// Name of the Controller.
    pub controller: String,
}

/// What the operator knows of a cluster's Slurm nodes.
#[derive(Debug, Clone)]
pub enum NodeView {
    /// No poll has finished yet.
    Unknown,
    /// The last poll failed; the message says why (never with a token).
    Unavailable(String),
    /// The nodes as of the last successful poll, by name.
    Known(Arc<HashMap<String, Node>>),
}

impl NodeView {
    /// The nodes, or why they are not known.
    pub fn nodes(&self) -> Result<&HashMap<String, Node>, String> {
        match self {
            NodeView::Known(nodes) => Ok(nodes),
            NodeView::Unknown => Err("Slurm nodes not read yet".into()),
            NodeView::Unavailable(why) => Err(why.clone()),
        }
    }
}

/// How to reach one cluster's slurmrestd.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// e.g. `http://slurm-restapi.slurm:6820`.
    pub url: String,
    /// sha256 of the JWT key, to notice a rotated key without keeping a second copy of it.
    pub key_hash: String,
}

/// Per Slurm node, the latest time-limit end of its running jobs; `None` while the jobs are
/// not known (not read yet, or the last job poll failed).
pub type Deadlines = Option<Arc<HashMap<String, Timestamp>>>;

struct Entry {
    endpoint: Endpoint,
    client: Client,
    nodes: watch::Receiver<NodeView>,
    deadlines: watch::Receiver<Deadlines>,
    task: JoinHandle<()>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The clients of every cluster the operator manages.
#[derive(Clone)]
pub struct SlurmClusters {
    entries: Arc<Mutex<BTreeMap<ClusterKey, Entry>>>,
    changed: mpsc::UnboundedSender<ClusterKey>,
    poll_every: Duration,
}

/// The user the operator's own tokens stand for: slurmctld's SlurmUser, as Slinky's operator uses.
pub const OPERATOR_USER: &str = "slurm";

/// Lifespan of the operator's own tokens; renewed at 80% by [`MintedToken`].
const TOKEN_LIFESPAN: Duration = Duration::from_secs(15 * 60);

impl SlurmClusters {
    /// A registry whose trackers poll every `poll_every` and send a cluster's key on `changed`
    /// whenever its nodes change (or become unavailable).
    pub fn new(poll_every: Duration, changed: mpsc::UnboundedSender<ClusterKey>) -> SlurmClusters {
        SlurmClusters {
            entries: Arc::default(),
            changed,
            poll_every,
        }
    }

    /// The client of `key`, made (or re-made, when the URL or key changed) for `endpoint`.
    pub fn client(
        &self,
        key: &ClusterKey,
        endpoint: Endpoint,
        jwt_key: &[u8],
    ) -> Result<Client, slurm_client::Error> {
        let mut entries = self.entries.lock().expect("slurm registry lock");
        if let Some(entry) = entries.get(key)
            && entry.endpoint == endpoint
        {
            return Ok(entry.client.clone());
        }
        let token = MintedToken::new(SecretSlice::from(jwt_key.to_vec()), OPERATOR_USER)
            .lifespan(TOKEN_LIFESPAN);
        let client = Client::builder(endpoint.url.clone()).token(token).build()?;
        let (tx, rx) = watch::channel(NodeView::Unknown);
        let (deadlines_tx, deadlines_rx) = watch::channel(None);
        let task = tokio::spawn(track(
            key.clone(),
            client.clone(),
            Views {
                nodes: tx,
                deadlines: deadlines_tx,
            },
            self.changed.clone(),
            self.poll_every,
        ));
        entries.insert(
            key.clone(),
            Entry {
                endpoint,
                client: client.clone(),
                nodes: rx,
                deadlines: deadlines_rx,
                task,
            },
        );
        Ok(client)
    }

    /// The node view of `key`; [`NodeView::Unknown`] when there is no client for it.
    pub fn nodes(&self, key: &ClusterKey) -> NodeView {
        let entries = self.entries.lock().expect("slurm registry lock");
        entries
            .get(key)
            .map(|e| e.nodes.borrow().clone())
            .unwrap_or(NodeView::Unknown)
    }

    /// The running jobs' deadlines per Slurm node of `key`; `None` when unknown (no client,
    /// not read yet, or the last job poll failed).
    pub fn deadlines(&self, key: &ClusterKey) -> Deadlines {
        let entries = self.entries.lock().expect("slurm registry lock");
        entries.get(key).and_then(|e| e.deadlines.borrow().clone())
    }

    /// Forgets a cluster (its Controller or RestApi is gone); stops its tracker.
    pub fn remove(&self, key: &ClusterKey) {
        self.entries
            .lock()
            .expect("slurm registry lock")
            .remove(key);
    }
}

/// Where a cluster's tracker publishes what it read.
struct Views {
    nodes: watch::Sender<NodeView>,
    deadlines: watch::Sender<Deadlines>,
}

async fn track(
    key: ClusterKey,
    client: Client,
    views: Views,
    changed: mpsc::UnboundedSender<ClusterKey>,
    every: Duration,
) {
    // A full re-list now and then bounds what a clock skew between here and slurmctld could hide.
    let mut nodes = NodeTracker::new(client.clone()).resync_every(60);
    let mut jobs = JobTracker::new(client).resync_every(60);
    let (mut nodes_failing, mut jobs_failing) = (false, false);
    loop {
        // Both polls before the wake-up: a pass must not see a job's node busy without its
        // deadline (the deletion order would pick another victim a moment later).
        let nodes_changed = poll_nodes(&key, &mut nodes, &views.nodes, &mut nodes_failing).await;
        let jobs_changed = poll_jobs(&key, &mut jobs, &views.deadlines, &mut jobs_failing).await;
        if nodes_changed || jobs_changed {
            let _ = changed.send(key.clone());
        }
        tokio::time::sleep(every).await;
    }
}

/// One node poll; true when the view changed.
async fn poll_nodes(
    key: &ClusterKey,
    tracker: &mut NodeTracker,
    view: &watch::Sender<NodeView>,
    failing: &mut bool,
) -> bool {
    match tracker.poll().await {
        Ok(poll) => {
            let first = matches!(*view.borrow(), NodeView::Unknown);
            let changed = *failing || first || !poll.changes.is_empty();
            if changed {
                let nodes = tracker
                    .snapshot()
                    .map(|n| (n.name.clone(), n.clone()))
                    .collect();
                view.send_replace(NodeView::Known(Arc::new(nodes)));
            }
            *failing = false;
            changed
        }
        Err(e) => {
            let was_failing = std::mem::replace(failing, true);
            if !was_failing {
                tracing::warn!(
                    namespace = %key.namespace,
                    controller = %key.controller,
                    error = %e,
                    "cannot read Slurm nodes; no worker pod is deleted until this recovers"
                );
                view.send_replace(NodeView::Unavailable(e.to_string()));
            }
            !was_failing
        }
    }
}

/// One job poll; true when the deadlines changed (a job starting, ending or changing its
/// time limit; other job changes wake nothing).
async fn poll_jobs(
    key: &ClusterKey,
    tracker: &mut JobTracker,
    view: &watch::Sender<Deadlines>,
    failing: &mut bool,
) -> bool {
    let read = match tracker.poll().await {
        Ok(poll) if poll.changes.is_empty() && view.borrow().is_some() => return false,
        Ok(_) => job_deadlines(tracker.snapshot()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match read {
        Ok(deadlines) => {
            *failing = false;
            let same = view.borrow().as_deref() == Some(&deadlines);
            if !same {
                view.send_replace(Some(Arc::new(deadlines)));
            }
            !same
        }
        Err(why) => {
            if !std::mem::replace(failing, true) {
                tracing::warn!(
                    namespace = %key.namespace,
                    controller = %key.controller,
                    error = %why,
                    "cannot read Slurm jobs; pod-deadline annotations are left as they are"
                );
            }
            view.send_replace(None).is_some()
        }
    }
}

/// Per Slurm node, the latest deadline (start + time limit) of the running (or suspended)
/// jobs on it. A job whose node list cannot be read makes the whole map unknown rather than
/// silently missing a node.
pub fn job_deadlines<'a>(
    jobs: impl IntoIterator<Item = &'a Job>,
) -> Result<HashMap<String, Timestamp>, HostlistError> {
    let mut deadlines = HashMap::new();
    for job in jobs.into_iter().filter(|j| j.is_running()) {
        let nodes = hostlist::expand(job.nodes.as_deref().unwrap_or(""))?;
        let deadline =
            crate::planner::deadline::job_deadline(job.start_time, job.time_limit_minutes);
        crate::planner::deadline::record(
            &mut deadlines,
            nodes.iter().map(String::as_str),
            deadline,
        );
    }
    Ok(deadlines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_client::model::{JobState, Limit};

    fn job(id: u32, state: JobState, nodes: &str, start: i64, minutes: Limit<u32>) -> Job {
        let mut j = Job::default();
        j.id = id;
        j.state = state;
        j.nodes = Some(nodes.into());
        j.start_time = Some(start);
        j.time_limit_minutes = minutes;
        j
    }

    #[test]
    fn deadlines_of_running_jobs_latest_per_node() {
        let jobs = [
            job(1, JobState::Running, "w-[0-1]", 1_000, Limit::Value(10)),
            job(2, JobState::Running, "w-1,w-2", 1_000, Limit::Value(60)),
            job(3, JobState::Pending, "", 0, Limit::Value(5)),
            job(4, JobState::Completed, "w-3", 1_000, Limit::Value(5)),
            job(5, JobState::Suspended, "w-4", 1_000, Limit::Infinite),
        ];
        let map = job_deadlines(&jobs).unwrap();
        let secs = |n: &str| map[n].as_second();
        assert_eq!(secs("w-0"), 1_600);
        assert_eq!(secs("w-1"), 4_600);
        assert_eq!(secs("w-2"), 4_600);
        assert_eq!(map["w-4"], Timestamp::MAX);
        assert!(!map.contains_key("w-3"));
        assert_eq!(map.len(), 4);

        let bad = [job(6, JobState::Running, "w-[1-", 0, Limit::Value(1))];
        assert!(
            job_deadlines(&bad)
                .unwrap_err()
                .to_string()
                .contains("w-[1-")
        );
        assert!(job_deadlines(&[]).unwrap().is_empty());
    }
}
