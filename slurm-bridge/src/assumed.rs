//! Writes the bridge has made that its pod store may not show yet (kube-scheduler's "assumed"
//! pods): a pass that runs before the watch delivers them treats them as done, instead of making
//! them again. Bindings (a second binding fails, after two more writes and an event) and job
//! labels (a job that starts while its submission's labels are on their way was labelled a
//! second time before its binding: half the pods at scale, 0.3–0.6 s each).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a write is assumed without the store showing it.
const TTL: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub struct Assumed {
    bound: Recent<String>,
    labelled: Recent<u32>,
}

impl Assumed {
    /// `pod` (its UID: a pod made again under the same name is another) was bound to `node` at
    /// `now`.
    pub fn bound(&self, pod: &str, node: &str, now: Instant) {
        self.bound.put(pod, node.to_owned(), now);
    }

    /// The node `pod` was bound to, if that was less than the TTL before `now`.
    pub fn node_of(&self, pod: &str, now: Instant) -> Option<String> {
        self.bound.get(pod, now)
    }

    /// The store shows `pod` bound (or gone): nothing to assume any more.
    pub fn forget(&self, pod: &str) {
        self.bound.forget(pod);
    }

    /// `pod` was labelled with job `job` (and given the bridge's finalizer) at `now`.
    pub fn labelled(&self, pod: &str, job: u32, now: Instant) {
        self.labelled.put(pod, job, now);
    }

    /// The job `pod` was labelled with, if that was less than the TTL before `now`.
    pub fn job_of(&self, pod: &str, now: Instant) -> Option<u32> {
        self.labelled.get(pod, now)
    }

    /// The store shows `pod`'s label (or the label was taken off): nothing to assume.
    pub fn forget_label(&self, pod: &str) {
        self.labelled.forget(pod);
    }
}

/// Values by pod that expire after [`TTL`].
#[derive(Debug)]
struct Recent<V> {
    entries: Mutex<HashMap<String, (V, Instant)>>,
}

impl<V> Default for Recent<V> {
    fn default() -> Recent<V> {
        Recent {
            entries: Mutex::default(),
        }
    }
}

impl<V: Clone> Recent<V> {
    /// Expired entries go here too: a pod deleted before the store showed the write is never
    /// looked up again.
    fn put(&self, pod: &str, value: V, now: Instant) {
        let mut entries = self.entries.lock().expect("not poisoned");
        entries.retain(|_, (_, at)| now.duration_since(*at) < TTL);
        entries.insert(pod.to_owned(), (value, now));
    }

    /// An older entry than the TTL is dropped.
    fn get(&self, pod: &str, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().expect("not poisoned");
        match entries.get(pod) {
            Some((value, at)) if now.duration_since(*at) < TTL => Some(value.clone()),
            Some(_) => {
                entries.remove(pod);
                None
            }
            None => None,
        }
    }

    fn forget(&self, pod: &str) {
        self.entries.lock().expect("not poisoned").remove(pod);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_is_assumed_until_forgotten_or_expired() {
        let t0 = Instant::now();
        let a = Assumed::default();
        assert_eq!(a.node_of("ns/p", t0), None);
        a.bound("ns/p", "node-1", t0);
        assert_eq!(
            a.node_of("ns/p", t0 + Duration::from_secs(1)).as_deref(),
            Some("node-1")
        );
        a.forget("ns/p");
        assert_eq!(a.node_of("ns/p", t0), None);
        a.bound("ns/q", "node-2", t0);
        assert_eq!(a.node_of("ns/q", t0 + TTL), None);
        a.bound("ns/s", "node-2", t0);
        a.bound("ns/r", "node-3", t0 + TTL);
        assert_eq!(
            a.bound.len(),
            1,
            "ns/s, never looked up again, expired at ns/r's binding"
        );
        assert_eq!(a.node_of("ns/r", t0 + TTL * 2), None);
        assert_eq!(a.bound.len(), 0, "expired entries are dropped");
    }

    #[test]
    fn a_label_is_assumed_apart_from_bindings() {
        let t0 = Instant::now();
        let a = Assumed::default();
        a.labelled("ns/p", 7, t0);
        assert_eq!(a.job_of("ns/p", t0), Some(7));
        assert_eq!(a.node_of("ns/p", t0), None);
        a.forget("ns/p");
        assert_eq!(
            a.job_of("ns/p", t0),
            Some(7),
            "a binding's end keeps the label"
        );
        a.forget_label("ns/p");
        assert_eq!(a.job_of("ns/p", t0), None);
        a.labelled("ns/q", 8, t0);
        assert_eq!(a.job_of("ns/q", t0 + TTL), None);
    }
}
