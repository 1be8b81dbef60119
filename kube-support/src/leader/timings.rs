//! The election's clock: how long a Lease lasts, when its holder must stop, how often replicas
//! try, and how long one API call of the election may take.

use std::time::Duration;

/// The election's timings. [`Timings::default`] is what the binaries use; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a Lease holds after its last renewal: another replica takes it only when it has
    /// seen no change of the Lease for this long, by its own monotonic clock.
    pub lease_duration: Duration,
    /// The leader stops (the process exits) when its last successful renewal was *sent* this
    /// long ago. Shorter than `lease_duration`: the margin covers the exit itself and two
    /// machines' clocks running at slightly different rates.
    pub renew_deadline: Duration,
    /// The leader renews this often; a standby reads the Lease this often, so a released Lease
    /// is taken within about one period.
    pub retry_period: Duration,
    /// The longest one API call of the election (get, create, replace) may take; never longer
    /// than what is left until the renew deadline.
    pub call_timeout: Duration,
}

impl Default for Timings {
    /// 15 s, 10 s, 1 s, 4 s. The lease and the deadline are client-go's defaults (its
    /// `LeaseDuration` and `RenewDeadline`): a leader cut off from the API server stops after
    /// 10 s, at least 5 s before a standby may act. The retry period is half client-go's 2 s
    /// so that a Lease released on SIGTERM is taken within 2 s (one period plus two calls).
    /// A call gets 4 s: long enough for a loaded API server, short enough that a renewal
    /// stuck on a dead connection leaves time for a second try on a new one before the deadline.
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(1),
            call_timeout: Duration::from_secs(4),
        }
    }
}
