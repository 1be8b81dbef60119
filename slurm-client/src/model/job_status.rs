//! A job's state alone, as `GET /slurm/vX/jobs/state/` gives it for many jobs at once.

use serde::Serialize;

use super::{JobFlag, JobState};

/// The state of one job, without the rest of its record (about 80 bytes of JSON instead of
/// about 9 KiB): what a follower of many jobs polls, reading a whole [`Job`](super::Job) only
/// when the state moved.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct JobStatus {
    /// Job id (for an array task or a heterogeneous job's component, its job's id).
    pub id: u32,
    /// The rest of Slurm's id for an array task (`_3` of `12_3`) or a heterogeneous job's
    /// component (`+1` of `12+1`); `None` for a plain job.
    pub component: Option<String>,
    /// Base state (`PENDING`, `RUNNING`, …).
    pub state: JobState,
    /// State flags (`COMPLETING`, `CONFIGURING`, …).
    pub state_flags: Vec<JobFlag>,
}
