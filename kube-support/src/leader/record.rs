//! The Lease as the election reads and writes it: when a standby may take it (judged by the
//! standby's own monotonic clock from when it last saw the Lease change, as client-go does, so
//! that clocks of different machines never compare), and the specs of taking, renewing and
//! releasing it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// What a standby last saw of the Lease, and when it saw it change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Observed {
    /// The Lease's resourceVersion; `None` when it did not exist.
    version: Option<String>,
    holder: Option<String>,
    /// The holder's lease duration (its own, which may differ from ours).
    duration: Duration,
    /// When this standby first saw this version.
    since: Instant,
}

impl Observed {
    /// The next observation: `lease` (`None`: missing) read at `now`, after `previous`.
    pub(super) fn next(
        previous: Option<&Observed>,
        lease: Option<&Lease>,
        now: Instant,
        default_duration: Duration,
    ) -> Observed {
        let version = lease.and_then(|l| l.metadata.resource_version.clone());
        let spec = lease.and_then(|l| l.spec.as_ref());
        let holder = spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty());
        let duration = spec
            .and_then(|s| s.lease_duration_seconds)
            .map_or(default_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        let since = match previous {
            Some(p) if p.version == version && p.holder == holder => p.since,
            // A deleted Lease keeps the time its last holder was seen: that holder may still act
            // until its lease would have run out.
            Some(p) if version.is_none() && p.holder.is_some() => p.since,
            _ => now,
        };
        let duration = match previous {
            Some(p) if version.is_none() && p.holder.is_some() => p.duration,
            _ => duration,
        };
        let holder = match previous {
            Some(p) if version.is_none() => p.holder.clone(),
            _ => holder,
        };
        Observed {
            version,
            holder,
            duration,
            since,
        }
    }

    /// Whether `identity` may take the Lease at `now`: nobody holds it, it is already ours (a
    /// restart of the same pod), or it has not changed for its holder's lease duration.
    pub(super) fn may_take(&self, identity: &str, now: Instant) -> bool {
        match &self.holder {
            None => true,
            Some(h) if h == identity => true,
            Some(_) => now >= self.since + self.duration,
        }
    }

    /// The holder named by the Lease, if any.
    pub(super) fn holder(&self) -> Option<&str> {
        self.holder.as_deref()
    }

    /// Whether the Lease existed when read.
    pub(super) fn exists(&self) -> bool {
        self.version.is_some()
    }
}

fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

/// `lease` (the version read, or a new one) taken by `identity`: a transition when the holder
/// changes.
pub(super) fn taken(lease: Lease, identity: &str, duration: Duration) -> Lease {
    let mut lease = writable(lease);
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let now = now_micro();
    if spec.holder_identity.as_deref() != Some(identity) {
        spec.lease_transitions = Some(
            spec.lease_transitions
                .unwrap_or(0)
                .saturating_add(i32::from(spec.holder_identity.is_some())),
        );
        spec.acquire_time = Some(now.clone());
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(seconds(duration));
    spec.renew_time = Some(now);
    lease
}

/// `lease` (ours, as last written) renewed now.
pub(super) fn renewed(lease: &Lease, duration: Duration) -> Lease {
    let mut lease = writable(lease.clone());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.lease_duration_seconds = Some(seconds(duration));
    spec.renew_time = Some(now_micro());
    lease
}

/// `lease` (ours, as last written) released: an empty holder and a 1 s duration, as client-go's
/// `ReleaseOnCancel` writes it, so that any standby (ours or client-go's) takes it at once.
pub(super) fn released(lease: &Lease) -> Lease {
    let mut lease = writable(lease.clone());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let now = now_micro();
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    lease
}

/// `lease` as the base of a write: its name (for a create), its resourceVersion (the
/// precondition of a patch) and its spec.
fn writable(lease: Lease) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: lease.metadata.name,
            resource_version: lease.metadata.resource_version,
            ..ObjectMeta::default()
        },
        spec: lease.spec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn lease(version: &str, holder: Option<&str>, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("l".into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_held_lease_is_taken_only_when_it_has_not_changed_for_its_duration() {
        let t0 = Instant::now();
        let held = lease("1", Some("a"), 15);
        let first = Observed::next(None, Some(&held), t0, LEASE);
        assert!(!first.may_take("b", t0 + Duration::from_secs(14)));
        // A renewal (a new version) restarts the count from when it was seen.
        let renewed = lease("2", Some("a"), 15);
        let second = Observed::next(
            Some(&first),
            Some(&renewed),
            t0 + Duration::from_secs(10),
            LEASE,
        );
        assert!(!second.may_take("b", t0 + Duration::from_secs(24)));
        // The same version read again does not.
        let third = Observed::next(
            Some(&second),
            Some(&renewed),
            t0 + Duration::from_secs(20),
            LEASE,
        );
        assert!(third.may_take("b", t0 + Duration::from_secs(25)));
        // Its holder takes it back at once (a restarted pod of the same name).
        assert!(first.may_take("a", t0));
    }

    #[test]
    fn a_released_or_empty_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let free = Observed::next(None, Some(&lease("3", None, 1)), t0, LEASE);
        assert!(free.may_take("b", t0));
        let empty = Observed::next(None, Some(&lease("3", Some(""), 15)), t0, LEASE);
        assert!(empty.may_take("b", t0));
        assert_eq!(empty.holder(), None);
    }

    #[test]
    fn a_missing_lease_is_created_at_once_unless_a_holder_was_just_seen() {
        let t0 = Instant::now();
        let missing = Observed::next(None, None, t0, LEASE);
        assert!(!missing.exists() && missing.may_take("b", t0));
        // Deleted under a live holder: wait out that holder's lease from when it was seen.
        let held = Observed::next(None, Some(&lease("1", Some("a"), 15)), t0, LEASE);
        let deleted = Observed::next(Some(&held), None, t0 + Duration::from_secs(5), LEASE);
        assert!(!deleted.exists());
        assert!(!deleted.may_take("b", t0 + Duration::from_secs(14)));
        assert!(deleted.may_take("b", t0 + LEASE));
    }

    #[test]
    fn a_nonsense_duration_does_not_overflow() {
        let t0 = Instant::now();
        let odd = Observed::next(None, Some(&lease("1", Some("a"), -5)), t0, LEASE);
        assert!(odd.may_take("b", t0));
    }

    #[test]
    fn taking_counts_a_transition_and_releasing_clears_the_holder() {
        let taken = taken(lease("1", Some("a"), 15), "b", LEASE);
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("b"));
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
        let new = super::taken(lease("", None, 0), "b", LEASE);
        assert_eq!(new.spec.as_ref().unwrap().lease_transitions, Some(0));
        assert_eq!(
            new.metadata.name.as_deref(),
            Some("l"),
            "a create needs the name"
        );
        let released = released(&taken);
        let spec = released.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(""));
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(1));
    }
}
