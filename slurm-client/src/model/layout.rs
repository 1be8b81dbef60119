//! Where a running job's resources are, node by node, as `GET /slurm/vX/resources/{id}` gives
//! them.

use serde::Serialize;

/// What a running job holds on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NodeLayout {
    /// The Slurm node.
    pub node: String,
    /// Sockets of the node the job has cores on.
    pub sockets: Option<u32>,
    /// Cores per socket.
    pub cores_per_socket: Option<u32>,
    /// The job's cores on this node, as Slurm's abstract core bitmap (`0x3`: the first two).
    pub core_bitmap: Option<String>,
    /// The job's memory on this node, in MiB.
    pub memory_mb: Option<u64>,
    /// The job's generic resources on this node.
    pub gres: Vec<GresLayout>,
}

/// One generic resource a job holds on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GresLayout {
    /// `gpu`, …
    pub name: String,
    /// The GRES type (`a100`, …), if any.
    pub kind: Option<String>,
    /// How many.
    pub count: u64,
    /// Which (`0-1`), if Slurm tracks indices.
    pub index: Option<String>,
}
