//! Associations: the (cluster, account, user, partition) records limits and fairshare
//! hang on.

use serde::Serialize;

use crate::model::{Limit, Tres};

/// An association (`sacctmgr show assoc`): an account's (`user: None`) or a user's record
/// in an account on a cluster, with its limits and fairshare.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Association {
    /// Database id.
    pub id: Option<u32>,
    /// Cluster name.
    pub cluster: String,
    /// Account name.
    pub account: String,
    /// User name; `None` for the account's own association.
    pub user: Option<String>,
    /// Partition; `None` for all partitions.
    pub partition: Option<String>,
    /// Parent account (account associations only).
    pub parent_account: Option<String>,
    /// Whether this is the user's default association.
    pub is_default: bool,
    /// Fairshare shares (`Fairshare=`/`Shares=`).
    pub shares_raw: Option<u32>,
    /// Association priority.
    pub priority: Limit<u32>,
    /// QoS the association may use.
    pub qos: Vec<String>,
    /// Default QoS.
    pub default_qos: Option<String>,
    /// Comment.
    pub comment: Option<String>,
    /// Flags such as `DELETED`.
    pub flags: Vec<String>,
    /// Limits.
    pub limits: AssociationLimits,
}

/// The limits of an association, named as `sacctmgr` names them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AssociationLimits {
    /// `MaxJobs`: running jobs per user.
    pub max_jobs: Limit<u32>,
    /// `MaxSubmitJobs`: running and pending jobs.
    pub max_submit_jobs: Limit<u32>,
    /// `MaxJobsAccrue`: pending jobs accruing age priority.
    pub max_jobs_accrue: Limit<u32>,
    /// `MaxWall`: wall clock per job, minutes.
    pub max_wall_minutes_per_job: Limit<u32>,
    /// `MaxTRES`: per job.
    pub max_tres_per_job: Tres,
    /// `MaxTRESPerNode`.
    pub max_tres_per_node: Tres,
    /// `MaxTRESMins`: per job.
    pub max_tres_minutes_per_job: Tres,
    /// `GrpJobs`: running jobs of the association and its children.
    pub grp_jobs: Limit<u32>,
    /// `GrpSubmitJobs`.
    pub grp_submit_jobs: Limit<u32>,
    /// `GrpJobsAccrue`.
    pub grp_jobs_accrue: Limit<u32>,
    /// `GrpTRES`.
    pub grp_tres: Tres,
    /// `GrpTRESMins`.
    pub grp_tres_minutes: Tres,
    /// `GrpTRESRunMins`.
    pub grp_tres_run_minutes: Tres,
    /// `GrpWall`, minutes.
    pub grp_wall_minutes: Limit<u32>,
}

/// Filters for [`Client::list_associations`](crate::Client::list_associations); unset
/// fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AssociationQuery {
    /// Only this account.
    pub account: Option<String>,
    /// Only this user.
    pub user: Option<String>,
    /// Only this cluster.
    pub cluster: Option<String>,
    /// Only this partition.
    pub partition: Option<String>,
}

impl AssociationQuery {
    /// No filter.
    pub fn new() -> AssociationQuery {
        AssociationQuery::default()
    }

    /// Only associations of `account`.
    pub fn account(mut self, account: impl Into<String>) -> AssociationQuery {
        self.account = Some(account.into());
        self
    }

    /// Only associations of `user`.
    pub fn user(mut self, user: impl Into<String>) -> AssociationQuery {
        self.user = Some(user.into());
        self
    }

    /// Only associations on `cluster`.
    pub fn cluster(mut self, cluster: impl Into<String>) -> AssociationQuery {
        self.cluster = Some(cluster.into());
        self
    }

    /// Only associations of `partition`.
    pub fn partition(mut self, partition: impl Into<String>) -> AssociationQuery {
        self.partition = Some(partition.into());
        self
    }

    /// Whether nothing filters (deleting with such a query is refused).
    pub fn is_empty(&self) -> bool {
        self == &AssociationQuery::default()
    }

    pub(crate) fn params(&self) -> Vec<(&'static str, &str)> {
        [
            ("account", &self.account),
            ("user", &self.user),
            ("cluster", &self.cluster),
            ("partition", &self.partition),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
        .collect()
    }
}
