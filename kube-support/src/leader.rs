//! Leader election on a coordination.k8s.io Lease, so that several replicas can run and only one
//! acts. Losing the lease ends the process: a restart re-joins the election with clean state,
//! which is simpler and safer than stopping every controller in place.
//!
//! Fencing: the leader counts its renew deadline from the last renewal that succeeded, with its
//! own monotonic clock, and stops when it passes, whatever its API calls are doing; a standby
//! takes the Lease only after it has seen it unchanged for the whole lease duration by *its*
//! clock. The deadline is shorter than the duration, so the old leader is gone before the new one
//! acts (see [`Timings`]). On shutdown the leader releases the Lease, and a standby takes it
//! within a retry period.

mod election;
mod fence;
mod record;
mod timings;

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use election::Election;
use fence::Fence;
pub use fence::Lost;
pub use timings::Timings;

/// This process as the leader: the Lease is renewed in the background until [`Leader::lost`]
/// resolves or [`Leader::release`] gives it up.
#[derive(Debug)]
pub struct Leader {
    identity: String,
    fence: Fence,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// Waits until this process holds the Lease `lease_name` in `namespace` (created when missing,
/// written with `field_manager`), with the [`Timings::default`].
///
/// The identity is `POD_NAME` when set, else `<hostname>-<random uuid>`.
pub async fn acquire(
    client: Client,
    namespace: &str,
    lease_name: &str,
    field_manager: &str,
) -> anyhow::Result<Leader> {
    let identity = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{}-{}", hostname(lease_name), uuid::Uuid::new_v4()));
    acquire_as(
        client,
        namespace,
        lease_name,
        field_manager,
        &identity,
        Timings::default(),
    )
    .await
}

/// [`acquire`] with an explicit identity and timings.
pub async fn acquire_as(
    client: Client,
    namespace: &str,
    lease_name: &str,
    field_manager: &str,
    identity: &str,
    timings: Timings,
) -> anyhow::Result<Leader> {
    anyhow::ensure!(
        timings.renew_deadline < timings.lease_duration,
        "the renew deadline ({:?}) must be shorter than the lease duration ({:?})",
        timings.renew_deadline,
        timings.lease_duration
    );
    anyhow::ensure!(
        timings.lease_duration.as_secs() >= 1,
        "a Lease lasts whole seconds; {:?} is too short",
        timings.lease_duration
    );
    let election = Election {
        api: Api::<Lease>::namespaced(client, namespace),
        name: lease_name.to_owned(),
        identity: identity.to_owned(),
        field_manager: field_manager.to_owned(),
        timings,
    };
    tracing::info!(%identity, lease = lease_name, %namespace, "waiting for leadership");
    let (lease, renewed) = election.campaign().await;
    let (renewals, fence) = watch::channel(fence::Renewal::At(renewed));
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(async move { election.hold(lease, renewed, renewals, stopped).await });
    tracing::info!(%identity, "leading");
    Ok(Leader {
        identity: identity.to_owned(),
        fence: Fence::new(fence, timings.renew_deadline, timings.lease_duration),
        stop: Some(stop),
        task,
    })
}

impl Leader {
    /// The identity this process holds the Lease as.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Resolves when leadership ends (never after [`Leader::release`] began): at the renew
    /// deadline after the last successful renewal at the latest.
    pub async fn lost(&self) -> Lost {
        self.fence.lost().await
    }

    /// A task body that ends the process (exit code 1) when leadership ends, wherever the rest of
    /// the process is (starting up, stuck in a call): exiting is the strongest fence, and a
    /// restart re-joins the election. Spawn it right after [`acquire`].
    pub fn fence(&self) -> impl Future<Output = ()> + Send + 'static {
        let fence = self.fence.clone();
        async move {
            let lost = fence.lost().await;
            tracing::error!("{lost}; exiting so that a restart re-joins the election");
            std::process::exit(1);
        }
    }

    /// Gives the Lease up (no holder, as client-go's `ReleaseOnCancel`) so that a standby takes
    /// it at once. Call it after the controllers have stopped; it returns within a few call
    /// timeouts even when the API server does not answer.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.task).await {
            tracing::warn!(error = %e, "the leader-election task failed");
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Resolves when `leader` is `Some` and leadership ends; never when there is no election.
pub async fn lost_if_electing(leader: Option<&Leader>) -> Lost {
    match leader {
        Some(l) => l.lost().await,
        None => std::future::pending().await,
    }
}

/// The kernel's host name; `fallback` when it cannot be read.
fn hostname(fallback: &str) -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| fallback.into())
}

/// The Lease's namespace: the flag's, else the pod's (`POD_NAMESPACE`), else `default`.
pub fn namespace(flag: Option<&str>) -> String {
    flag.map(str::to_owned)
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".into())
}
