//! Jobs in slurmctld: what `squeue`/`scontrol show job` show, submissions and updates.

use serde::Serialize;

use super::{Limit, Tres, string_enum};

string_enum! {
    /// A job's base state (the first entry of Slurm's `job_state` list).
    JobState {
        /// Queued, waiting for resources or a condition.
        Pending = "PENDING",
        /// Allocated and running.
        Running = "RUNNING",
        /// Suspended after it started.
        Suspended = "SUSPENDED",
        /// Ended with exit code 0 on every node.
        Completed = "COMPLETED",
        /// Cancelled by a user or administrator.
        Cancelled = "CANCELLED",
        /// Ended with a non-zero exit code or other failure.
        Failed = "FAILED",
        /// Reached its time limit.
        Timeout = "TIMEOUT",
        /// Ended because a node failed.
        NodeFail = "NODE_FAIL",
        /// Preempted by another job.
        Preempted = "PREEMPTED",
        /// A node failed to boot.
        BootFail = "BOOT_FAIL",
        /// Reached its deadline.
        Deadline = "DEADLINE",
        /// Ran out of memory.
        OutOfMemory = "OUT_OF_MEMORY",
    }
}

impl Default for JobState {
    /// An unknown state (`Other("")`).
    fn default() -> Self {
        JobState::Other(String::new())
    }
}

impl JobState {
    /// Whether the job has ended (it will not run again unless requeued).
    pub fn is_finished(&self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended | JobState::Other(_)
        )
    }
}

string_enum! {
    /// A flag next to a job's base state (the later entries of Slurm's `job_state` list).
    JobFlag {
        /// Allocated, running the prolog or booting nodes.
        Configuring = "CONFIGURING",
        /// Ending: epilog or process cleanup still running.
        Completing = "COMPLETING",
        /// Requeued, will run again.
        Requeued = "REQUEUED",
        /// Requeued and held.
        RequeueHold = "REQUEUE_HOLD",
        /// Requeued with a special exit code.
        SpecialExit = "SPECIAL_EXIT",
        /// Changing size.
        Resizing = "RESIZING",
        /// Launch failed.
        LaunchFailed = "LAUNCH_FAILED",
        /// Signalling its processes.
        Signaling = "SIGNALING",
        /// Staging out data.
        StageOut = "STAGE_OUT",
        /// Stopped (SIGSTOP) but holding its allocation.
        Stopped = "STOPPED",
        /// Held because its reservation was deleted.
        ResvDelHold = "RESV_DEL_HOLD",
        /// Revoked (federation).
        Revoked = "REVOKED",
        /// Waiting for nodes to power up.
        PowerUpNode = "POWER_UP_NODE",
        /// Reconfiguration of its nodes failed.
        ReconfigFail = "RECONFIG_FAIL",
        /// Expediting requeue.
        Expediting = "EXPEDITING",
        /// Update pending in the accounting database.
        UpdateDb = "UPDATE_DB",
    }
}

/// How a job (or its processes) ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExitCode {
    /// Slurm's status words, e.g. `["SUCCESS"]`, `["SIGNALED"]`, `["PENDING"]`.
    pub status: Vec<String>,
    /// The process return code, if set.
    pub return_code: Option<i64>,
    /// The signal that ended it, if any, e.g. `9`.
    pub signal: Option<i64>,
    /// The signal's name, e.g. `"KILL"`.
    pub signal_name: Option<String>,
}

/// Where a job sits in a job array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ArrayInfo {
    /// The array's job id (the first job's id).
    pub job_id: u32,
    /// This task's index; `None` for the meta record of pending tasks.
    pub task_id: Option<u32>,
    /// Pending task indices, e.g. `"3-9%2"`.
    pub task_string: Option<String>,
    /// Maximum number of tasks running at once (0: no limit).
    pub max_tasks: Option<u32>,
}

/// A job as slurmctld knows it (`scontrol show job`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Job {
    /// Job id.
    pub id: u32,
    /// Job name.
    pub name: String,
    /// The submitting user's name.
    pub user: String,
    /// The submitting user's uid.
    pub user_id: Option<u32>,
    /// The job's gid.
    pub group_id: Option<u32>,
    /// Account charged.
    pub account: Option<String>,
    /// Partition(s), comma-separated when several were requested and it has not started.
    pub partition: Option<String>,
    /// Quality of service.
    pub qos: Option<String>,
    /// Reservation, if any.
    pub reservation: Option<String>,
    /// Base state.
    pub state: JobState,
    /// Flags next to the base state (`COMPLETING`, `REQUEUED`, …).
    pub state_flags: Vec<JobFlag>,
    /// Why it is in this state, e.g. `"Resources"`, `"Priority"`; `None` for `"None"`.
    pub reason: Option<String>,
    /// Slurm's text about the state, if any.
    pub state_description: Option<String>,
    /// Allocated nodes as a hostlist expression, e.g. `"node[1-2]"` (empty while pending).
    pub nodes: Option<String>,
    /// Number of nodes (allocated, or requested while pending).
    pub node_count: Limit<u32>,
    /// Number of CPUs (allocated, or requested while pending).
    pub cpus: Limit<u32>,
    /// Number of tasks.
    pub tasks: Limit<u32>,
    /// CPUs per task.
    pub cpus_per_task: Limit<u16>,
    /// Memory per node in MiB, if requested that way.
    pub memory_per_node_mb: Limit<u64>,
    /// Memory per CPU in MiB, if requested that way.
    pub memory_per_cpu_mb: Limit<u64>,
    /// Requested resources (`tres_req_str`).
    pub tres_requested: Tres,
    /// Allocated resources (`tres_alloc_str`); empty until it starts.
    pub tres_allocated: Tres,
    /// GRES requested per node, e.g. `"gres/gpu:2"` (`tres_per_node`).
    pub tres_per_node: Option<String>,
    /// Submission time.
    pub submit_time: Option<i64>,
    /// When it became eligible to run.
    pub eligible_time: Option<i64>,
    /// Start time (expected start while pending, if known).
    pub start_time: Option<i64>,
    /// End time (expected end while running).
    pub end_time: Option<i64>,
    /// When the scheduler last looked at it.
    pub last_sched_evaluation: Option<i64>,
    /// Time limit in minutes.
    pub time_limit_minutes: Limit<u32>,
    /// Priority. Values up to `u32::MAX` occur (e.g. `4294967293` for top-priority jobs).
    pub priority: Limit<u32>,
    /// Nice value.
    pub nice: Option<i64>,
    /// Whether it is held (priority 0).
    pub held: bool,
    /// Exit code (set once it ended).
    pub exit_code: Option<ExitCode>,
    /// Job array details, for array jobs.
    pub array: Option<ArrayInfo>,
    /// The node running the batch script.
    pub batch_host: Option<String>,
    /// Whether it is a batch job (as opposed to `salloc`/`srun`).
    pub batch: bool,
    /// Comment.
    pub comment: Option<String>,
    /// Working directory.
    pub working_directory: Option<String>,
    /// Standard output path (with Slurm's `%` patterns).
    pub stdout: Option<String>,
    /// Standard error path.
    pub stderr: Option<String>,
    /// The batch script's or command's path.
    pub command: Option<String>,
    /// Dependencies, e.g. `"afterok:12"`.
    pub dependency: Option<String>,
    /// Required node features.
    pub features: Option<String>,
    /// Licenses requested.
    pub licenses: Option<String>,
    /// How many times it was restarted (requeued).
    pub restart_count: u32,
    /// Whether it may be requeued.
    pub requeue: bool,
    /// The cluster it runs on.
    pub cluster: Option<String>,
    /// Administrator's comment (`AdminComment`), e.g. what an external scheduler noted.
    pub admin_comment: Option<String>,
    /// MCS label (`MCSLabel`), if the job has one.
    pub mcs_label: Option<String>,
    /// Slurm's job flags (`flags`), e.g. `"EXTERNAL_JOB"`, `"USING_DEFAULT_PARTITION"`.
    /// Which flags a release reports differs; see [`Job::is_external`].
    pub flags: Vec<String>,
    /// Nodes the job must not run on, as a hostlist expression (`ExcNodeList`).
    pub excluded_nodes: Option<String>,
}

impl Job {
    /// Whether the job is pending.
    pub fn is_pending(&self) -> bool {
        self.state == JobState::Pending
    }

    /// Whether the job is running (or suspended after starting).
    pub fn is_running(&self) -> bool {
        matches!(self.state, JobState::Running | JobState::Suspended)
    }

    /// Whether it is an external job (flag `EXTERNAL_JOB`, Slurm 25.05+): an allocation
    /// with nothing launched in it, held for a scheduler outside Slurm (see
    /// [`JobSubmission::external`]).
    pub fn is_external(&self) -> bool {
        self.flags.iter().any(|f| f == "EXTERNAL_JOB")
    }

    /// Whether the state carries `flag`.
    pub fn has_flag(&self, flag: &JobFlag) -> bool {
        self.state_flags.contains(flag)
    }

    /// GPUs allocated, or requested while it has no allocation.
    pub fn gpus(&self) -> u64 {
        match self.tres_allocated.gpus() {
            0 => self.tres_requested.gpus(),
            n => n,
        }
    }
}

/// The answer to a job listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct JobList {
    /// The jobs (all of them: slurmctld never sends only the changed ones).
    pub jobs: Vec<Job>,
    /// When slurmctld produced the list; pass it as [`JobQuery::update_time`] next time.
    pub last_update: Option<i64>,
    /// When the backfill scheduler last ran.
    pub last_backfill: Option<i64>,
    /// True when [`JobQuery::update_time`] was given and nothing changed since: `jobs` is
    /// then empty, not a list of zero jobs.
    pub unchanged: bool,
}

/// The end of a streamed job listing ([`Client::for_each_job`](crate::Client::for_each_job)):
/// everything [`JobList`] says but the jobs, which were handed out one by one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StreamedJobs {
    /// Jobs handed out (those the query's filters kept).
    pub jobs: usize,
    /// Jobs in the answer, before the query's filters.
    pub listed: usize,
    /// As [`JobList::last_update`].
    pub last_update: Option<i64>,
    /// As [`JobList::last_backfill`].
    pub last_backfill: Option<i64>,
    /// As [`JobList::unchanged`]: nothing changed since [`JobQuery::update_time`], and no job
    /// was handed out.
    pub unchanged: bool,
}

/// Filters for [`Client::list_jobs`](crate::Client::list_jobs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JobQuery {
    /// Only answer if something changed since this time (epoch seconds; use the previous
    /// [`JobList::last_update`]). slurmctld then sends either every job or none.
    pub update_time: Option<i64>,
    /// Include jobs in hidden partitions and of other federation clusters (`flags=ALL`).
    pub all: bool,
    /// Keep only jobs whose name is in this list (filtered on the client).
    pub names: Vec<String>,
    /// Keep only jobs of these users (filtered on the client).
    pub users: Vec<String>,
    /// Keep only jobs in these partitions (filtered on the client).
    pub partitions: Vec<String>,
    /// Keep only jobs in these states (filtered on the client).
    pub states: Vec<JobState>,
}

impl JobQuery {
    /// A query for every job.
    pub fn new() -> JobQuery {
        JobQuery::default()
    }

    /// Sets [`JobQuery::update_time`].
    pub fn update_time(mut self, time: i64) -> JobQuery {
        self.update_time = Some(time);
        self
    }

    /// Sets [`JobQuery::all`]: include jobs in hidden partitions and of other clusters.
    pub fn all(mut self, all: bool) -> JobQuery {
        self.all = all;
        self
    }

    /// Adds a name to [`JobQuery::names`].
    pub fn name(mut self, name: impl Into<String>) -> JobQuery {
        self.names.push(name.into());
        self
    }

    /// Adds a user to [`JobQuery::users`].
    pub fn user(mut self, user: impl Into<String>) -> JobQuery {
        self.users.push(user.into());
        self
    }

    /// Adds a partition to [`JobQuery::partitions`].
    pub fn partition(mut self, partition: impl Into<String>) -> JobQuery {
        self.partitions.push(partition.into());
        self
    }

    /// Adds a state to [`JobQuery::states`].
    pub fn state(mut self, state: JobState) -> JobQuery {
        self.states.push(state);
        self
    }

    /// Whether `job` passes the client-side filters.
    pub fn matches(&self, job: &Job) -> bool {
        (self.names.is_empty() || self.names.contains(&job.name))
            && (self.users.is_empty() || self.users.contains(&job.user))
            && (self.partitions.is_empty()
                || job
                    .partition
                    .as_deref()
                    .is_some_and(|p| p.split(',').any(|p| self.partitions.iter().any(|q| q == p))))
            && (self.states.is_empty() || self.states.contains(&job.state))
    }
}

/// A batch job to submit (`sbatch`).
///
/// Start from [`JobSubmission::wrap`], [`JobSubmission::script`] or
/// [`JobSubmission::external_job`] and chain the setters.
///
/// ```
/// use slurm_client::JobSubmission;
/// let job = JobSubmission::wrap("hostname")
///     .name("hello")
///     .partition("debug")
///     .time_limit_minutes(5)
///     .working_directory("/tmp");
/// assert!(job.script.starts_with("#!/bin/sh\n"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JobSubmission {
    /// The batch script, starting with `#!`.
    pub script: String,
    /// Job name.
    pub name: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Account to charge.
    pub account: Option<String>,
    /// Quality of service.
    pub qos: Option<String>,
    /// Reservation to run in.
    pub reservation: Option<String>,
    /// Number of tasks (`--ntasks`).
    pub tasks: Option<u32>,
    /// CPUs per task (`--cpus-per-task`).
    pub cpus_per_task: Option<u32>,
    /// Minimum number of nodes (`--nodes`).
    pub nodes: Option<u32>,
    /// Memory per node in MiB (`--mem`).
    pub memory_per_node_mb: Option<u64>,
    /// Memory per CPU in MiB (`--mem-per-cpu`).
    pub memory_per_cpu_mb: Option<u64>,
    /// Time limit in minutes (`--time`).
    pub time_limit_minutes: Option<u32>,
    /// GRES per node, e.g. `"gres/gpu:2"` (`--gres`).
    pub tres_per_node: Option<String>,
    /// Required node features (`--constraint`).
    pub constraints: Option<String>,
    /// Working directory (`--chdir`). slurmctld needs one; see [`JobSubmission::wrap`].
    pub working_directory: Option<String>,
    /// Environment as `NAME=value` entries. Slurm requires at least one; when empty,
    /// `PATH=/bin:/usr/bin:/usr/local/bin` is sent.
    pub environment: Vec<String>,
    /// Standard output path (`--output`).
    pub stdout: Option<String>,
    /// Standard error path (`--error`).
    pub stderr: Option<String>,
    /// Comment.
    pub comment: Option<String>,
    /// Dependencies, e.g. `"afterok:12"`.
    pub dependency: Option<String>,
    /// Array indices, e.g. `"0-9%2"`.
    pub array: Option<String>,
    /// Submit held (`--hold`).
    pub hold: bool,
    /// Nice value.
    pub nice: Option<i64>,
    /// Submit an *external* job (job flag `EXTERNAL_JOB`): slurmctld allocates the
    /// resources and launches nothing, leaving the allocation to a scheduler outside Slurm
    /// (e.g. one that runs Kubernetes pods on the nodes). Such a job needs no script: with
    /// an empty [`JobSubmission::script`], none is sent. Only REST v0.0.43+ (Slurm 25.05+)
    /// has the flag; older versions give [`Error::Unsupported`](crate::Error::Unsupported)
    /// and nothing is submitted.
    pub external: bool,
    /// Administrator's comment (`--admin-comment`); setting it needs an operator or
    /// administrator (or `SlurmUser`/root).
    pub admin_comment: Option<String>,
    /// MCS label (`--mcs-label`). slurmctld checks it against its `MCSPlugin`.
    pub mcs_label: Option<String>,
    /// Nodes the job must not run on (`--exclude`); empty: none excluded.
    pub excluded_nodes: Vec<String>,
    /// Whole nodes, shared with no other job (`--exclusive`; sent as `shared: ["none"]`).
    pub exclusive: bool,
    /// Minimum number of nodes (`--nodes=min-max`). The same as [`JobSubmission::nodes`];
    /// when both are set they must agree.
    pub min_nodes: Option<u32>,
    /// Maximum number of nodes (`--nodes=min-max`).
    pub max_nodes: Option<u32>,
    /// Tasks per node (`--ntasks-per-node`).
    pub tasks_per_node: Option<u32>,
    /// Run as this uid (`--uid`); only root or `SlurmUser` may submit for another user.
    pub user_id: Option<u32>,
    /// Run with this gid (`--gid`); only root or `SlurmUser` may set it.
    pub group_id: Option<u32>,
    /// Licenses, e.g. `"matlab:1,fluent:2"` (`--licenses`).
    pub licenses: Option<String>,
    /// Workload characterization key (`--wckey`).
    pub wckey: Option<String>,
    /// Priority (`--priority`); setting it needs an operator or administrator.
    pub priority: Option<u32>,
}

impl JobSubmission {
    /// An external job with no script (see [`JobSubmission::external`]).
    pub fn external_job() -> JobSubmission {
        JobSubmission {
            external: true,
            ..JobSubmission::default()
        }
    }

    /// A submission running `script` (which should start with `#!`).
    pub fn script(script: impl Into<String>) -> JobSubmission {
        JobSubmission {
            script: script.into(),
            ..JobSubmission::default()
        }
    }

    /// A submission running one shell command, like `sbatch --wrap`.
    pub fn wrap(command: impl AsRef<str>) -> JobSubmission {
        JobSubmission::script(format!("#!/bin/sh\n{}\n", command.as_ref()))
    }

    /// Sets the job name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the partition.
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Sets the account.
    pub fn account(mut self, account: impl Into<String>) -> Self {
        self.account = Some(account.into());
        self
    }

    /// Sets the QOS.
    pub fn qos(mut self, qos: impl Into<String>) -> Self {
        self.qos = Some(qos.into());
        self
    }

    /// Sets the reservation to run in.
    pub fn reservation(mut self, reservation: impl Into<String>) -> Self {
        self.reservation = Some(reservation.into());
        self
    }

    /// Sets the number of tasks.
    pub fn tasks(mut self, tasks: u32) -> Self {
        self.tasks = Some(tasks);
        self
    }

    /// Sets CPUs per task.
    pub fn cpus_per_task(mut self, cpus: u32) -> Self {
        self.cpus_per_task = Some(cpus);
        self
    }

    /// Sets the minimum number of nodes.
    pub fn nodes(mut self, nodes: u32) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// Sets memory per node in MiB.
    pub fn memory_per_node_mb(mut self, mb: u64) -> Self {
        self.memory_per_node_mb = Some(mb);
        self
    }

    /// Sets memory per CPU in MiB.
    pub fn memory_per_cpu_mb(mut self, mb: u64) -> Self {
        self.memory_per_cpu_mb = Some(mb);
        self
    }

    /// Sets the time limit in minutes.
    pub fn time_limit_minutes(mut self, minutes: u32) -> Self {
        self.time_limit_minutes = Some(minutes);
        self
    }

    /// Sets the GRES per node, e.g. `"gres/gpu:2"`.
    pub fn tres_per_node(mut self, tres: impl Into<String>) -> Self {
        self.tres_per_node = Some(tres.into());
        self
    }

    /// Sets the required node features, e.g. `"intel&ib"`.
    pub fn constraints(mut self, constraints: impl Into<String>) -> Self {
        self.constraints = Some(constraints.into());
        self
    }

    /// Sets the working directory.
    pub fn working_directory(mut self, dir: impl Into<String>) -> Self {
        self.working_directory = Some(dir.into());
        self
    }

    /// Adds an environment entry `name=value`.
    pub fn env(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.environment
            .push(format!("{}={}", name.as_ref(), value.as_ref()));
        self
    }

    /// Sets the whole environment, as `NAME=value` entries (replaces earlier ones).
    pub fn environment<I, S>(mut self, entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.environment = entries.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the standard output path.
    pub fn stdout(mut self, path: impl Into<String>) -> Self {
        self.stdout = Some(path.into());
        self
    }

    /// Sets the standard error path.
    pub fn stderr(mut self, path: impl Into<String>) -> Self {
        self.stderr = Some(path.into());
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Sets the dependencies, e.g. `"afterok:12"`.
    pub fn dependency(mut self, dependency: impl Into<String>) -> Self {
        self.dependency = Some(dependency.into());
        self
    }

    /// Makes it a job array with these indices, e.g. `"0-9%2"`.
    pub fn array(mut self, indices: impl Into<String>) -> Self {
        self.array = Some(indices.into());
        self
    }

    /// Submits the job held.
    pub fn hold(mut self, hold: bool) -> Self {
        self.hold = hold;
        self
    }

    /// Sets the nice value.
    pub fn nice(mut self, nice: i64) -> Self {
        self.nice = Some(nice);
        self
    }

    /// Makes it an external job (or not); see [`JobSubmission::external`].
    pub fn external(mut self, external: bool) -> Self {
        self.external = external;
        self
    }

    /// Sets the administrator's comment.
    pub fn admin_comment(mut self, comment: impl Into<String>) -> Self {
        self.admin_comment = Some(comment.into());
        self
    }

    /// Sets the MCS label.
    pub fn mcs_label(mut self, label: impl Into<String>) -> Self {
        self.mcs_label = Some(label.into());
        self
    }

    /// Adds a node the job must not run on.
    pub fn exclude_node(mut self, node: impl Into<String>) -> Self {
        self.excluded_nodes.push(node.into());
        self
    }

    /// Sets the nodes the job must not run on (replaces earlier ones).
    pub fn excluded_nodes<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.excluded_nodes = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Asks for whole nodes, shared with no other job (`--exclusive`).
    pub fn exclusive(mut self, exclusive: bool) -> Self {
        self.exclusive = exclusive;
        self
    }

    /// Sets the minimum number of nodes.
    pub fn min_nodes(mut self, nodes: u32) -> Self {
        self.min_nodes = Some(nodes);
        self
    }

    /// Sets the maximum number of nodes.
    pub fn max_nodes(mut self, nodes: u32) -> Self {
        self.max_nodes = Some(nodes);
        self
    }

    /// Sets tasks per node.
    pub fn tasks_per_node(mut self, tasks: u32) -> Self {
        self.tasks_per_node = Some(tasks);
        self
    }

    /// Sets the uid to run as.
    pub fn user_id(mut self, uid: u32) -> Self {
        self.user_id = Some(uid);
        self
    }

    /// Sets the gid to run with.
    pub fn group_id(mut self, gid: u32) -> Self {
        self.group_id = Some(gid);
        self
    }

    /// Sets the licenses, e.g. `"matlab:1"`.
    pub fn licenses(mut self, licenses: impl Into<String>) -> Self {
        self.licenses = Some(licenses.into());
        self
    }

    /// Sets the workload characterization key.
    pub fn wckey(mut self, wckey: impl Into<String>) -> Self {
        self.wckey = Some(wckey.into());
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The minimum node count to send: [`JobSubmission::min_nodes`], else
    /// [`JobSubmission::nodes`].
    pub(crate) fn minimum_nodes(&self) -> Option<u32> {
        self.min_nodes.or(self.nodes)
    }

    /// Checks what Slurm would otherwise reject with a less clear message.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if let (Some(nodes), Some(min)) = (self.nodes, self.min_nodes) {
            if nodes != min {
                return Err(format!(
                    "nodes ({nodes}) and min_nodes ({min}) disagree; set only one"
                ));
            }
        }
        if let (Some(min), Some(max)) = (self.minimum_nodes(), self.max_nodes) {
            if min > max {
                return Err(format!(
                    "the minimum node count {min} is above the maximum {max}"
                ));
            }
        }
        if self.excluded_nodes.iter().any(|n| n.trim().is_empty()) {
            return Err("an excluded node name is empty".into());
        }
        if self.external && self.script.is_empty() {
            return self.validate_environment();
        }
        if self.script.trim().is_empty() {
            return Err("the job script is empty".into());
        }
        if !self.script.starts_with("#!") {
            return Err("the job script must start with `#!` (e.g. `#!/bin/sh`)".into());
        }
        self.validate_environment()
    }

    fn validate_environment(&self) -> Result<(), String> {
        if let Some(bad) = self.environment.iter().find(|e| !e.contains('=')) {
            return Err(format!(
                "environment entry {bad:?} is not of the form NAME=value"
            ));
        }
        Ok(())
    }
}

/// What slurmctld answered to a submission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SubmittedJob {
    /// The new job's id.
    pub job_id: u32,
    /// The step id, usually `"batch"`.
    pub step_id: Option<String>,
    /// A message from the site's job_submit plugin, if any.
    pub user_message: Option<String>,
}

/// Changes to a job (`scontrol update job`); unset fields stay as they are.
///
/// ```
/// use slurm_client::{JobUpdate, Limit};
/// let update = JobUpdate::default().time_limit_minutes(Limit::Value(30)).comment("hi");
/// assert_eq!(update.comment.as_deref(), Some("hi"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JobUpdate {
    /// New time limit in minutes (`Infinite` for none).
    pub time_limit_minutes: Option<Limit<u32>>,
    /// New comment.
    pub comment: Option<String>,
    /// New priority (`Value(0)` holds the job).
    pub priority: Option<Limit<u32>>,
    /// Hold (`true`) or release (`false`).
    pub hold: Option<bool>,
    /// New name.
    pub name: Option<String>,
    /// New partition.
    pub partition: Option<String>,
    /// New QOS.
    pub qos: Option<String>,
    /// New account.
    pub account: Option<String>,
    /// New nice value.
    pub nice: Option<i64>,
    /// New administrator's comment (needs an operator or administrator).
    pub admin_comment: Option<String>,
    /// New list of nodes the job must not run on (replaces the old one; empty: none).
    pub excluded_nodes: Option<Vec<String>>,
}

impl JobUpdate {
    /// An update that changes nothing yet (the same as [`JobUpdate::default`]).
    pub fn new() -> JobUpdate {
        JobUpdate::default()
    }

    /// Sets the time limit.
    pub fn time_limit_minutes(mut self, limit: Limit<u32>) -> Self {
        self.time_limit_minutes = Some(limit);
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: Limit<u32>) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Holds (`true`) or releases (`false`).
    pub fn hold(mut self, hold: bool) -> Self {
        self.hold = Some(hold);
        self
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the partition.
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Sets the QOS.
    pub fn qos(mut self, qos: impl Into<String>) -> Self {
        self.qos = Some(qos.into());
        self
    }

    /// Sets the account.
    pub fn account(mut self, account: impl Into<String>) -> Self {
        self.account = Some(account.into());
        self
    }

    /// Sets the nice value.
    pub fn nice(mut self, nice: i64) -> Self {
        self.nice = Some(nice);
        self
    }

    /// Sets the administrator's comment.
    pub fn admin_comment(mut self, comment: impl Into<String>) -> Self {
        self.admin_comment = Some(comment.into());
        self
    }

    /// Sets the nodes the job must not run on; an empty list clears Slurm's.
    pub fn excluded_nodes<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.excluded_nodes = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Whether nothing would change.
    pub fn is_empty(&self) -> bool {
        *self == JobUpdate::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_keep_unknown_values() {
        assert_eq!(JobState::parse("PENDING"), JobState::Pending);
        assert_eq!(
            JobState::parse("WARPING"),
            JobState::Other("WARPING".into())
        );
        assert_eq!(JobState::Other("WARPING".into()).as_str(), "WARPING");
        assert_eq!(
            serde_json::to_string(&JobFlag::Requeued).unwrap(),
            r#""REQUEUED""#
        );
        assert!(JobState::Cancelled.is_finished());
        assert!(!JobState::Running.is_finished());
    }

    #[test]
    fn submission_validation_names_the_problem() {
        assert!(JobSubmission::wrap("true").validate().is_ok());
        let err = JobSubmission::script("echo hi").validate().unwrap_err();
        assert!(err.contains("#!"), "{err}");
        let err = JobSubmission::wrap("true")
            .env("A", "1")
            .validate()
            .map(|_| ())
            .and_then(|_| {
                let mut s = JobSubmission::wrap("true");
                s.environment.push("BROKEN".into());
                s.validate()
            })
            .unwrap_err();
        assert!(err.contains("BROKEN"), "{err}");
    }

    #[test]
    fn external_jobs_need_no_script() {
        assert!(JobSubmission::external_job().validate().is_ok());
        assert!(JobSubmission::default().validate().is_err());
        let err = JobSubmission::external_job()
            .external(true)
            .validate()
            .and_then(|_| {
                JobSubmission::script("no shebang")
                    .external(true)
                    .validate()
            })
            .unwrap_err();
        assert!(err.contains("#!"), "{err}");
    }

    #[test]
    fn node_counts_must_agree() {
        let job = JobSubmission::wrap("true").nodes(2);
        assert_eq!(job.minimum_nodes(), Some(2));
        assert!(job.clone().min_nodes(2).validate().is_ok());
        let err = job.clone().min_nodes(3).validate().unwrap_err();
        assert!(err.contains("disagree"), "{err}");
        let err = job.max_nodes(1).validate().unwrap_err();
        assert!(err.contains("maximum"), "{err}");
        let job = JobSubmission::wrap("true").min_nodes(1).max_nodes(4);
        assert_eq!(job.minimum_nodes(), Some(1));
        assert!(job.validate().is_ok());
        let err = JobSubmission::wrap("true")
            .exclude_node(" ")
            .validate()
            .unwrap_err();
        assert!(err.contains("excluded"), "{err}");
    }

    #[test]
    fn external_flag_is_read_from_flags() {
        let job = Job {
            flags: vec!["USING_DEFAULT_QOS".into(), "EXTERNAL_JOB".into()],
            ..Job::default()
        };
        assert!(job.is_external());
        assert!(!Job::default().is_external());
    }

    #[test]
    fn query_filters_on_the_client() {
        let job = Job {
            name: "a".into(),
            user: "u".into(),
            partition: Some("debug,gpu".into()),
            state: JobState::Running,
            ..Job::default()
        };
        assert!(JobQuery::new().matches(&job));
        assert!(JobQuery::new().partition("gpu").matches(&job));
        assert!(!JobQuery::new().name("b").matches(&job));
        assert!(!JobQuery::new().state(JobState::Pending).matches(&job));
    }
}
