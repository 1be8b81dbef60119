//! One Slurm REST client per Controller, reached through the cluster's RestApi Service with a
//! token the operator mints from the Controller's JWT key, and the cluster's nodes followed with
//! the client's change tracking (`update_time`: a quiet cluster answers "nothing changed")
//! instead of a full re-list every 30 s.
//!
//! A failed poll turns the view into [`NodeView::Unavailable`]: decisions that need Slurm then
//! keep everything as it is (fail closed), and the next successful poll restores the view.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::SecretSlice;
use slurm_client::model::Node;
use slurm_client::tracking::NodeTracker;
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

struct Entry {
    endpoint: Endpoint,
    client: Client,
    nodes: watch::Receiver<NodeView>,
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
        let task = tokio::spawn(track(
            key.clone(),
            client.clone(),
            tx,
            self.changed.clone(),
            self.poll_every,
        ));
        entries.insert(
            key.clone(),
            Entry {
                endpoint,
                client: client.clone(),
                nodes: rx,
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

    /// Forgets a cluster (its Controller or RestApi is gone); stops its tracker.
    pub fn remove(&self, key: &ClusterKey) {
        self.entries
            .lock()
            .expect("slurm registry lock")
            .remove(key);
    }
}

async fn track(
    key: ClusterKey,
    client: Client,
    view: watch::Sender<NodeView>,
    changed: mpsc::UnboundedSender<ClusterKey>,
    every: Duration,
) {
    // A full re-list now and then bounds what a clock skew between here and slurmctld could hide.
    let mut tracker = NodeTracker::new(client).resync_every(60);
    let mut failing = false;
    loop {
        match tracker.poll().await {
            Ok(poll) => {
                let first = matches!(*view.borrow(), NodeView::Unknown);
                if failing || first || !poll.changes.is_empty() {
                    let nodes = tracker
                        .snapshot()
                        .map(|n| (n.name.clone(), n.clone()))
                        .collect();
                    view.send_replace(NodeView::Known(Arc::new(nodes)));
                    let _ = changed.send(key.clone());
                }
                failing = false;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        namespace = %key.namespace,
                        controller = %key.controller,
                        error = %e,
                        "cannot read Slurm nodes; no worker pod is deleted until this recovers"
                    );
                    view.send_replace(NodeView::Unavailable(e.to_string()));
                    let _ = changed.send(key.clone());
                }
                failing = true;
            }
        }
        tokio::time::sleep(every).await;
    }
}
