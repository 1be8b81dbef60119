//! The scheduling queue: which workloads wait to be looked at, which are being looked at, and
//! which back off after a failure (kube-scheduler's active and back-off queues, for workloads).
//!
//! Woken workloads are taken first in, first out, so a workload woken again and again does not
//! starve the others. A workload woken while it is being processed is looked at again once that
//! pass ends, so no wake is lost and no workload is processed twice at once. A workload woken
//! during its back-off waits for the back-off to end.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

#[derive(Debug)]
pub struct Queue<K: Ord + Clone> {
    /// Woken keys in the order they were first woken (each once), and the same as a set.
    dirty: VecDeque<K>,
    queued: BTreeSet<K>,
    in_flight: BTreeSet<K>,
    /// Until when a key backs off, and the back-off that put it there.
    backoff: BTreeMap<K, (Instant, Duration)>,
}

impl<K: Ord + Clone> Default for Queue<K> {
    fn default() -> Self {
        Queue {
            dirty: VecDeque::new(),
            queued: BTreeSet::new(),
            in_flight: BTreeSet::new(),
            backoff: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> Queue<K> {
    /// Marks `key` to be looked at.
    pub fn wake(&mut self, key: K) {
        if self.queued.insert(key.clone()) {
            self.dirty.push_back(key);
        }
    }

    /// A woken key that may be processed now (not in flight, not backing off), taken out of the
    /// queue and marked in flight.
    pub fn pop(&mut self, now: Instant) -> Option<K> {
        let at = self
            .dirty
            .iter()
            .position(|k| !self.in_flight.contains(k) && self.ready(k, now))?;
        let key = self.dirty.remove(at).expect("a position in the queue");
        self.queued.remove(&key);
        self.in_flight.insert(key.clone());
        Some(key)
    }

    /// The pass over `key` ended; a failure makes it back off (1 s, doubling to 5 min), and the
    /// back-off is returned.
    pub fn done(&mut self, key: &K, ok: bool, now: Instant) -> Option<Duration> {
        self.in_flight.remove(key);
        if ok {
            self.backoff.remove(key);
            return None;
        }
        let next = self
            .backoff
            .get(key)
            .map(|(_, d)| (*d * 2).min(MAX_BACKOFF))
            .unwrap_or(FIRST_BACKOFF);
        self.backoff.insert(key.clone(), (now + next, next));
        Some(next)
    }

    /// When the first woken key's back-off ends (`None`: no woken key backs off).
    pub fn next_retry(&self) -> Option<Instant> {
        self.dirty
            .iter()
            .filter(|k| !self.in_flight.contains(*k))
            .filter_map(|k| self.backoff.get(k).map(|(at, _)| *at))
            .min()
    }

    fn ready(&self, key: &K, now: Instant) -> bool {
        self.backoff.get(key).is_none_or(|(at, _)| *at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_woken_in_flight_is_processed_again_after() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.wake("a");
        q.wake("b");
        assert_eq!(q.pop(now), Some("a"));
        q.wake("a");
        assert_eq!(q.pop(now), Some("b"), "a is in flight");
        assert_eq!(q.pop(now), None);
        assert_eq!(q.done(&"a", true, now), None);
        assert_eq!(q.pop(now), Some("a"), "the wake during the pass is kept");
        assert_eq!(q.pop(now), None);
    }

    #[test]
    fn first_woken_first_served() {
        let now = Instant::now();
        let mut q = Queue::default();
        for key in ["c", "a", "b", "a"] {
            q.wake(key);
        }
        assert_eq!(q.pop(now), Some("c"));
        q.done(&"c", true, now);
        q.wake("c");
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), Some("b"));
        assert_eq!(q.pop(now), Some("c"), "woken again: at the back");
    }

    #[test]
    fn failures_back_off_doubling_and_a_success_resets() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.wake("a");
        q.pop(t0);
        assert_eq!(q.done(&"a", false, t0), Some(Duration::from_secs(1)));
        q.wake("a");
        assert_eq!(q.pop(t0), None, "backing off");
        assert_eq!(q.next_retry(), Some(t0 + Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(q.pop(t1), Some("a"));
        assert_eq!(q.next_retry(), None, "nothing woken waits");
        assert_eq!(q.done(&"a", false, t1), Some(Duration::from_secs(2)));
        q.wake("a");
        let t3 = t1 + Duration::from_secs(2);
        assert_eq!(q.pop(t3), Some("a"));
        assert_eq!(q.done(&"a", true, t3), None);
        q.wake("a");
        assert_eq!(q.pop(t3), Some("a"), "no back-off after a success");
    }

    #[test]
    fn the_back_off_is_capped() {
        let mut now = Instant::now();
        let mut q = Queue::default();
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            q.wake(1);
            now += last;
            assert_eq!(q.pop(now), Some(1));
            last = q.done(&1, false, now).unwrap();
        }
        assert_eq!(last, Duration::from_secs(300));
    }
}
