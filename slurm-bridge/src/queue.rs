//! The scheduling queue: which workloads wait to be looked at, which are being looked at, and
//! which back off after a failure (kube-scheduler's active and back-off queues, for workloads).
//!
//! Woken workloads wait in three lanes, taken in order: a change of their Slurm job first (a job
//! that started waits for nothing but its pods' binding), then a change of their pods or of the
//! nodes, then the periodic resync. Within a lane they are taken first in, first out, so a
//! workload woken again and again does not starve the others; a workload woken in a higher lane
//! moves up. A workload woken while it is being processed is looked at again once that pass
//! ends, so no wake is lost and no workload is processed twice at once. A failed pass backs off
//! (1 s, doubling to 5 min) and is tried again when its back-off ends; a pass that found no room
//! for the workload backs off to 10 s at most, as kube-scheduler's unschedulable pods do
//! (`podMaxBackoffSeconds`): room can come at any moment, when a pod ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
const UNSCHEDULABLE_MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why a workload is woken, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// The periodic look at every workload.
    Resync = 0,
    /// Its pods, the nodes or the storage changed.
    Change = 1,
    /// Its Slurm job changed (started, ended, a new reason).
    Job = 2,
}

const LANES: [Lane; 3] = [Lane::Job, Lane::Change, Lane::Resync];

#[derive(Debug)]
pub struct Queue<K: Ord + Clone> {
    /// Each lane's woken keys in the order they were woken into it. A key that moved up to a
    /// higher lane stays behind in the lower one, skipped, until it reaches the front.
    lanes: [VecDeque<K>; 3],
    /// The woken keys and their lane.
    queued: BTreeMap<K, Lane>,
    in_flight: BTreeSet<K>,
    /// Until when a key backs off, and the back-off that put it there.
    backoff: BTreeMap<K, (Instant, Duration)>,
}

impl<K: Ord + Clone> Default for Queue<K> {
    fn default() -> Self {
        Queue {
            lanes: Default::default(),
            queued: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            backoff: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> Queue<K> {
    /// Marks `key` to be looked at, in `lane` or the higher one it waits in already.
    pub fn wake(&mut self, key: K, lane: Lane) {
        match self.queued.get_mut(&key) {
            Some(waits_in) if *waits_in >= lane => {}
            Some(waits_in) => {
                *waits_in = lane;
                self.lanes[lane as usize].push_back(key);
            }
            None => {
                self.queued.insert(key.clone(), lane);
                self.lanes[lane as usize].push_back(key);
            }
        }
    }

    /// A woken key of `lowest` lane or a higher one that may be processed now (not in flight,
    /// not backing off), the highest lane's first; taken out of the queue and marked in flight.
    pub fn pop(&mut self, now: Instant, lowest: Lane) -> Option<K> {
        for lane in LANES.into_iter().filter(|l| *l >= lowest) {
            let queue = &mut self.lanes[lane as usize];
            while let Some(front) = queue.front() {
                if self.queued.get(front) == Some(&lane) {
                    break;
                }
                queue.pop_front();
            }
            let found = queue.iter().position(|k| {
                self.queued.get(k) == Some(&lane)
                    && !self.in_flight.contains(k)
                    && self.backoff.get(k).is_none_or(|(at, _)| *at <= now)
            });
            if let Some(at) = found {
                let key = queue.remove(at).expect("a position in the lane");
                self.queued.remove(&key);
                self.in_flight.insert(key.clone());
                return Some(key);
            }
        }
        None
    }

    /// The pass over `key` ended; a failure makes it back off (1 s, doubling to 5 min) and wakes
    /// it for when that ends, and the back-off is returned.
    pub fn done(&mut self, key: &K, ok: bool, now: Instant) -> Option<Duration> {
        self.finish(key, (!ok).then_some(MAX_BACKOFF), now)
    }

    /// The pass over `key` found no room for it now: as a failure, but backing off to 10 s at
    /// most.
    pub fn unschedulable(&mut self, key: &K, now: Instant) -> Duration {
        self.finish(key, Some(UNSCHEDULABLE_MAX_BACKOFF), now)
            .expect("a back-off")
    }

    /// Ends a pass; `backoff_up_to`: it failed, and backs off to that at most.
    fn finish(
        &mut self,
        key: &K,
        backoff_up_to: Option<Duration>,
        now: Instant,
    ) -> Option<Duration> {
        self.in_flight.remove(key);
        let Some(max) = backoff_up_to else {
            self.backoff.remove(key);
            return None;
        };
        let next = self
            .backoff
            .get(key)
            .map(|(_, d)| (*d * 2).min(max))
            .unwrap_or(FIRST_BACKOFF);
        self.backoff.insert(key.clone(), (now + next, next));
        self.wake(key.clone(), Lane::Change);
        Some(next)
    }

    /// When the first woken key's back-off ends (`None`: no woken key backs off).
    pub fn next_retry(&self) -> Option<Instant> {
        self.backoff
            .iter()
            .filter(|(k, _)| self.queued.contains_key(*k) && !self.in_flight.contains(*k))
            .map(|(_, (at, _))| *at)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unschedulable_key_backs_off_to_ten_seconds_at_most() {
        let now = Instant::now();
        let mut q = Queue::default();
        let mut waits = Vec::new();
        for _ in 0..6 {
            q.wake("a", Lane::Change);
            let at = q.next_retry().unwrap_or(now);
            assert_eq!(q.pop(at, Lane::Resync), Some("a"));
            waits.push(q.unschedulable(&"a", at).as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        let at = q.next_retry().expect("woken for its retry");
        assert_eq!(q.pop(at, Lane::Resync), Some("a"));
        assert_eq!(q.done(&"a", true, at), None, "a success ends the back-off");
    }

    #[test]
    fn a_key_woken_in_flight_is_processed_again_after() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.wake("a", Lane::Change);
        q.wake("b", Lane::Change);
        assert_eq!(q.pop(now, Lane::Resync), Some("a"));
        q.wake("a", Lane::Change);
        assert_eq!(q.pop(now, Lane::Resync), Some("b"), "a is in flight");
        assert_eq!(q.pop(now, Lane::Resync), None);
        assert_eq!(q.done(&"a", true, now), None);
        assert_eq!(
            q.pop(now, Lane::Resync),
            Some("a"),
            "the wake during the pass is kept"
        );
        assert_eq!(q.pop(now, Lane::Resync), None);
    }

    #[test]
    fn first_woken_first_served() {
        let now = Instant::now();
        let mut q = Queue::default();
        for key in ["c", "a", "b", "a"] {
            q.wake(key, Lane::Change);
        }
        assert_eq!(q.pop(now, Lane::Resync), Some("c"));
        q.done(&"c", true, now);
        q.wake("c", Lane::Change);
        assert_eq!(q.pop(now, Lane::Resync), Some("a"));
        assert_eq!(q.pop(now, Lane::Resync), Some("b"));
        assert_eq!(
            q.pop(now, Lane::Resync),
            Some("c"),
            "woken again: at the back"
        );
    }

    #[test]
    fn failures_back_off_doubling_and_a_success_resets() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.wake("a", Lane::Change);
        q.pop(t0, Lane::Resync);
        assert_eq!(q.done(&"a", false, t0), Some(Duration::from_secs(1)));
        q.wake("a", Lane::Change);
        assert_eq!(q.pop(t0, Lane::Resync), None, "backing off");
        assert_eq!(q.next_retry(), Some(t0 + Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(q.pop(t1, Lane::Resync), Some("a"));
        assert_eq!(q.next_retry(), None, "nothing woken waits");
        assert_eq!(q.done(&"a", false, t1), Some(Duration::from_secs(2)));
        q.wake("a", Lane::Change);
        let t3 = t1 + Duration::from_secs(2);
        assert_eq!(q.pop(t3, Lane::Resync), Some("a"));
        assert_eq!(q.done(&"a", true, t3), None);
        q.wake("a", Lane::Change);
        assert_eq!(
            q.pop(t3, Lane::Resync),
            Some("a"),
            "no back-off after a success"
        );
    }

    #[test]
    fn the_back_off_is_capped() {
        let mut now = Instant::now();
        let mut q = Queue::default();
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            q.wake(1, Lane::Change);
            now += last;
            assert_eq!(q.pop(now, Lane::Resync), Some(1));
            last = q.done(&1, false, now).unwrap();
        }
        assert_eq!(last, Duration::from_secs(300));
    }

    #[test]
    fn a_job_change_goes_first_then_pod_changes_then_the_resync() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.wake("resync", Lane::Resync);
        q.wake("pod", Lane::Change);
        q.wake("job", Lane::Job);
        assert_eq!(q.pop(now, Lane::Resync), Some("job"));
        assert_eq!(q.pop(now, Lane::Resync), Some("pod"));
        assert_eq!(q.pop(now, Lane::Resync), Some("resync"));
        assert_eq!(q.pop(now, Lane::Resync), None);
    }

    #[test]
    fn a_key_moves_up_once_and_is_taken_once() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.wake("a", Lane::Resync);
        q.wake("b", Lane::Resync);
        q.wake("a", Lane::Job);
        q.wake("a", Lane::Change);
        assert_eq!(q.pop(now, Lane::Job), Some("a"));
        assert_eq!(
            q.pop(now, Lane::Job),
            None,
            "only job changes in the job lane"
        );
        assert_eq!(q.pop(now, Lane::Resync), Some("b"));
        assert_eq!(
            q.pop(now, Lane::Resync),
            None,
            "a's resync entry was left behind"
        );
        q.done(&"a", true, now);
        q.wake("a", Lane::Resync);
        assert_eq!(q.pop(now, Lane::Resync), Some("a"));
    }

    #[test]
    fn a_failed_pass_is_tried_again_when_its_back_off_ends() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.wake("a", Lane::Job);
        q.pop(t0, Lane::Resync);
        let backoff = q.done(&"a", false, t0).unwrap();
        assert_eq!(q.pop(t0, Lane::Resync), None, "backing off");
        assert_eq!(q.next_retry(), Some(t0 + backoff));
        assert_eq!(
            q.pop(t0 + backoff, Lane::Resync),
            Some("a"),
            "no other wake needed"
        );
    }
}
