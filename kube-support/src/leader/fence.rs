//! The leader's fence: leadership ends at the renew deadline counted from the last renewal that
//! succeeded, by this process's monotonic clock, whatever the API calls are doing; or at once
//! when the Lease is seen in another's hands or the election task ends.

use std::fmt;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// What the election task reports to the leader's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Renewal {
    /// Holding; the last successful renewal was sent at this instant.
    At(Instant),
    /// The Lease was seen to be another's (or deleted).
    Lost(Lost),
    /// Given up on purpose (shutdown): not a loss.
    Released,
}

/// Why leadership ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// No renewal succeeded within the renew deadline.
    Deadline {
        /// How long after its last renewal a leader stops.
        renew_deadline: Duration,
        /// How long the Lease lasts after its last renewal.
        lease_duration: Duration,
    },
    /// The Lease names another holder (`None`: nobody).
    TakenBy(Option<String>),
    /// The Lease was deleted.
    Deleted,
    /// The election task stopped.
    Ended,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lost::Deadline {
                renew_deadline,
                lease_duration,
            } => write!(
                f,
                "leader fenced: the Lease was not renewed for {renew_deadline:?} (the renew \
                 deadline; it lasts {lease_duration:?}), so this replica stops before another \
                 can take it"
            ),
            Lost::TakenBy(Some(holder)) => write!(f, "the Lease is held by {holder:?} now"),
            Lost::TakenBy(None) => write!(f, "the Lease was released by someone else"),
            Lost::Deleted => write!(f, "the Lease was deleted"),
            Lost::Ended => write!(f, "the leader-election task stopped"),
        }
    }
}

impl std::error::Error for Lost {}

/// The leader's view of its renewals; cloneable, every clone sees the same renewals.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    renewals: watch::Receiver<Renewal>,
    renew_deadline: Duration,
    lease_duration: Duration,
}

impl Fence {
    pub(super) fn new(
        renewals: watch::Receiver<Renewal>,
        renew_deadline: Duration,
        lease_duration: Duration,
    ) -> Fence {
        Fence {
            renewals,
            renew_deadline,
            lease_duration,
        }
    }

    /// Resolves when leadership ends; never after a release.
    pub(super) async fn lost(&self) -> Lost {
        let mut renewals = self.renewals.clone();
        loop {
            let renewal = renewals.borrow_and_update().clone();
            let renewed = match renewal {
                Renewal::At(at) => at,
                Renewal::Lost(lost) => return lost,
                Renewal::Released => return std::future::pending().await,
            };
            tokio::select! {
                biased;
                changed = renewals.changed() => {
                    if changed.is_err() {
                        return Lost::Ended;
                    }
                }
                () = tokio::time::sleep_until(renewed + self.renew_deadline) => {
                    return Lost::Deadline {
                        renew_deadline: self.renew_deadline,
                        lease_duration: self.lease_duration,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);
    const LEASE: Duration = Duration::from_secs(15);

    fn deadline() -> Lost {
        Lost::Deadline {
            renew_deadline: DEADLINE,
            lease_duration: LEASE,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn leadership_ends_at_the_deadline_after_the_last_renewal() {
        let start = Instant::now();
        let (tx, rx) = watch::channel(Renewal::At(start));
        let fence = Fence::new(rx, DEADLINE, LEASE);
        let lost = tokio::spawn(async move { (fence.lost().await, Instant::now()) });
        // Renewals every second for 5 s, then none (the API server stops answering).
        for s in 1..=5 {
            tokio::time::sleep_until(start + Duration::from_secs(s)).await;
            tx.send(Renewal::At(Instant::now())).unwrap();
        }
        let (why, when) = lost.await.unwrap();
        assert_eq!(why, deadline());
        assert_eq!(when - start, Duration::from_secs(15));
        // The sender still lives: the fence did not wait for the task to notice.
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_sent_long_ago_counts_from_its_sending() {
        let start = Instant::now();
        // A renewal that took 9 s to answer: the deadline counts from when it was sent.
        tokio::time::sleep(Duration::from_secs(9)).await;
        let (_tx, rx) = watch::channel(Renewal::At(start));
        let fence = Fence::new(rx, DEADLINE, LEASE);
        fence.lost().await;
        assert_eq!(Instant::now() - start, DEADLINE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_seen_in_other_hands_or_an_ended_task_ends_it_at_once() {
        let start = Instant::now();
        let (tx, rx) = watch::channel(Renewal::At(start));
        let fence = Fence::new(rx, DEADLINE, LEASE);
        tx.send(Renewal::Lost(Lost::TakenBy(Some("b".into()))))
            .unwrap();
        assert_eq!(fence.lost().await, Lost::TakenBy(Some("b".into())));
        assert_eq!(Instant::now(), start);

        let (tx, rx) = watch::channel(Renewal::At(start));
        let fence = Fence::new(rx, DEADLINE, LEASE);
        drop(tx);
        assert_eq!(fence.lost().await, Lost::Ended);
        assert_eq!(Instant::now(), start);
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_lease_is_not_a_loss() {
        let (tx, rx) = watch::channel(Renewal::At(Instant::now()));
        let fence = Fence::new(rx, DEADLINE, LEASE);
        tx.send(Renewal::Released).unwrap();
        let waited = tokio::time::timeout(LEASE * 4, fence.lost()).await;
        assert!(waited.is_err(), "{waited:?}");
    }
}
