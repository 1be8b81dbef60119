//! Licenses managed by slurmctld.

use serde::Serialize;

/// A license (`scontrol show licenses`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct License {
    /// License name.
    pub name: String,
    /// Total count.
    pub total: u64,
    /// In use.
    pub used: u64,
    /// Free.
    pub free: u64,
    /// Reserved (by reservations).
    pub reserved: u64,
    /// Whether it is a remote (accounting database) license.
    pub remote: bool,
}
