//! Fair-share information (`sshare`).

use serde::Serialize;

use super::Limit;

/// The fair-share tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Shares {
    /// Associations and users, in tree order.
    pub shares: Vec<Share>,
    /// Total shares.
    pub total_shares: u64,
}

/// One association (account or user) in the fair-share tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Share {
    /// Association id.
    pub id: u32,
    /// Cluster.
    pub cluster: Option<String>,
    /// Account or user name.
    pub name: String,
    /// Parent account.
    pub parent: Option<String>,
    /// Partition, for partition-specific associations.
    pub partition: Option<String>,
    /// `["USER"]` or `["ASSOCIATION"]`.
    pub kind: Vec<String>,
    /// Raw shares.
    pub shares: Limit<u64>,
    /// Normalized shares.
    pub shares_normalized: Limit<f64>,
    /// Raw usage.
    pub usage: u64,
    /// Normalized usage.
    pub usage_normalized: Limit<f64>,
    /// Effective usage.
    pub effective_usage: Limit<f64>,
    /// Fair-share factor.
    pub fairshare_factor: Limit<f64>,
    /// Fair-share level.
    pub fairshare_level: Limit<f64>,
}

/// Filters for [`Client::shares`](crate::Client::shares).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SharesQuery {
    /// Only these accounts.
    pub accounts: Vec<String>,
    /// Only these users.
    pub users: Vec<String>,
}

impl SharesQuery {
    /// The whole tree.
    pub fn new() -> SharesQuery {
        SharesQuery::default()
    }

    /// Adds an account to [`SharesQuery::accounts`].
    pub fn account(mut self, account: impl Into<String>) -> SharesQuery {
        self.accounts.push(account.into());
        self
    }

    /// Adds a user to [`SharesQuery::users`].
    pub fn user(mut self, user: impl Into<String>) -> SharesQuery {
        self.users.push(user.into());
        self
    }
}
