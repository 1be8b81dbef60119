//! The election's API traffic over one coordination.k8s.io/v1 Lease: a standby reads it every
//! retry period and takes it (a merge patch with the resourceVersion it read as precondition, so
//! that of two standbys one wins, and the charts' Roles need only get, patch and create) when it is free or has not changed for its lease duration; the leader
//! renews it the same way and reports each renewal that succeeded to its [`Fence`]; on
//! shutdown it releases it. Every call has its own timeout.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde::Serialize;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::fence::{Lost, Renewal};
use super::record::{self, Observed};
use super::timings::Timings;

/// One replica's side of the election.
pub(super) struct Election {
    pub(super) api: Api<Lease>,
    pub(super) name: String,
    pub(super) identity: String,
    pub(super) field_manager: String,
    pub(super) timings: Timings,
}

/// A failed call: its API error, another error, or its timeout.
#[derive(Debug)]
enum CallError {
    Api(kube::Error),
    TimedOut(Duration),
    /// A Lease read without a resourceVersion, which a conditional write needs.
    NoVersion,
}

impl CallError {
    fn code(&self) -> Option<u16> {
        match self {
            CallError::Api(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Api(e) => e.fmt(f),
            CallError::TimedOut(limit) => write!(f, "no answer within {limit:?}"),
            CallError::NoVersion => write!(f, "the Lease as read has no resourceVersion"),
        }
    }
}

/// A merge patch whose resourceVersion the API server checks before it applies the spec.
#[derive(Debug, Serialize)]
struct Conditional<'a> {
    metadata: Precondition<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a LeaseSpec>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Precondition<'a> {
    resource_version: &'a str,
}

const CONFLICT: u16 = 409;
const NOT_FOUND: u16 = 404;

impl Election {
    fn params(&self) -> PostParams {
        PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        }
    }

    async fn call<T>(
        &self,
        limit: Duration,
        call: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout(limit, call).await {
            Ok(result) => result.map_err(CallError::Api),
            Err(_) => Err(CallError::TimedOut(limit)),
        }
    }

    async fn get(&self, limit: Duration) -> Result<Option<Lease>, CallError> {
        self.call(limit, self.api.get_opt(&self.name)).await
    }

    /// Writes `lease`'s spec if the Lease is still at `lease`'s resourceVersion (else 409).
    async fn write(&self, limit: Duration, lease: &Lease) -> Result<Lease, CallError> {
        // Without a version the patch would be unconditional: never send one.
        let Some(version) = lease.metadata.resource_version.as_deref() else {
            return Err(CallError::NoVersion);
        };
        let body = Conditional {
            metadata: Precondition {
                resource_version: version,
            },
            spec: lease.spec.as_ref(),
        };
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        self.call(
            limit,
            self.api.patch(&self.name, &params, &Patch::Merge(&body)),
        )
        .await
    }

    /// Waits until this replica holds the Lease; returns it as written and when that write was
    /// sent.
    pub(super) async fn campaign(&self) -> (Lease, Instant) {
        let t = self.timings;
        let mut observed: Option<Observed> = None;
        let mut failures = 0u32;
        loop {
            match self.get(t.call_timeout).await {
                Ok(lease) => {
                    failures = 0;
                    let seen = Observed::next(
                        observed.as_ref(),
                        lease.as_ref(),
                        Instant::now(),
                        t.lease_duration,
                    );
                    if seen.may_take(&self.identity, Instant::now())
                        && let Some(won) = self.take(lease, &seen).await
                    {
                        return won;
                    }
                    observed = Some(seen);
                }
                Err(e) => {
                    failures += 1;
                    // One line per failure would fill the log of a standby cut off for long.
                    if failures == 1 || failures.is_multiple_of(30) {
                        tracing::warn!(lease = %self.name, error = %e, failures, "cannot read the Lease");
                    }
                }
            }
            tokio::time::sleep(t.retry_period).await;
        }
    }

    /// One try to take the Lease read as `lease` (`None`: missing).
    async fn take(&self, lease: Option<Lease>, seen: &Observed) -> Option<(Lease, Instant)> {
        let t = self.timings;
        let sent = Instant::now();
        let result = match lease {
            Some(lease) => {
                let next = record::taken(lease, &self.identity, t.lease_duration);
                self.write(t.call_timeout, &next).await
            }
            None => {
                let new = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: None,
                };
                let next = record::taken(new, &self.identity, t.lease_duration);
                self.call(t.call_timeout, self.api.create(&self.params(), &next))
                    .await
            }
        };
        match result {
            Ok(written) => {
                tracing::info!(
                    lease = %self.name,
                    previous = seen.holder().unwrap_or(""),
                    existed = seen.exists(),
                    "took the Lease"
                );
                Some((written, sent))
            }
            // Another replica wrote it first: read it again.
            Err(e) if e.code() == Some(CONFLICT) => None,
            Err(e) => {
                tracing::warn!(lease = %self.name, error = %e, "cannot take the Lease");
                None
            }
        }
    }

    /// Renews `lease` every retry period, reporting each success sent at an instant to
    /// `renewals`, until the Lease is lost (reported) or `stop` fires (the Lease is then
    /// released and `Released` reported).
    pub(super) async fn hold(
        &self,
        mut lease: Lease,
        renewed: Instant,
        renewals: watch::Sender<Renewal>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let t = self.timings;
        let mut renewed = renewed;
        let mut next = renewed + t.retry_period;
        loop {
            tokio::select! {
                biased;
                _ = &mut stop => break,
                () = tokio::time::sleep_until(next) => {}
            }
            let sent = Instant::now();
            let left = (renewed + t.renew_deadline).saturating_duration_since(sent);
            if left.is_zero() {
                // The fence has fired (or is about to); no more writes from here.
                let _ = renewals.send(Renewal::Lost(Lost::Deadline {
                    renew_deadline: t.renew_deadline,
                    lease_duration: t.lease_duration,
                }));
                return;
            }
            let renewal = record::renewed(&lease, t.lease_duration);
            let result = tokio::select! {
                biased;
                _ = &mut stop => break,
                result = self.write(t.call_timeout.min(left), &renewal) => result,
            };
            next = Instant::now() + t.retry_period;
            match result {
                Ok(written) => {
                    lease = written;
                    renewed = sent;
                    let _ = renewals.send(Renewal::At(sent));
                }
                Err(e) if e.code() == Some(CONFLICT) => {
                    match self.get(t.call_timeout.min(left)).await {
                        Ok(Some(current)) => {
                            let holder = current
                                .spec
                                .as_ref()
                                .and_then(|s| s.holder_identity.clone());
                            if holder.as_deref() == Some(self.identity.as_str()) {
                                // Changed by someone else but still ours (a label, say): renew
                                // that version at once.
                                lease = current;
                                next = Instant::now();
                            } else {
                                let _ = renewals.send(Renewal::Lost(Lost::TakenBy(
                                    holder.filter(|h| !h.is_empty()),
                                )));
                                return;
                            }
                        }
                        Ok(None) => {
                            let _ = renewals.send(Renewal::Lost(Lost::Deleted));
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(lease = %self.name, error = %e, "cannot read the Lease after a conflict")
                        }
                    }
                }
                Err(e) if e.code() == Some(NOT_FOUND) => {
                    let _ = renewals.send(Renewal::Lost(Lost::Deleted));
                    return;
                }
                Err(e) => tracing::warn!(
                    lease = %self.name,
                    error = %e,
                    since_renewal = ?renewed.elapsed(),
                    "cannot renew the Lease"
                ),
            }
        }
        self.release(&lease).await;
        let _ = renewals.send(Renewal::Released);
    }

    /// Releases `lease` (ours, as last written); when a renewal we stopped waiting for went
    /// through after all, the version read again is released, if it is still ours.
    async fn release(&self, lease: &Lease) {
        let t = self.timings;
        let mut lease = lease.clone();
        for _ in 0..2 {
            match self.write(t.call_timeout, &record::released(&lease)).await {
                Ok(_) => {
                    tracing::info!(lease = %self.name, "released the Lease");
                    return;
                }
                Err(e) if e.code() == Some(CONFLICT) => match self.get(t.call_timeout).await {
                    Ok(Some(current))
                        if current
                            .spec
                            .as_ref()
                            .and_then(|s| s.holder_identity.as_deref())
                            == Some(self.identity.as_str()) =>
                    {
                        lease = current;
                    }
                    // Another's, or gone: nothing of ours to release.
                    Ok(_) => return,
                    Err(e) => {
                        tracing::warn!(lease = %self.name, error = %e, "cannot release the Lease; the standby waits for it to expire");
                        return;
                    }
                },
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, "cannot release the Lease; the standby waits for it to expire");
                    return;
                }
            }
        }
    }
}
