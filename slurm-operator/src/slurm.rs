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
//!
//! Nothing stale is acted on. The node polls have their own client with a short deadline
//! ([`NODE_CALL_TIMEOUT`], retries included): a slurmrestd that accepts connections but never
//! answers fails a poll, and so turns the view `Unavailable`, within the poll period plus that
//! deadline (12 s by default). Whatever the polls do, a view read longer ago than
//! [`SlurmClusters::stale_after`] reads as `Unavailable` (deadlines as `None`): a guard for
//! a tracker that stopped, set beyond what polls that each end within their deadline can
//! reach (two polls, the wait for the job poll and the pause between: 29 s by default), so
//! that a slurmrestd slow but in time never makes the view flap. A view that was stale and is
//! read again wakes the cluster's NodeSets as a change does. The job polls have a client of their own
//! with the client library's default deadline (a full listing of 20,000 jobs takes
//! slurmrestd about 45 s) and run beside the node polls, so a long listing holds up neither
//! the node view nor its freshness.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use secrecy::SecretSlice;
use slurm_client::hostlist::{self, HostlistError};
use slurm_client::model::{Job, Node};
use slurm_client::tracking::{JobTracker, NodeTracker};
use slurm_client::{Client, MintedToken, TokenProvider};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

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

/// A view and when the poll that read it (or found it unchanged) started.
#[derive(Debug, Clone)]
pub struct Stamped<T> {
    /// What was read.
    pub value: T,
    /// When the poll that read or confirmed it started.
    pub read_at: Instant,
}

impl<T> Stamped<T> {
    fn now(value: T) -> Stamped<T> {
        Stamped {
            value,
            read_at: Instant::now(),
        }
    }
}

/// The deadline of one node poll, retries included: a node listing is small (4.86 MiB for
/// 2,004 nodes) and quick, and a slurmrestd that does not answer must turn the view
/// `Unavailable` well within 20 s.
pub const NODE_CALL_TIMEOUT: Duration = Duration::from_secs(7);

/// [`SlurmClusters::stale_after`] for polls every `every`.
fn stale_after(every: Duration) -> Duration {
    3 * every + 2 * NODE_CALL_TIMEOUT
}

/// `view` as it may be acted on at `now`: a known view read more than `limit` ago is
/// `Unavailable` (fail closed), whatever the polls are doing.
pub fn trusted(view: &Stamped<NodeView>, now: Instant, limit: Duration) -> NodeView {
    let age = now.saturating_duration_since(view.read_at);
    match &view.value {
        NodeView::Known(_) if age > limit => NodeView::Unavailable(format!(
            "the Slurm nodes were last read {} s ago, longer than the {} s a view is trusted: slurmrestd does not answer in time",
            age.as_secs(),
            limit.as_secs()
        )),
        other => other.clone(),
    }
}

/// The deadlines of `view` as they may be acted on at `now`: `None` when read more than
/// `limit` ago.
pub fn trusted_deadlines(view: &Stamped<Deadlines>, now: Instant, limit: Duration) -> Deadlines {
    let age = now.saturating_duration_since(view.read_at);
    view.value.clone().filter(|_| age <= limit)
}

struct Entry {
    endpoint: Endpoint,
    client: Client,
    nodes: watch::Receiver<Stamped<NodeView>>,
    deadlines: watch::Receiver<Stamped<Deadlines>>,
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
        let token: Arc<dyn TokenProvider> = Arc::new(
            MintedToken::new(SecretSlice::from(jwt_key.to_vec()), OPERATOR_USER)
                .lifespan(TOKEN_LIFESPAN),
        );
        // The reconcilers' writes and the job polls: the library's default deadlines.
        let client = Client::builder(endpoint.url.clone())
            .token_provider(token.clone())
            .build()?;
        let nodes_client = Client::builder(endpoint.url.clone())
            .token_provider(token)
            .request_timeout(NODE_CALL_TIMEOUT)
            .call_timeout(NODE_CALL_TIMEOUT)
            .build()?;
        let (tx, rx) = watch::channel(Stamped::now(NodeView::Unknown));
        let (deadlines_tx, deadlines_rx) = watch::channel(Stamped::now(None));
        let task = tokio::spawn(track(
            key.clone(),
            Clients {
                nodes: nodes_client,
                jobs: client.clone(),
            },
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

    /// How old a view may be and still be acted on. Between the starts of two polls that each
    /// end within the deadline come the first poll, the wait for the job poll (a period at
    /// most) and the pause (a period); the view is read again when the second one ends. One
    /// period more is the margin.
    pub fn stale_after(&self) -> Duration {
        stale_after(self.poll_every)
    }

    /// The node view of `key`; [`NodeView::Unknown`] when there is no client for it, and
    /// [`NodeView::Unavailable`] when it was read longer than [`Self::stale_after`] ago.
    pub fn nodes(&self, key: &ClusterKey) -> NodeView {
        let entries = self.entries.lock().expect("slurm registry lock");
        entries
            .get(key)
            .map(|e| trusted(&e.nodes.borrow(), Instant::now(), self.stale_after()))
            .unwrap_or(NodeView::Unknown)
    }

    /// The running jobs' deadlines per Slurm node of `key`; `None` when unknown (no client,
    /// not read yet, the last job poll failed, or read longer than [`Self::stale_after`] ago).
    pub fn deadlines(&self, key: &ClusterKey) -> Deadlines {
        let entries = self.entries.lock().expect("slurm registry lock");
        entries.get(key).and_then(|e| {
            trusted_deadlines(&e.deadlines.borrow(), Instant::now(), self.stale_after())
        })
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
    nodes: watch::Sender<Stamped<NodeView>>,
    deadlines: watch::Sender<Stamped<Deadlines>>,
}

/// The clients of a cluster's tracker: the node polls' has a short deadline.
struct Clients {
    nodes: Client,
    jobs: Client,
}

async fn track(
    key: ClusterKey,
    clients: Clients,
    views: Views,
    changed: mpsc::UnboundedSender<ClusterKey>,
    every: Duration,
) {
    // A full re-list now and then bounds what a clock skew between here and slurmctld could hide.
    let mut nodes = NodeTracker::new(clients.nodes).resync_every(60);
    let jobs = JobTracker::new(clients.jobs).resync_every(60);
    let mut jobs = JobRounds::spawn(key.clone(), jobs, views.deadlines);
    let mut nodes_failing = false;
    loop {
        // Both polls before the wake-up: a pass must not see a job's node busy without its
        // deadline (the deletion order would pick another victim a moment later). A job poll
        // takes milliseconds; a full listing of many jobs is waited for one period at most, so
        // that it holds up neither the node view nor its freshness (its deadlines wake the
        // NodeSets after the pass in which it ends).
        let round = jobs.start();
        let nodes_changed = poll_nodes(
            &key,
            &mut nodes,
            &views.nodes,
            &mut nodes_failing,
            stale_after(every),
        )
        .await;
        let jobs_changed = jobs.wait(round, every).await;
        if nodes_changed || jobs_changed {
            let _ = changed.send(key.clone());
        }
        tokio::time::sleep(every).await;
    }
}

/// The job polls, in a task of their own that polls once each time it is asked to.
struct JobRounds {
    go: Arc<Notify>,
    done: watch::Receiver<u64>,
    changed: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl JobRounds {
    fn spawn(
        key: ClusterKey,
        mut tracker: JobTracker,
        view: watch::Sender<Stamped<Deadlines>>,
    ) -> JobRounds {
        let go = Arc::new(Notify::new());
        let (done_tx, done) = watch::channel(0u64);
        let changed = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (go, changed) = (go.clone(), changed.clone());
            async move {
                let mut failing = false;
                loop {
                    go.notified().await;
                    if poll_jobs(&key, &mut tracker, &view, &mut failing).await {
                        changed.store(true, Ordering::SeqCst);
                    }
                    done_tx.send_modify(|n| *n += 1);
                }
            }
        });
        JobRounds {
            go,
            done,
            changed,
            task,
        }
    }

    /// Asks for a poll; returns the number of polls done before it.
    fn start(&self) -> u64 {
        let before = *self.done.borrow();
        self.go.notify_one();
        before
    }

    /// Waits, at most `limit`, for a poll after `round`; true when the deadlines changed
    /// since the last call.
    async fn wait(&mut self, round: u64, limit: Duration) -> bool {
        let _ = tokio::time::timeout(limit, self.done.wait_for(|n| *n > round)).await;
        self.changed.swap(false, Ordering::SeqCst)
    }
}

impl Drop for JobRounds {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One node poll; true when the view changed.
async fn poll_nodes(
    key: &ClusterKey,
    tracker: &mut NodeTracker,
    view: &watch::Sender<Stamped<NodeView>>,
    failing: &mut bool,
    stale_after: Duration,
) -> bool {
    let started = Instant::now();
    match tracker.poll().await {
        Ok(poll) => {
            let first = matches!(view.borrow().value, NodeView::Unknown);
            // A pass that found the view stale failed; it is woken as by a change.
            let was_stale = started.saturating_duration_since(view.borrow().read_at) > stale_after;
            let changed = *failing || first || was_stale || !poll.changes.is_empty();
            if changed {
                let nodes = tracker
                    .snapshot()
                    .map(|n| (n.name.clone(), n.clone()))
                    .collect();
                view.send_replace(Stamped {
                    value: NodeView::Known(Arc::new(nodes)),
                    read_at: started,
                });
            } else {
                // Unchanged is as good as read again: only the time moves (no one waits on it).
                view.send_if_modified(|v| {
                    v.read_at = started;
                    false
                });
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
                view.send_replace(Stamped {
                    value: NodeView::Unavailable(e.to_string()),
                    read_at: started,
                });
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
    view: &watch::Sender<Stamped<Deadlines>>,
    failing: &mut bool,
) -> bool {
    let started = Instant::now();
    let read = match tracker.poll().await {
        Ok(poll) if poll.changes.is_empty() && view.borrow().value.is_some() => {
            view.send_if_modified(|v| {
                v.read_at = started;
                false
            });
            return false;
        }
        Ok(_) => job_deadlines(tracker.snapshot()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match read {
        Ok(deadlines) => {
            *failing = false;
            let same = view.borrow().value.as_deref() == Some(&deadlines);
            if same {
                view.send_if_modified(|v| {
                    v.read_at = started;
                    false
                });
            } else {
                view.send_replace(Stamped {
                    value: Some(Arc::new(deadlines)),
                    read_at: started,
                });
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
            view.send_replace(Stamped {
                value: None,
                read_at: started,
            })
            .value
            .is_some()
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
    use std::sync::atomic::AtomicBool;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_view_older_than_the_limit_is_unavailable() {
        let limit = Duration::from_secs(19);
        let known = Stamped::now(NodeView::Known(Arc::default()));
        let deadlines: Stamped<Deadlines> = Stamped::now(Some(Arc::default()));
        tokio::time::advance(limit).await;
        assert!(matches!(
            trusted(&known, Instant::now(), limit),
            NodeView::Known(_)
        ));
        assert!(trusted_deadlines(&deadlines, Instant::now(), limit).is_some());
        tokio::time::advance(Duration::from_secs(1)).await;
        let NodeView::Unavailable(why) = trusted(&known, Instant::now(), limit) else {
            panic!("a stale view must not be acted on")
        };
        assert!(why.contains("20 s ago") && why.contains("19 s"), "{why}");
        assert!(trusted_deadlines(&deadlines, Instant::now(), limit).is_none());
        // Unknown and Unavailable stay what they are.
        let unknown = Stamped {
            value: NodeView::Unknown,
            read_at: Instant::now() - Duration::from_secs(60),
        };
        assert!(matches!(
            trusted(&unknown, Instant::now(), limit),
            NodeView::Unknown
        ));
        // The default poll period: polls 7 s each, a period's wait for the job poll and a
        // period's pause (24 s) stay within the limit.
        let (tx, _rx) = mpsc::unbounded_channel();
        let clusters = SlurmClusters::new(Duration::from_secs(5), tx);
        assert_eq!(clusters.stale_after(), Duration::from_secs(29));
    }

    /// A slurmrestd answering from the recorded 26.05 answers until `hang` is set, and then
    /// accepting connections without ever answering.
    async fn recorded_then_hung(hang: Arc<AtomicBool>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../slurm-client/tests/fixtures/26.05");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (hang, fixtures) = (hang.clone(), fixtures.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    if hang.load(Ordering::SeqCst) {
                        let _ = stream.read(&mut buf).await;
                        return;
                    }
                    // `GET /slurm/v0.0.4x/nodes/?…` → `v0.0.4x/slurm_nodes.json`.
                    let text = String::from_utf8_lossy(&head);
                    let path = text.split(' ').nth(1).unwrap_or("");
                    let path = path.split('?').next().unwrap_or("");
                    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
                    let file = match parts.as_slice() {
                        ["slurm", version, what, ..] => {
                            fixtures.join(version).join(format!("slurm_{what}.json"))
                        }
                        _ => fixtures.join("none"),
                    };
                    let (status, body) = match std::fs::read(&file) {
                        Ok(body) => ("200 OK", body),
                        Err(_) => ("404 Not Found", b"{}".to_vec()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn a_hung_slurmrestd_turns_the_view_unavailable_within_the_node_deadline() {
        let hang = Arc::new(AtomicBool::new(false));
        let url = recorded_then_hung(hang.clone()).await;
        let (tx, mut changed) = mpsc::unbounded_channel();
        let clusters = SlurmClusters::new(Duration::from_secs(1), tx);
        let key = ClusterKey {
            namespace: "ns".into(),
            controller: "slurm".into(),
        };
        let endpoint = Endpoint {
            url,
            key_hash: "h".into(),
        };
        clusters.client(&key, endpoint, b"k").unwrap();
        let known = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                changed.recv().await.unwrap();
                if let NodeView::Known(nodes) = clusters.nodes(&key) {
                    return nodes;
                }
            }
        })
        .await
        .expect("the recorded nodes are read");
        assert!(!known.is_empty());

        hang.store(true, Ordering::SeqCst);
        let hung = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(15), async {
            while matches!(clusters.nodes(&key), NodeView::Known(_)) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("the view turns unavailable");
        let took = hung.elapsed();
        // One poll period, then the node poll's deadline (retries included).
        assert!(took <= Duration::from_secs(1) + NODE_CALL_TIMEOUT + Duration::from_secs(1));
        let NodeView::Unavailable(why) = clusters.nodes(&key) else {
            panic!("unavailable")
        };
        assert!(why.contains("timed out"), "{why}");
    }

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
