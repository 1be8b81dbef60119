//! What the pods bound to a node take of it. Every pod counts against the node's pod capacity;
//! the CPU and memory requests counted are those of pods the bridge does not schedule
//! (DaemonSets, static and system pods, the default scheduler's): Slurm knows nothing of them,
//! while it already accounts for the bridge's own pods through their jobs (counting those too
//! would keep a gang from queueing behind another). A watch of all bound, non-terminal pods
//! keeps one small entry per pod and the sums per node, so a placement decision reads a map
//! instead of scanning every pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use crate::feasible::NodeUsage;
use crate::resources::Requests;

/// The shared index; clones share it.
#[derive(Clone)]
pub struct Usage {
    index: Arc<Mutex<Index>>,
    /// The bridge's scheduler name: its pods' requests are Slurm's to count.
    scheduler: Arc<str>,
}

#[derive(Default)]
struct Index {
    pods: HashMap<String, (String, Requests)>,
    nodes: BTreeMap<String, NodeUsage>,
    /// Entries of a relist in progress, swapped in when it is complete.
    relist: Option<HashMap<String, (String, Requests)>>,
}

impl Usage {
    /// An empty index for the bridge whose scheduler name is `scheduler`.
    pub fn new(scheduler: &str) -> Usage {
        Usage {
            index: Arc::default(),
            scheduler: scheduler.into(),
        }
    }

    /// The usage of every node with a pod bound to it.
    pub fn per_node(&self) -> BTreeMap<String, NodeUsage> {
        self.index.lock().expect("not poisoned").nodes.clone()
    }

    /// Follows the pods of `api` that are bound and not Succeeded or Failed, for ever.
    pub async fn follow(self, api: Api<Pod>) {
        let config = watcher::Config::default()
            .fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed");
        watcher(api, config)
            .default_backoff()
            .for_each(|event| {
                if let Ok(event) = event {
                    self.apply(event);
                }
                futures::future::ready(())
            })
            .await;
    }

    fn apply(&self, event: watcher::Event<Pod>) {
        let entry = |pod: &Pod| self.entry(pod);
        let mut index = self.index.lock().expect("not poisoned");
        match event {
            watcher::Event::Init => index.relist = Some(HashMap::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(relist), Some(entry)) = (index.relist.as_mut(), entry(&pod)) {
                    relist.insert(key(&pod), entry);
                }
            }
            watcher::Event::InitDone => {
                let pods = index.relist.take().unwrap_or_default();
                index.nodes = totals(&pods);
                index.pods = pods;
            }
            watcher::Event::Apply(pod) => index.set(key(&pod), entry(&pod)),
            watcher::Event::Delete(pod) => index.set(key(&pod), None),
        }
    }
}

impl Index {
    /// Replaces one pod's entry, keeping the node sums in step.
    fn set(&mut self, key: String, new: Option<(String, Requests)>) {
        if let Some((node, old)) = self.pods.remove(&key) {
            let sum = self.nodes.entry(node.clone()).or_default();
            sum.pods = sum.pods.saturating_sub(1);
            sum.cpu -= old.cpu;
            sum.memory -= old.memory;
            if sum.pods == 0 {
                self.nodes.remove(&node);
            }
        }
        if let Some((node, requests)) = new {
            add(self.nodes.entry(node.clone()).or_default(), requests);
            self.pods.insert(key, (node, requests));
        }
    }
}

fn add(sum: &mut NodeUsage, requests: Requests) {
    sum.pods += 1;
    sum.cpu += requests.cpu;
    sum.memory += requests.memory;
}

fn totals(pods: &HashMap<String, (String, Requests)>) -> BTreeMap<String, NodeUsage> {
    let mut nodes: BTreeMap<String, NodeUsage> = BTreeMap::new();
    for (node, requests) in pods.values() {
        add(nodes.entry(node.clone()).or_default(), *requests);
    }
    nodes
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

impl Usage {
    /// The pod's node and the requests counted for it while it takes room there (none for
    /// the bridge's own pods).
    fn entry(&self, pod: &Pod) -> Option<(String, Requests)> {
        let spec = pod.spec.as_ref()?;
        let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return None;
        }
        let ours = spec.scheduler_name.as_deref() == Some(&*self.scheduler);
        Some((
            node,
            if ours {
                Requests::default()
            } else {
                Requests::of(pod)
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridges_own_pods_count_only_as_pods() {
        let usage = Usage::new("slurm-bridge-scheduler");
        let mut own = pod("own", "k1", "3", "Running");
        own.spec.as_mut().unwrap().scheduler_name = Some("slurm-bridge-scheduler".into());
        usage.apply(watcher::Event::Apply(own));
        usage.apply(watcher::Event::Apply(pod(
            "daemon", "k1", "500m", "Running",
        )));
        let k1 = usage.per_node()["k1"];
        assert_eq!(
            (k1.pods, k1.cpu),
            (2, 0.5),
            "Slurm already counts the 3 CPUs of its own job"
        );
    }

    fn pod(name: &str, node: &str, cpu: &str, phase: &str) -> Pod {
        serde_yaml::from_str(&format!(
            "metadata: {{name: {name}, namespace: ns}}\nspec: {{nodeName: '{node}', containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\nstatus: {{phase: {phase}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn sums_follow_the_pods() {
        let usage = Usage::new("slurm-bridge-scheduler");
        usage.apply(watcher::Event::Init);
        usage.apply(watcher::Event::InitApply(pod("a", "k1", "1", "Running")));
        usage.apply(watcher::Event::InitApply(pod("b", "k1", "500m", "Running")));
        assert!(
            usage.per_node().is_empty(),
            "nothing until the list is complete"
        );
        usage.apply(watcher::Event::InitDone);
        let k1 = usage.per_node()["k1"];
        assert_eq!((k1.pods, k1.cpu), (2, 1.5));

        // A resize (an update) replaces, a pod moving to k2 moves its share, an ended pod goes.
        usage.apply(watcher::Event::Apply(pod("b", "k1", "2", "Running")));
        assert_eq!(usage.per_node()["k1"].cpu, 3.0);
        usage.apply(watcher::Event::Apply(pod("c", "k2", "1", "Pending")));
        usage.apply(watcher::Event::Apply(pod("a", "k1", "1", "Succeeded")));
        let now = usage.per_node();
        assert_eq!((now["k1"].pods, now["k1"].cpu), (1, 2.0));
        assert_eq!(now["k2"].pods, 1);
        usage.apply(watcher::Event::Delete(pod("b", "k1", "2", "Running")));
        assert!(!usage.per_node().contains_key("k1"));

        // A relist replaces everything.
        usage.apply(watcher::Event::Init);
        usage.apply(watcher::Event::InitApply(pod("d", "k3", "1", "Running")));
        usage.apply(watcher::Event::InitDone);
        assert_eq!(usage.per_node().keys().collect::<Vec<_>>(), ["k3"]);
    }
}
