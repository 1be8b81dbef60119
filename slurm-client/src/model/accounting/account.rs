//! Accounts and users of the accounting database.

use serde::Serialize;

/// An account (`sacctmgr show account`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Account {
    /// Account name.
    pub name: String,
    /// Free-text description.
    pub description: Option<String>,
    /// Organization the account belongs to.
    pub organization: Option<String>,
    /// Users who coordinate this account.
    pub coordinators: Vec<String>,
    /// Flags such as `DELETED`.
    pub flags: Vec<String>,
}

/// A new account: created together with its association on a cluster
/// (`sacctmgr add account name=… cluster=… parent=…`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AccountSpec {
    /// Account name (required).
    pub name: String,
    /// Description (Slurm defaults it to the name).
    pub description: Option<String>,
    /// Organization (Slurm defaults it to the parent's).
    pub organization: Option<String>,
    /// Parent account; `root` when unset.
    pub parent: Option<String>,
    /// Clusters to create the association on; every cluster of the database when empty.
    pub clusters: Vec<String>,
}

impl AccountSpec {
    /// An account named `name` under `root`.
    pub fn new(name: impl Into<String>) -> AccountSpec {
        AccountSpec {
            name: name.into(),
            ..AccountSpec::default()
        }
    }

    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> AccountSpec {
        self.description = Some(text.into());
        self
    }

    /// Sets the organization.
    pub fn organization(mut self, text: impl Into<String>) -> AccountSpec {
        self.organization = Some(text.into());
        self
    }

    /// Sets the parent account.
    pub fn parent(mut self, account: impl Into<String>) -> AccountSpec {
        self.parent = Some(account.into());
        self
    }

    /// Adds a cluster to create the association on.
    pub fn cluster(mut self, cluster: impl Into<String>) -> AccountSpec {
        self.clusters.push(cluster.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        valid_name("account", &self.name)
    }
}

/// A user of the accounting database (`sacctmgr show user`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct User {
    /// User name.
    pub name: String,
    /// `None`, `Operator` or `Administrator`.
    pub administrator_level: Option<String>,
    /// Default account.
    pub default_account: Option<String>,
    /// Default WCKey.
    pub default_wckey: Option<String>,
    /// Accounts the user has an association with (empty unless listed with associations).
    pub accounts: Vec<String>,
    /// Accounts the user coordinates.
    pub coordinator_of: Vec<String>,
    /// Flags such as `DELETED`.
    pub flags: Vec<String>,
}

/// A new user, added to an account (`sacctmgr add user name=… account=…`): creates the
/// user if needed and the association user↔account.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct UserSpec {
    /// User name (required).
    pub name: String,
    /// Account to add the user to (required).
    pub account: String,
    /// Default account; the `account` when unset.
    pub default_account: Option<String>,
    /// Clusters to create the association on; every cluster when empty.
    pub clusters: Vec<String>,
    /// Partition of the association (all partitions when unset).
    pub partition: Option<String>,
    /// `Operator` or `Administrator`.
    pub administrator_level: Option<String>,
}

impl UserSpec {
    /// User `name` in `account`.
    pub fn new(name: impl Into<String>, account: impl Into<String>) -> UserSpec {
        UserSpec {
            name: name.into(),
            account: account.into(),
            ..UserSpec::default()
        }
    }

    /// Sets the default account.
    pub fn default_account(mut self, account: impl Into<String>) -> UserSpec {
        self.default_account = Some(account.into());
        self
    }

    /// Adds a cluster to create the association on.
    pub fn cluster(mut self, cluster: impl Into<String>) -> UserSpec {
        self.clusters.push(cluster.into());
        self
    }

    /// Restricts the association to a partition.
    pub fn partition(mut self, partition: impl Into<String>) -> UserSpec {
        self.partition = Some(partition.into());
        self
    }

    /// Sets the administrator level (`Operator`, `Administrator`).
    pub fn administrator_level(mut self, level: impl Into<String>) -> UserSpec {
        self.administrator_level = Some(level.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        valid_name("user", &self.name)?;
        valid_name("account", &self.account)
    }
}

/// Names go into paths and `sacctmgr`-like conditions: no empty names, spaces or commas.
pub(crate) fn valid_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} name is empty"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, ',' | '/' | '='))
    {
        return Err(format!("{what} name {name:?} contains {c:?}"));
    }
    Ok(())
}
