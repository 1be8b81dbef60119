//! slurmctld statistics (`sdiag`).

use serde::Serialize;

/// What `sdiag` shows: daemon load, job counters, scheduler and backfill statistics, RPCs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Diag {
    /// When the statistics were taken.
    pub time: Option<i64>,
    /// When the counters were last reset.
    pub since: Option<i64>,
    /// slurmctld server threads.
    pub server_thread_count: u64,
    /// Agent queue size (RPCs waiting to be sent to nodes).
    pub agent_queue_size: u64,
    /// Active agents.
    pub agent_count: u64,
    /// Agent threads.
    pub agent_thread_count: u64,
    /// Messages queued for slurmdbd.
    pub dbd_agent_queue_size: u64,
    /// Job counters since `since`.
    pub jobs: JobCounters,
    /// Main scheduler.
    pub scheduler: SchedulerStats,
    /// Backfill scheduler.
    pub backfill: BackfillStats,
    /// RPCs by message type.
    pub rpcs_by_type: Vec<RpcStat>,
    /// RPCs by user.
    pub rpcs_by_user: Vec<RpcUserStat>,
}

/// Job counters since the statistics were reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JobCounters {
    /// Jobs submitted.
    pub submitted: u64,
    /// Jobs started.
    pub started: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Jobs cancelled.
    pub canceled: u64,
    /// Jobs failed.
    pub failed: u64,
    /// Jobs pending now.
    pub pending: u64,
    /// Jobs running now.
    pub running: u64,
}

/// The main scheduler's cycles (times in microseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SchedulerStats {
    /// Cycles run.
    pub cycles: u64,
    /// Longest cycle.
    pub cycle_max_us: u64,
    /// Last cycle.
    pub cycle_last_us: u64,
    /// Mean cycle.
    pub cycle_mean_us: u64,
    /// Mean number of jobs looked at per cycle.
    pub mean_depth: u64,
    /// Cycles per minute.
    pub cycles_per_minute: u64,
    /// Jobs in the queue at the last cycle.
    pub queue_length: u64,
}

/// The backfill scheduler's cycles (times in microseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BackfillStats {
    /// Whether a backfill cycle is running now.
    pub active: bool,
    /// Jobs started by backfill since the reset.
    pub backfilled_jobs: u64,
    /// Jobs started by backfill since the last cycle's start.
    pub last_backfilled_jobs: u64,
    /// Heterogeneous job components started by backfill.
    pub backfilled_het_jobs: u64,
    /// Cycles run.
    pub cycles: u64,
    /// Mean cycle.
    pub cycle_mean_us: u64,
    /// Last cycle.
    pub cycle_last_us: u64,
    /// Longest cycle.
    pub cycle_max_us: u64,
    /// Jobs looked at in the last cycle.
    pub last_depth: u64,
    /// Jobs tried in the last cycle.
    pub last_depth_try: u64,
    /// Mean jobs looked at per cycle.
    pub depth_mean: u64,
    /// Mean jobs tried per cycle.
    pub depth_mean_try: u64,
    /// Queue length at the last cycle.
    pub queue_length: u64,
    /// Mean queue length.
    pub queue_length_mean: u64,
    /// Table size at the last cycle.
    pub table_size: u64,
    /// Mean table size.
    pub table_size_mean: u64,
    /// When the last cycle ended.
    pub last_cycle_time: Option<i64>,
}

/// RPCs of one message type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RpcStat {
    /// Message type, e.g. `REQUEST_JOB_INFO`.
    pub message_type: String,
    /// Numeric message type.
    pub type_id: u32,
    /// Count.
    pub count: u64,
    /// Total time in microseconds.
    pub total_time_us: u64,
    /// Average time in microseconds.
    pub average_time_us: u64,
}

/// RPCs of one user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RpcUserStat {
    /// User name.
    pub user: String,
    /// Uid.
    pub user_id: u32,
    /// Count.
    pub count: u64,
    /// Total time in microseconds.
    pub total_time_us: u64,
    /// Average time in microseconds.
    pub average_time_us: u64,
}
