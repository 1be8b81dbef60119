//! Job history from the accounting database (`sacct`).

use serde::Serialize;

use crate::model::{ExitCode, JobState, Limit, Tres};

/// A job as slurmdbd recorded it (`sacct`): also finished jobs slurmctld has forgotten.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct JobRecord {
    /// Job id.
    pub id: u32,
    /// Job name.
    pub name: String,
    /// User name.
    pub user: String,
    /// Group name.
    pub group: Option<String>,
    /// Account charged.
    pub account: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
    /// QoS.
    pub qos: Option<String>,
    /// WCKey.
    pub wckey: Option<String>,
    /// State.
    pub state: JobState,
    /// Why the job is (or was) in its state, e.g. `None`, `Resources`.
    pub state_reason: Option<String>,
    /// Exit code of the batch script.
    pub exit_code: Option<ExitCode>,
    /// Highest exit code of the job's steps.
    pub derived_exit_code: Option<ExitCode>,
    /// Submission time.
    pub submit_time: Option<i64>,
    /// Time the job became eligible.
    pub eligible_time: Option<i64>,
    /// Start time.
    pub start_time: Option<i64>,
    /// End time.
    pub end_time: Option<i64>,
    /// Run time so far (or in total), seconds.
    pub elapsed_seconds: u64,
    /// Time limit, minutes.
    pub time_limit_minutes: Limit<u32>,
    /// Nodes the job ran on (hostlist).
    pub nodes: Option<String>,
    /// Array job id, for array tasks.
    pub array_job_id: Option<u32>,
    /// Array task id, for array tasks.
    pub array_task_id: Option<u32>,
    /// Requested TRES.
    pub tres_requested: Tres,
    /// Allocated TRES.
    pub tres_allocated: Tres,
    /// Steps (`batch`, `extern`, `0`, …).
    pub steps: Vec<StepRecord>,
}

/// One step of a [`JobRecord`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StepRecord {
    /// Step id as `sacct` prints it after the job id: `batch`, `extern`, `0`, …
    pub id: String,
    /// Step name.
    pub name: Option<String>,
    /// State.
    pub state: JobState,
    /// Exit code.
    pub exit_code: Option<ExitCode>,
    /// Start time.
    pub start_time: Option<i64>,
    /// End time.
    pub end_time: Option<i64>,
    /// Run time, seconds.
    pub elapsed_seconds: u64,
    /// Nodes (hostlist).
    pub nodes: Option<String>,
    /// Number of tasks.
    pub tasks: Option<u32>,
    /// Allocated TRES.
    pub tres_allocated: Tres,
    /// User plus system CPU time, seconds.
    pub cpu_seconds: u64,
}

/// Filters for [`Client::job_history`](crate::Client::job_history) (`sacct` options).
/// Empty lists do not filter; without a time window slurmdbd returns jobs since midnight.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobRecordQuery {
    /// `--user`.
    pub users: Vec<String>,
    /// `--account`.
    pub accounts: Vec<String>,
    /// `--partition`.
    pub partitions: Vec<String>,
    /// `--state`, e.g. `COMPLETED`, `FAILED`.
    pub states: Vec<JobState>,
    /// `--jobs`.
    pub job_ids: Vec<u32>,
    /// `--qos`.
    pub qos: Vec<String>,
    /// `--clusters`.
    pub clusters: Vec<String>,
    /// `--name`.
    pub names: Vec<String>,
    /// `--starttime`, epoch seconds.
    pub start_time: Option<i64>,
    /// `--endtime`, epoch seconds.
    pub end_time: Option<i64>,
    /// Leave out the steps (cheaper).
    pub skip_steps: bool,
}

impl JobRecordQuery {
    /// No filter.
    pub fn new() -> JobRecordQuery {
        JobRecordQuery::default()
    }

    /// Adds a user.
    pub fn user(mut self, user: impl Into<String>) -> JobRecordQuery {
        self.users.push(user.into());
        self
    }

    /// Adds an account.
    pub fn account(mut self, account: impl Into<String>) -> JobRecordQuery {
        self.accounts.push(account.into());
        self
    }

    /// Adds a partition.
    pub fn partition(mut self, partition: impl Into<String>) -> JobRecordQuery {
        self.partitions.push(partition.into());
        self
    }

    /// Adds a state.
    pub fn state(mut self, state: JobState) -> JobRecordQuery {
        self.states.push(state);
        self
    }

    /// Adds a job id.
    pub fn job_id(mut self, id: u32) -> JobRecordQuery {
        self.job_ids.push(id);
        self
    }

    /// Adds a job name.
    pub fn name(mut self, name: impl Into<String>) -> JobRecordQuery {
        self.names.push(name.into());
        self
    }

    /// Adds a QoS.
    pub fn qos(mut self, qos: impl Into<String>) -> JobRecordQuery {
        self.qos.push(qos.into());
        self
    }

    /// Adds a cluster.
    pub fn cluster(mut self, cluster: impl Into<String>) -> JobRecordQuery {
        self.clusters.push(cluster.into());
        self
    }

    /// Sets the start of the time window (`--starttime`, epoch seconds).
    pub fn start_time(mut self, time: i64) -> JobRecordQuery {
        self.start_time = Some(time);
        self
    }

    /// Sets the end of the time window (`--endtime`, epoch seconds).
    pub fn end_time(mut self, time: i64) -> JobRecordQuery {
        self.end_time = Some(time);
        self
    }

    /// Jobs eligible or running between `start` and `end` (epoch seconds).
    pub fn window(mut self, start: i64, end: i64) -> JobRecordQuery {
        self.start_time = Some(start);
        self.end_time = Some(end);
        self
    }

    /// Leaves out the steps.
    pub fn skip_steps(mut self) -> JobRecordQuery {
        self.skip_steps = true;
        self
    }

    /// The query parameters of `GET /slurmdb/vX/jobs/` but the times (their form depends
    /// on the version).
    pub(crate) fn params(&self) -> Vec<(&'static str, String)> {
        let join = |list: &[String]| list.join(",");
        let mut out = Vec::new();
        let lists = [
            ("users", join(&self.users)),
            ("account", join(&self.accounts)),
            ("partition", join(&self.partitions)),
            ("qos", join(&self.qos)),
            ("cluster", join(&self.clusters)),
            ("job_name", join(&self.names)),
            (
                "state",
                self.states
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "step",
                self.job_ids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ];
        out.extend(lists.into_iter().filter(|(_, v)| !v.is_empty()));
        if self.skip_steps {
            out.push(("skip_steps", "true".into()));
        }
        out
    }
}
