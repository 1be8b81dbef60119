//! Clusters, TRES and WCKeys of the accounting database.

use serde::Serialize;

use crate::model::Tres;

/// A cluster registered in slurmdbd (`sacctmgr show cluster`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ClusterRecord {
    /// Cluster name.
    pub name: String,
    /// slurmctld host as slurmdbd last saw it.
    pub controller_host: Option<String>,
    /// slurmctld port.
    pub controller_port: Option<u16>,
    /// Node list.
    pub nodes: Option<String>,
    /// RPC protocol version of the cluster's slurmctld.
    pub rpc_version: Option<u32>,
    /// Total TRES of the cluster.
    pub tres: Tres,
    /// Flags.
    pub flags: Vec<String>,
}

/// A trackable resource type known to slurmdbd (`sacctmgr show tres`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TresRecord {
    /// Database id (1 = cpu, 2 = mem, …).
    pub id: Option<u32>,
    /// Type, e.g. `cpu`, `gres`.
    pub kind: String,
    /// Name within the type, e.g. `gpu` for `gres/gpu`; `None` for plain types.
    pub name: Option<String>,
    /// Count, where slurmdbd reports one.
    pub count: Option<i64>,
}

impl TresRecord {
    /// The name as used in TRES strings: `cpu`, `gres/gpu`.
    pub fn full_name(&self) -> String {
        match &self.name {
            Some(name) => format!("{}/{name}", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// A workload characterization key of a user on a cluster (`sacctmgr show wckey`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Wckey {
    /// Database id (used by [`Client::get_wckey`](crate::Client::get_wckey)).
    pub id: Option<u32>,
    /// Key name.
    pub name: String,
    /// User the key belongs to.
    pub user: String,
    /// Cluster.
    pub cluster: String,
    /// Flags such as `DELETED`.
    pub flags: Vec<String>,
}
