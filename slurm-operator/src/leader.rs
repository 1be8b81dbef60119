//! The operator's leader election: [`kube_support::leader`] on the Lease Slinky's operator uses.
//! Losing the lease ends the process: a restart re-joins the election with clean state, which
//! is simpler and safer than stopping every controller in place.

use kube::Client;

pub use kube_support::leader::{Leader, Lost, namespace};

/// The Lease's name, as Slinky's operator names its own.
pub const LEASE_NAME: &str = "slurm-operator";
/// The field manager of the Lease's writes.
pub const FIELD_MANAGER: &str = "slurm-operator-leader";

/// Waits until this process holds the lease in `namespace` (see [`Leader`]).
pub async fn acquire(client: Client, namespace: &str) -> anyhow::Result<Leader> {
    kube_support::leader::acquire(client, namespace, LEASE_NAME, FIELD_MANAGER).await
}
