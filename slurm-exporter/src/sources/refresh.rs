//! When to ask slurmctld for "only if changed" and when for everything.
//!
//! slurmctld answers a listing with `update_time` with nothing when nothing changed, so an
//! idle cluster costs almost nothing to watch. Two things can still go stale: values
//! slurmctld may update without marking the list changed, and a change in the same second
//! as the previous answer. A full listing at least every `full_every` bounds both. (Slurm
//! 26.05 does mark the node list changed when a slurmd's ping reply brings a new CPU load or
//! free memory, so nodes with a slurmd on a busy host make most node polls full ones.)

use std::time::{Duration, Instant};

/// The change-tracking state of one listing.
#[derive(Debug)]
pub struct Refresh {
    full_every: Duration,
    last_update: Option<i64>,
    last_full: Option<Instant>,
}

impl Refresh {
    /// A policy doing a full listing at least every `full_every`.
    pub fn new(full_every: Duration) -> Refresh {
        Refresh {
            full_every,
            last_update: None,
            last_full: None,
        }
    }

    /// The `update_time` to send: `None` for a full listing.
    pub fn update_time(&self) -> Option<i64> {
        match self.last_full {
            Some(t) if t.elapsed() < self.full_every => self.last_update,
            _ => None,
        }
    }

    /// Records an answer with data (`full` when no `update_time` was sent).
    pub fn answered(&mut self, last_update: Option<i64>, full: bool) {
        self.last_update = last_update;
        if full {
            self.last_full = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_listing_first_and_after_the_period() {
        let mut r = Refresh::new(Duration::from_secs(300));
        assert_eq!(r.update_time(), None);
        r.answered(Some(100), true);
        assert_eq!(r.update_time(), Some(100));
        r.answered(Some(130), false);
        assert_eq!(r.update_time(), Some(130));
        let mut r = Refresh::new(Duration::ZERO);
        r.answered(Some(100), true);
        assert_eq!(r.update_time(), None);
    }
}
