//! Controller-wide operations: statistics (`sdiag`), ping, reconfigure.

use serde::Deserialize;

use crate::model::{
    BackfillStats, ControllerPing, Diag, JobCounters, Ping, RpcStat, RpcUserStat, SchedulerStats,
};
use crate::ops::Flex;
use crate::{Client, Error, Request, Response};

impl Client {
    /// slurmctld statistics (`GET /slurm/vX/diag/`, like `sdiag`).
    pub async fn diag(&self) -> Result<Response<Diag>, Error> {
        let version = self.version().await?;
        let request = Request::get(format!("/slurm/{version}/diag/"));
        dispatch!(self, "diag", diag(self, request))
    }

    /// Pings every slurmctld (`GET /slurm/vX/ping/`). A controller that does not answer is
    /// reported with `responding: false`, not as an error.
    pub async fn ping(&self) -> Result<Response<Ping>, Error> {
        let version = self.version().await?;
        let request = Request::get(format!("/slurm/{version}/ping/"));
        dispatch!(self, "ping", ping(self, request))
    }

    /// Makes slurmctld re-read its configuration (`GET /slurm/vX/reconfigure/`, like
    /// `scontrol reconfigure`). Needs an administrator token.
    pub async fn reconfigure(&self) -> Result<Response<()>, Error> {
        let version = self.version().await?;
        let request = Request::get(format!("/slurm/{version}/reconfigure/")).idempotent(false);
        dispatch!(self, "reconfigure", reconfigure(self, request))
    }
}

/// `statistics` of every version, read leniently (fields differ slightly between versions:
/// v0.0.40 has plain `average_time` numbers and lacks a few backfill fields).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireStats {
    req_time: Flex,
    req_time_start: Flex,
    server_thread_count: Flex,
    agent_queue_size: Flex,
    agent_count: Flex,
    agent_thread_count: Flex,
    dbd_agent_queue_size: Flex,
    jobs_submitted: Flex,
    jobs_started: Flex,
    jobs_completed: Flex,
    jobs_canceled: Flex,
    jobs_failed: Flex,
    jobs_pending: Flex,
    jobs_running: Flex,
    schedule_cycle_max: Flex,
    schedule_cycle_last: Flex,
    schedule_cycle_total: Flex,
    schedule_cycle_mean: Flex,
    schedule_cycle_mean_depth: Flex,
    schedule_cycle_per_minute: Flex,
    schedule_queue_length: Flex,
    bf_active: bool,
    bf_backfilled_jobs: Flex,
    bf_last_backfilled_jobs: Flex,
    bf_backfilled_het_jobs: Flex,
    bf_cycle_counter: Flex,
    bf_cycle_mean: Flex,
    bf_cycle_last: Flex,
    bf_cycle_max: Flex,
    bf_last_depth: Flex,
    bf_last_depth_try: Flex,
    bf_depth_mean: Flex,
    bf_depth_mean_try: Flex,
    bf_queue_len: Flex,
    bf_queue_len_mean: Flex,
    bf_table_size: Flex,
    bf_table_size_mean: Flex,
    bf_when_last_cycle: Flex,
    rpcs_by_message_type: Vec<WireRpc>,
    rpcs_by_user: Vec<WireRpc>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WireRpc {
    message_type: String,
    type_id: Flex,
    user: String,
    user_id: Flex,
    count: Flex,
    total_time: Flex,
    average_time: Flex,
}

fn time(f: Flex) -> Option<i64> {
    Some(f.u64() as i64).filter(|t| *t > 0)
}

impl From<WireStats> for Diag {
    fn from(s: WireStats) -> Diag {
        Diag {
            time: time(s.req_time),
            since: time(s.req_time_start),
            server_thread_count: s.server_thread_count.u64(),
            agent_queue_size: s.agent_queue_size.u64(),
            agent_count: s.agent_count.u64(),
            agent_thread_count: s.agent_thread_count.u64(),
            dbd_agent_queue_size: s.dbd_agent_queue_size.u64(),
            jobs: JobCounters {
                submitted: s.jobs_submitted.u64(),
                started: s.jobs_started.u64(),
                completed: s.jobs_completed.u64(),
                canceled: s.jobs_canceled.u64(),
                failed: s.jobs_failed.u64(),
                pending: s.jobs_pending.u64(),
                running: s.jobs_running.u64(),
            },
            scheduler: SchedulerStats {
                cycles: s.schedule_cycle_total.u64(),
                cycle_max_us: s.schedule_cycle_max.u64(),
                cycle_last_us: s.schedule_cycle_last.u64(),
                cycle_mean_us: s.schedule_cycle_mean.u64(),
                mean_depth: s.schedule_cycle_mean_depth.u64(),
                cycles_per_minute: s.schedule_cycle_per_minute.u64(),
                queue_length: s.schedule_queue_length.u64(),
            },
            backfill: BackfillStats {
                active: s.bf_active,
                backfilled_jobs: s.bf_backfilled_jobs.u64(),
                last_backfilled_jobs: s.bf_last_backfilled_jobs.u64(),
                backfilled_het_jobs: s.bf_backfilled_het_jobs.u64(),
                cycles: s.bf_cycle_counter.u64(),
                cycle_mean_us: s.bf_cycle_mean.u64(),
                cycle_last_us: s.bf_cycle_last.u64(),
                cycle_max_us: s.bf_cycle_max.u64(),
                last_depth: s.bf_last_depth.u64(),
                last_depth_try: s.bf_last_depth_try.u64(),
                depth_mean: s.bf_depth_mean.u64(),
                depth_mean_try: s.bf_depth_mean_try.u64(),
                queue_length: s.bf_queue_len.u64(),
                queue_length_mean: s.bf_queue_len_mean.u64(),
                table_size: s.bf_table_size.u64(),
                table_size_mean: s.bf_table_size_mean.u64(),
                last_cycle_time: time(s.bf_when_last_cycle),
            },
            rpcs_by_type: s
                .rpcs_by_message_type
                .into_iter()
                .map(|r| RpcStat {
                    message_type: r.message_type,
                    type_id: r.type_id.u64() as u32,
                    count: r.count.u64(),
                    total_time_us: r.total_time.u64(),
                    average_time_us: r.average_time.u64(),
                })
                .collect(),
            rpcs_by_user: s
                .rpcs_by_user
                .into_iter()
                .map(|r| RpcUserStat {
                    user: r.user,
                    user_id: r.user_id.u64() as u32,
                    count: r.count.u64(),
                    total_time_us: r.total_time.u64(),
                    average_time_us: r.average_time.u64(),
                })
                .collect(),
        }
    }
}

/// One `pings[]` entry of every version: v0.0.40/41 lack `responding` and `primary`, v0.0.45
/// has `status` instead of `mode`/`pinged`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WirePing {
    hostname: String,
    pinged: Option<String>,
    responding: Option<bool>,
    primary: Option<bool>,
    latency: Flex,
    mode: Option<String>,
}

impl From<WirePing> for ControllerPing {
    fn from(p: WirePing) -> ControllerPing {
        let responding = p
            .responding
            .unwrap_or_else(|| p.pinged.as_deref() == Some("UP"));
        ControllerPing {
            hostname: p.hostname,
            responding,
            primary: p.primary,
            latency_us: p.latency.0.value().map(|l| l.max(0.0) as u64),
            // v0.0.45's `status` is an error text ("No error"), not a mode.
            mode: p.mode.or_else(|| {
                p.primary
                    .map(|primary| if primary { "primary" } else { "backup" }.to_owned())
            }),
        }
    }
}

/// Shared by every version; expects the aliases `DiagResp`, `PingResp` and `PlainResp`.
macro_rules! diag_version {
    () => {
        use crate::model::{Diag, Ping};
        use crate::ops::reshape;
        use crate::{Client, Error, Request, Response};

        pub(super) async fn diag(
            client: &Client,
            request: Request,
        ) -> Result<Response<Diag>, Error> {
            let response = client.request::<DiagResp>(request).await?;
            Ok(response.map(|r| Diag::from(reshape::<_, super::WireStats>(&r.statistics))))
        }

        pub(super) async fn ping(
            client: &Client,
            request: Request,
        ) -> Result<Response<Ping>, Error> {
            let response = client.request::<PingResp>(request).await?;
            Ok(response.map(|r| Ping {
                controllers: reshape::<_, Vec<super::WirePing>>(&r.pings)
                    .into_iter()
                    .map(Into::into)
                    .collect(),
            }))
        }

        pub(super) async fn reconfigure(
            client: &Client,
            request: Request,
        ) -> Result<Response<()>, Error> {
            Ok(client.request::<PlainResp>(request).await?.map(|_| ()))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type DiagResp = t::V0040OpenapiDiagResp;
    type PingResp = t::V0040OpenapiPingArrayResp;
    type PlainResp = t::V0040OpenapiResp;
    diag_version!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type DiagResp = t::SlurmV0041GetDiagResponse;
    type PingResp = t::SlurmV0041GetPingResponse;
    type PlainResp = t::V0041OpenapiResp;
    diag_version!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type DiagResp = t::V0042OpenapiDiagResp;
    type PingResp = t::V0042OpenapiPingArrayResp;
    type PlainResp = t::V0042OpenapiResp;
    diag_version!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type DiagResp = t::V0043OpenapiDiagResp;
    type PingResp = t::V0043OpenapiPingArrayResp;
    type PlainResp = t::V0043OpenapiResp;
    diag_version!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type DiagResp = t::V0044OpenapiDiagResp;
    type PingResp = t::V0044OpenapiPingArrayResp;
    type PlainResp = t::V0044OpenapiResp;
    diag_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type DiagResp = t::V0045OpenapiDiagResp;
    type PingResp = t::V0045OpenapiPingArrayResp;
    type PlainResp = t::V0045OpenapiResp;
    diag_version!();
}
