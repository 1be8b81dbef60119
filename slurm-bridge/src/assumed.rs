//! Pods the bridge has bound but its pod store may not show bound yet (kube-scheduler's
//! "assumed" pods): a pass that runs before the watch delivers the binding treats them as bound,
//! instead of binding them again (two more writes and an event).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a binding is assumed without the store showing it.
const TTL: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub struct Assumed {
    bound: Mutex<HashMap<String, (String, Instant)>>,
}

impl Assumed {
    /// `pod` (its UID: a pod made again under the same name is another) was bound to `node` at
    /// `now`. Expired entries go here too: a pod deleted before the store showed it bound is
    /// never looked up again.
    pub fn bound(&self, pod: &str, node: &str, now: Instant) {
        let mut bound = self.bound.lock().expect("not poisoned");
        bound.retain(|_, (_, at)| now.duration_since(*at) < TTL);
        bound.insert(pod.to_owned(), (node.to_owned(), now));
    }

    /// The node `pod` was bound to, if that was less than the TTL before `now`; an older entry
    /// is dropped.
    pub fn node_of(&self, pod: &str, now: Instant) -> Option<String> {
        let mut bound = self.bound.lock().expect("not poisoned");
        match bound.get(pod) {
            Some((node, at)) if now.duration_since(*at) < TTL => Some(node.clone()),
            Some(_) => {
                bound.remove(pod);
                None
            }
            None => None,
        }
    }

    /// The store shows `pod` bound (or gone): nothing to assume any more.
    pub fn forget(&self, pod: &str) {
        self.bound.lock().expect("not poisoned").remove(pod);
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
            a.bound.lock().unwrap().len(),
            1,
            "ns/s, never looked up again, expired at ns/r's binding"
        );
        assert_eq!(a.node_of("ns/r", t0 + TTL * 2), None);
        assert!(
            a.bound.lock().unwrap().is_empty(),
            "expired entries are dropped"
        );
    }
}
