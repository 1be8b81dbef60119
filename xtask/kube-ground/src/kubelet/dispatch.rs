//! The one watch of pods a kubelet process keeps: every pod bound to one of its nodes is fed to
//! a worker of its own (one per pod uid), which gets each new version of the object and `None`
//! once it is gone. The test kubelet's workers run containers; the hollow nodes' pretend to.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Feeds every pod bound to one of `nodes` to its worker, starting one per pod uid with `start`.
pub async fn serve_pods<F, Fut>(client: Client, nodes: BTreeSet<String>, start: F) -> Result<()>
where
    F: Fn(watch::Receiver<Option<Pod>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let api: Api<Pod> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut workers = Workers {
        senders: HashMap::new(),
        running: JoinSet::new(),
        start,
    };
    let mut listed: HashSet<String> = HashSet::new();
    // Pods whose worker has removed them: late events about them start nothing.
    let mut done: HashSet<String> = HashSet::new();
    let ours = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some_and(|n| nodes.contains(n))
    };
    loop {
        tokio::select! {
            Some(finished) = workers.running.join_next() => {
                if let Ok(uid) = finished {
                    workers.senders.remove(&uid);
                    done.insert(uid);
                }
            }
            event = events.next() => {
                let Some(event) = event else { return Ok(()) };
                match event {
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(pod)) => {
                        if ours(&pod) && !done.contains(&uid(&pod)) {
                            listed.insert(uid(&pod));
                            workers.feed(pod);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        // Pods gone while the watch was down.
                        for (uid, tx) in &workers.senders {
                            if !listed.contains(uid) {
                                let _ = tx.send(None);
                            }
                        }
                    }
                    Ok(watcher::Event::Apply(pod)) => {
                        if ours(&pod) && !done.contains(&uid(&pod)) {
                            workers.feed(pod);
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        if let Some(tx) = workers.senders.get(&uid(&pod)) {
                            let _ = tx.send(None);
                        }
                    }
                    Err(e) => tracing::warn!("watching pods: {e}"),
                }
            }
        }
    }
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

struct Workers<F> {
    senders: HashMap<String, watch::Sender<Option<Pod>>>,
    running: JoinSet<String>,
    start: F,
}

impl<F, Fut> Workers<F>
where
    F: Fn(watch::Receiver<Option<Pod>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn feed(&mut self, mut pod: Pod) {
        // No worker reads them, and they are often the largest part of a pod: a process that
        // holds thousands of pods (hollow nodes) keeps them out of memory.
        pod.metadata.managed_fields = None;
        let uid = uid(&pod);
        if let Some(tx) = self.senders.get(&uid) {
            let _ = tx.send(Some(pod));
            return;
        }
        let (tx, rx) = watch::channel(Some(pod));
        self.senders.insert(uid.clone(), tx);
        let work = (self.start)(rx);
        self.running.spawn(async move {
            work.await;
            uid
        });
    }
}
