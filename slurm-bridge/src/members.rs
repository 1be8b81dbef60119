//! Which pods make each workload: an index kept from the pod watch, so that a pass over one
//! workload reads its own pods instead of filtering the whole pod store (which made the periodic
//! resync cost grow with the square of the pods). The store stays the truth: a pod the index
//! names but the store no longer holds is dropped from the index when it is looked up.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::workload::{WorkloadKey, key_of};

/// The index, shared by the pod watch (which notes pods) and the scheduler (which reads it).
#[derive(Debug, Clone, Default)]
pub struct Members(Arc<Mutex<Index>>);

#[derive(Debug, Default)]
struct Index {
    by_workload: HashMap<WorkloadKey, HashSet<ObjectRef<Pod>>>,
    workload_of: HashMap<ObjectRef<Pod>, WorkloadKey>,
}

impl Members {
    /// Notes `pod` (added or changed) under its workload, moving it if its labels moved it to
    /// another one; returns that workload.
    pub fn note(&self, pod: &Pod) -> WorkloadKey {
        let key = key_of(pod);
        let pod_ref = ObjectRef::from_obj(pod);
        let mut index = self.0.lock().expect("not poisoned");
        if let Some(old) = index.workload_of.insert(pod_ref.clone(), key.clone())
            && old != key
        {
            index.remove(&old, &pod_ref);
        }
        index
            .by_workload
            .entry(key.clone())
            .or_default()
            .insert(pod_ref);
        key
    }

    /// The pods of `key` that `store` holds, sorted by name.
    pub fn of(&self, key: &WorkloadKey, store: &Store<Pod>) -> Vec<Arc<Pod>> {
        let refs: Vec<ObjectRef<Pod>> = {
            let index = self.0.lock().expect("not poisoned");
            index
                .by_workload
                .get(key)
                .map(|set| set.iter().cloned().collect())
                .unwrap_or_default()
        };
        let mut pods = Vec::with_capacity(refs.len());
        let mut gone = Vec::new();
        for pod_ref in refs {
            match store.get(&pod_ref) {
                Some(pod) if key_of(&pod) == *key => pods.push(pod),
                _ => gone.push(pod_ref),
            }
        }
        if !gone.is_empty() {
            let mut index = self.0.lock().expect("not poisoned");
            for pod_ref in gone {
                if index.workload_of.get(&pod_ref) == Some(key) {
                    index.workload_of.remove(&pod_ref);
                }
                index.remove(key, &pod_ref);
            }
        }
        pods.sort_by_key(|p| p.name_any());
        pods
    }

    /// The workload of the pod named `<namespace>/<name>`, if the index has it.
    pub fn workload_of(&self, name: &str) -> Option<WorkloadKey> {
        let (namespace, name) = name.split_once('/')?;
        let pod_ref = ObjectRef::new(name).within(namespace);
        self.0
            .lock()
            .expect("not poisoned")
            .workload_of
            .get(&pod_ref)
            .cloned()
    }
}

impl Index {
    fn remove(&mut self, key: &WorkloadKey, pod_ref: &ObjectRef<Pod>) {
        if let Some(set) = self.by_workload.get_mut(key) {
            set.remove(pod_ref);
            if set.is_empty() {
                self.by_workload.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn pod(name: &str, group: Option<&str>) -> Pod {
        let labels = group.map_or(String::new(), |g| {
            format!(", labels: {{scheduling.x-k8s.io/pod-group: {g}}}")
        });
        serde_yaml::from_str(&format!(
            "metadata: {{name: {name}, namespace: ns{labels}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_workload_reads_its_own_pods_and_forgets_deleted_ones() {
        let (store, mut writer) = reflector::store::<Pod>();
        let members = Members::default();
        let (a, b, solo) = (pod("a", Some("g")), pod("b", Some("g")), pod("solo", None));
        for p in [&a, &b, &solo] {
            writer.apply_watcher_event(&Event::Apply(p.clone()));
            members.note(p);
        }
        let g = key_of(&a);
        let names = |pods: Vec<Arc<Pod>>| pods.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(members.of(&g, &store)), ["a", "b"]);
        assert_eq!(members.workload_of("ns/solo"), Some(key_of(&solo)));

        writer.apply_watcher_event(&Event::Delete(b.clone()));
        assert_eq!(names(members.of(&g, &store)), ["a"]);
        assert_eq!(members.workload_of("ns/b"), None);

        // Relabelled into a group of its own: it moves.
        let moved = pod("a", Some("h"));
        writer.apply_watcher_event(&Event::Apply(moved.clone()));
        members.note(&moved);
        assert!(members.of(&g, &store).is_empty());
        assert_eq!(names(members.of(&key_of(&moved), &store)), ["a"]);
    }
}
