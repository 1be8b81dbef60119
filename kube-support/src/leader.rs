//! Leader election on a coordination.k8s.io Lease, so that several replicas can run and only one
//! acts. Losing the lease is meant to end the process: a restart re-joins the election with clean
//! state, which is simpler and safer than stopping every controller in place.

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManagerBuilder};
use tokio::sync::watch;

/// Waits until this process holds the Lease `lease_name` in `namespace` (created when missing,
/// written with `field_manager`); returns a receiver that turns `false` when the lease is lost.
///
/// The identity is `POD_NAME` when set, else `<hostname>-<random uuid>`. The lease lasts 15 s,
/// with a 5 s grace.
pub async fn acquire(
    client: Client,
    namespace: &str,
    lease_name: &str,
    field_manager: &str,
) -> anyhow::Result<watch::Receiver<bool>> {
    let identity = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{}-{}", hostname(lease_name), uuid::Uuid::new_v4()));
    let manager = LeaseManagerBuilder::new(client, lease_name)
        .with_namespace(namespace)
        .with_identity(identity.clone())
        .with_create_mode(LeaseCreateMode::AutoCreate)
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(field_manager)
        .build()
        .await
        .with_context(|| format!("cannot use Lease {namespace}/{lease_name}"))?;
    let (mut leader, task) = manager.watch().await;
    // The task runs for as long as the receiver lives; its end is seen through the channel.
    drop(task);
    tracing::info!(%identity, lease = lease_name, %namespace, "waiting for leadership");
    while !*leader.borrow_and_update() {
        leader
            .changed()
            .await
            .context("leader election stopped before this process became leader")?;
    }
    tracing::info!(%identity, "leading");
    Ok(leader)
}

/// Resolves when `leader` (from [`acquire`]) says the lease was lost (or its task ended).
pub async fn lost(mut leader: watch::Receiver<bool>) {
    loop {
        if leader.changed().await.is_err() || !*leader.borrow() {
            return;
        }
    }
}

/// The kernel's host name; `fallback` when it cannot be read.
fn hostname(fallback: &str) -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| fallback.into())
}

/// Resolves when `leader` is `Some` and says the lease was lost; never when there is no election.
pub async fn lost_if_electing(leader: Option<watch::Receiver<bool>>) {
    match leader {
        Some(l) => lost(l).await,
        None => std::future::pending().await,
    }
}

/// The Lease's namespace: the flag's, else the pod's (`POD_NAMESPACE`), else `default`.
pub fn namespace(flag: Option<&str>) -> String {
    flag.map(str::to_owned)
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".into())
}
