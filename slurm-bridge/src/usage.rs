//! What the pods bound to a node take of it. Every pod counts against the node's pod capacity;
//! the CPU and memory requests are summed apart for pods the bridge does not schedule
//! (DaemonSets, static and system pods, the default scheduler's), which Slurm knows nothing of,
//! and for the bridge's own, which Slurm accounts for through their jobs (see
//! [`NodeUsage::for_placement`]). A watch of all bound, non-terminal pods keeps one small entry
//! per pod and the sums per node, so a placement decision reads a map instead of scanning every
//! pod. A binding the bridge is about to make is reserved here first, atomically with the check
//! that the pod fits (kube-scheduler's assume step): two workloads bound at the same moment
//! cannot together overcommit a node.

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

/// One bound pod: its node, its requests, and whether it is the bridge's.
type Entry = (String, Requests, bool);

#[derive(Default)]
struct Index {
    pods: HashMap<String, Entry>,
    nodes: BTreeMap<String, NodeUsage>,
    /// Entries of a relist in progress, swapped in when it is complete.
    relist: Option<HashMap<String, Entry>>,
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

    /// The usage of `node`.
    pub fn on(&self, node: &str) -> NodeUsage {
        let index = self.index.lock().expect("not poisoned");
        index.nodes.get(node).copied().unwrap_or_default()
    }

    /// Reserves room on its node for each of `binds` (the pod's `<namespace>/<name>`, its node,
    /// its requests) if `unfit(pod, everything bound there)` finds room for all of them, and
    /// says why not for the first it does not (nothing is reserved then). The watch replaces a
    /// reservation with the pod it sees bound; [`Usage::release`] drops one whose binding failed.
    pub fn reserve<'a>(
        &self,
        binds: impl IntoIterator<Item = (String, &'a str, Requests)>,
        unfit: impl Fn(usize, &NodeUsage) -> Option<String>,
    ) -> Result<(), String> {
        let mut index = self.index.lock().expect("not poisoned");
        let mut reserved = Vec::new();
        for (i, (key, node, requests)) in binds.into_iter().enumerate() {
            let used = index.nodes.get(node).copied().unwrap_or_default().all();
            if let Some(why) = unfit(i, &used) {
                for key in reserved {
                    index.set(key, None);
                }
                return Err(why);
            }
            index.set(key.clone(), Some((node.to_owned(), requests, true)));
            reserved.push(key);
        }
        Ok(())
    }

    /// Drops the reservation of `pod` (`<namespace>/<name>`), whose binding did not happen.
    pub fn release(&self, pod: &str) {
        self.index
            .lock()
            .expect("not poisoned")
            .set(pod.to_owned(), None);
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
    fn set(&mut self, key: String, new: Option<Entry>) {
        if let Some((node, old, ours)) = self.pods.remove(&key) {
            let sum = self.nodes.entry(node.clone()).or_default();
            add(sum, old, ours, -1.0);
            if sum.pods == 0 {
                self.nodes.remove(&node);
            }
        }
        if let Some((node, requests, ours)) = new {
            add(
                self.nodes.entry(node.clone()).or_default(),
                requests,
                ours,
                1.0,
            );
            self.pods.insert(key, (node, requests, ours));
        }
    }
}

/// Adds (`sign` 1) or takes out (-1) one pod's share of a node.
fn add(sum: &mut NodeUsage, requests: Requests, ours: bool, sign: f64) {
    if sign > 0.0 {
        sum.pods += 1;
    } else {
        sum.pods = sum.pods.saturating_sub(1);
    }
    let (cpu, memory) = if ours {
        (&mut sum.bridge_cpu, &mut sum.bridge_memory)
    } else {
        (&mut sum.cpu, &mut sum.memory)
    };
    *cpu += sign * requests.cpu;
    *memory += sign * requests.memory;
}

fn totals(pods: &HashMap<String, Entry>) -> BTreeMap<String, NodeUsage> {
    let mut nodes: BTreeMap<String, NodeUsage> = BTreeMap::new();
    for (node, requests, ours) in pods.values() {
        add(
            nodes.entry(node.clone()).or_default(),
            *requests,
            *ours,
            1.0,
        );
    }
    nodes
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

impl Usage {
    /// The pod's node, its requests and whether it is the bridge's, while it takes room there.
    fn entry(&self, pod: &Pod) -> Option<Entry> {
        let spec = pod.spec.as_ref()?;
        let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return None;
        }
        let ours = spec.scheduler_name.as_deref() == Some(&*self.scheduler);
        Some((node, Requests::of(pod), ours))
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
            (k1.pods, k1.cpu, k1.bridge_cpu),
            (2, 0.5, 3.0),
            "Slurm already counts the 3 CPUs of its own job: apart"
        );
    }

    fn pod(name: &str, node: &str, cpu: &str, phase: &str) -> Pod {
        serde_yaml::from_str(&format!(
            "metadata: {{name: {name}, namespace: ns}}\nspec: {{nodeName: '{node}', containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\nstatus: {{phase: {phase}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_reservation_is_checked_against_everything_bound_and_all_or_nothing() {
        let usage = Usage::new("slurm-bridge-scheduler");
        usage.apply(watcher::Event::Apply(pod("daemon", "k1", "1", "Running")));
        let one = Requests {
            cpu: 1.0,
            memory: 0.0,
        };
        let room = |_: usize, used: &NodeUsage| {
            (used.cpu + 1.0 > 4.0).then(|| format!("{} of 4 CPUs taken", used.cpu))
        };
        let binds = |names: &[&'static str]| {
            names
                .iter()
                .map(|n| (format!("ns/{n}"), "k1", one))
                .collect::<Vec<_>>()
        };
        usage.reserve(binds(&["a", "b"]), room).unwrap();
        let k1 = usage.per_node()["k1"];
        assert_eq!((k1.pods, k1.cpu, k1.bridge_cpu), (3, 1.0, 2.0));
        assert_eq!(
            usage.reserve(binds(&["c", "d"]), room).unwrap_err(),
            "4 of 4 CPUs taken"
        );
        assert_eq!(
            usage.per_node()["k1"].pods,
            3,
            "c's reservation went with d's refusal"
        );
        // The watch shows b bound: its reservation is replaced, not counted twice.
        let mut b = pod("b", "k1", "1", "Pending");
        b.spec.as_mut().unwrap().scheduler_name = Some("slurm-bridge-scheduler".into());
        usage.apply(watcher::Event::Apply(b));
        assert_eq!(usage.per_node()["k1"].bridge_cpu, 2.0);
        usage.release("ns/a");
        usage.reserve(binds(&["c"]), room).unwrap();
        assert_eq!(usage.per_node()["k1"].all().cpu, 3.0);
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
