//! Advanced reservations.

use serde::Serialize;

use super::Tres;

/// A reservation (`scontrol show reservation`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Reservation {
    /// Reservation name.
    pub name: String,
    /// Reserved nodes, e.g. `"node[3-4]"`.
    pub nodes: Option<String>,
    /// Number of reserved nodes.
    pub node_count: u32,
    /// Number of reserved cores.
    pub core_count: u32,
    /// Start time.
    pub start_time: Option<i64>,
    /// End time.
    pub end_time: Option<i64>,
    /// Flags, e.g. `["MAINT", "IGNORE_JOBS"]`.
    pub flags: Vec<String>,
    /// Users allowed.
    pub users: Vec<String>,
    /// Accounts allowed.
    pub accounts: Vec<String>,
    /// Groups allowed.
    pub groups: Vec<String>,
    /// Partition the nodes were taken from.
    pub partition: Option<String>,
    /// Required node features.
    pub features: Option<String>,
    /// Reserved licenses.
    pub licenses: Option<String>,
    /// Reserved trackable resources.
    pub tres: Tres,
    /// Reserved burst buffer.
    pub burst_buffer: Option<String>,
    /// Longest time an eligible job not asking for it may be delayed, in seconds.
    pub max_start_delay: Option<u32>,
}

impl Reservation {
    /// Whether it is a maintenance reservation (`MAINT` flag).
    pub fn is_maintenance(&self) -> bool {
        self.flags.iter().any(|f| f == "MAINT")
    }
}

/// The answer to a reservation listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ReservationList {
    /// The reservations.
    pub reservations: Vec<Reservation>,
    /// When slurmctld produced the list.
    pub last_update: Option<i64>,
    /// True when `update_time` was given and nothing changed since (HTTP 304).
    pub unchanged: bool,
}

/// A reservation to create (`scontrol create reservation`).
///
/// ```
/// use slurm_client::ReservationSpec;
/// let spec = ReservationSpec::new("maint", 60)
///     .nodes("node4")
///     .users(["root"])
///     .flags(["MAINT", "IGNORE_JOBS"]);
/// assert_eq!(spec.duration_minutes, Some(60));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReservationSpec {
    /// Reservation name.
    pub name: String,
    /// Start time (epoch seconds); `None`: now.
    pub start_time: Option<i64>,
    /// Duration in minutes (this or `end_time`).
    pub duration_minutes: Option<u32>,
    /// End time (epoch seconds).
    pub end_time: Option<i64>,
    /// Nodes as hostlist expressions, e.g. `["node[1-2]"]` (this, `node_count` or
    /// `core_count`).
    pub nodes: Vec<String>,
    /// Number of nodes to pick.
    pub node_count: Option<u32>,
    /// Number of cores to reserve.
    pub core_count: Option<u32>,
    /// Users allowed (this and/or `accounts` is required).
    pub users: Vec<String>,
    /// Accounts allowed.
    pub accounts: Vec<String>,
    /// Partition to take nodes from.
    pub partition: Option<String>,
    /// Flags, e.g. `MAINT`, `IGNORE_JOBS`, `FLEX`.
    pub flags: Vec<String>,
    /// Required node features.
    pub features: Option<String>,
    /// Comment.
    pub comment: Option<String>,
}

impl ReservationSpec {
    /// A reservation named `name` starting now and lasting `duration_minutes`.
    pub fn new(name: impl Into<String>, duration_minutes: u32) -> ReservationSpec {
        ReservationSpec {
            name: name.into(),
            duration_minutes: Some(duration_minutes),
            ..ReservationSpec::default()
        }
    }

    /// Sets the nodes (a hostlist expression).
    pub fn nodes(mut self, nodes: impl Into<String>) -> Self {
        self.nodes = vec![nodes.into()];
        self
    }

    /// Sets the number of nodes.
    pub fn node_count(mut self, count: u32) -> Self {
        self.node_count = Some(count);
        self
    }

    /// Sets the number of cores.
    pub fn core_count(mut self, count: u32) -> Self {
        self.core_count = Some(count);
        self
    }

    /// Sets the start time.
    pub fn start_time(mut self, time: i64) -> Self {
        self.start_time = Some(time);
        self
    }

    /// Sets the duration in minutes, instead of an end time (clears the end time).
    pub fn duration_minutes(mut self, minutes: u32) -> Self {
        self.duration_minutes = Some(minutes);
        self.end_time = None;
        self
    }

    /// Sets the end time (epoch seconds), instead of a duration (clears the duration).
    pub fn end_time(mut self, time: i64) -> Self {
        self.end_time = Some(time);
        self.duration_minutes = None;
        self
    }

    /// Sets the users allowed.
    pub fn users<I: IntoIterator<Item = S>, S: Into<String>>(mut self, users: I) -> Self {
        self.users = users.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the accounts allowed.
    pub fn accounts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, accounts: I) -> Self {
        self.accounts = accounts.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the flags.
    pub fn flags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, flags: I) -> Self {
        self.flags = flags.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the partition.
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Sets the required node features.
    pub fn features(mut self, features: impl Into<String>) -> Self {
        self.features = Some(features.into());
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
        if self.duration_minutes.is_none() && self.end_time.is_none() {
            return Err("a duration or an end time is required".into());
        }
        if self.users.is_empty() && self.accounts.is_empty() {
            return Err("users or accounts are required".into());
        }
        if self.nodes.is_empty() && self.node_count.is_none() && self.core_count.is_none() {
            return Err("nodes, a node count or a core count is required".into());
        }
        Ok(())
    }
}

/// Changes to a reservation (`scontrol update reservation`); unset fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReservationUpdate {
    /// New start time.
    pub start_time: Option<i64>,
    /// New end time.
    pub end_time: Option<i64>,
    /// New duration in minutes.
    pub duration_minutes: Option<u32>,
    /// New nodes (replaces the list).
    pub nodes: Option<Vec<String>>,
    /// New node count.
    pub node_count: Option<u32>,
    /// New users (replaces the list).
    pub users: Option<Vec<String>>,
    /// New accounts (replaces the list).
    pub accounts: Option<Vec<String>>,
    /// Flags to set; prefix with `NO_` to clear one, as Slurm does.
    pub flags: Option<Vec<String>>,
    /// New comment.
    pub comment: Option<String>,
}

impl ReservationUpdate {
    /// An update that changes nothing yet (the same as [`ReservationUpdate::default`]).
    pub fn new() -> ReservationUpdate {
        ReservationUpdate::default()
    }

    /// Sets the start time.
    pub fn start_time(mut self, time: i64) -> Self {
        self.start_time = Some(time);
        self
    }

    /// Sets the end time.
    pub fn end_time(mut self, time: i64) -> Self {
        self.end_time = Some(time);
        self
    }

    /// Sets the duration.
    pub fn duration_minutes(mut self, minutes: u32) -> Self {
        self.duration_minutes = Some(minutes);
        self
    }

    /// Sets the nodes (a hostlist expression; replaces the list).
    pub fn nodes(mut self, nodes: impl Into<String>) -> Self {
        self.nodes = Some(vec![nodes.into()]);
        self
    }

    /// Sets the node count.
    pub fn node_count(mut self, count: u32) -> Self {
        self.node_count = Some(count);
        self
    }

    /// Sets the users.
    pub fn users<I: IntoIterator<Item = S>, S: Into<String>>(mut self, users: I) -> Self {
        self.users = Some(users.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the accounts.
    pub fn accounts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, accounts: I) -> Self {
        self.accounts = Some(accounts.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the flags; prefix one with `NO_` to clear it.
    pub fn flags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, flags: I) -> Self {
        self.flags = Some(flags.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("the reservation name is empty".into());
    }
    if name.contains(['/', '?', '#']) {
        return Err(format!(
            "reservation name {name:?} contains `/`, `?` or `#`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_validation_names_what_is_missing() {
        let ok = ReservationSpec::new("r", 10).nodes("node1").users(["root"]);
        assert!(ok.validate().is_ok());
        let err = ReservationSpec::new("r", 10)
            .nodes("node1")
            .validate()
            .unwrap_err();
        assert!(err.contains("users"), "{err}");
        let err = ReservationSpec::new("r", 10)
            .users(["root"])
            .validate()
            .unwrap_err();
        assert!(err.contains("nodes"), "{err}");
        let err = ReservationSpec::new("", 10).validate().unwrap_err();
        assert!(err.contains("name"), "{err}");
    }
}
