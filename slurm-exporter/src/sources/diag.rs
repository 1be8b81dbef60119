//! slurmctld statistics (`sdiag`) and controller liveness (`scontrol ping`).

use slurm_client::{Diag, Ping};

use super::labels::micros_to_seconds;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The diag source: one `diag` and one `ping` request per collection.
pub struct DiagSource;

impl Source for DiagSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Diag
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let (diag, ping) =
                tokio::try_join!(ctx.call(ctx.client.diag()), ctx.call(ctx.client.ping()))?;
            let negotiated = ctx.client.negotiate().await?;
            let mut families = families(&diag.into_value());
            families.extend(ping_families(&ping.into_value()));
            families.push(controller_info(
                negotiated.release.as_deref().unwrap_or(""),
                negotiated.cluster.as_deref().unwrap_or(""),
                &negotiated.version.to_string(),
            ));
            Ok(Collected::Families(families))
        })
    }
}

/// `slurm_controller_info`: the release and cluster behind slurmrestd, and the REST version.
pub fn controller_info(release: &str, cluster: &str, rest_version: &str) -> Family {
    let mut info = Family::info(
        "slurm_controller",
        "The Slurm release and cluster behind slurmrestd, and the REST version in use.",
        &["release", "cluster", "rest_version"],
    );
    info.info_series(&[release, cluster, rest_version]);
    info
}

fn gauge(name: &'static str, help: &'static str, value: f64) -> Family {
    let mut f = Family::gauge(name, help, &[]);
    f.set::<&str>(&[], value);
    f
}

fn counter(name: &'static str, help: &'static str, value: u64) -> Family {
    let mut f = Family::counter(name, help, &[]);
    f.set::<&str>(&[], value as f64);
    f
}

/// The families from `diag`. Slurm's counters start again from 0 when slurmctld restarts
/// or its statistics are reset (`sdiag -r`, and daily), which Prometheus' `rate()` handles.
pub fn families(d: &Diag) -> Vec<Family> {
    let s = &d.scheduler;
    let b = &d.backfill;
    let j = &d.jobs;
    let mut out = vec![
        gauge(
            "slurm_controller_server_threads",
            "slurmctld threads serving RPCs.",
            d.server_thread_count as f64,
        ),
        gauge(
            "slurm_controller_agent_queue_size",
            "Outgoing RPCs queued in slurmctld's agent.",
            d.agent_queue_size as f64,
        ),
        gauge(
            "slurm_controller_agents",
            "slurmctld agents running.",
            d.agent_count as f64,
        ),
        gauge(
            "slurm_controller_agent_threads",
            "Threads used by slurmctld's agents.",
            d.agent_thread_count as f64,
        ),
        gauge(
            "slurm_controller_dbd_agent_queue_size",
            "Messages queued for slurmdbd (grows when slurmdbd is slow or down).",
            d.dbd_agent_queue_size as f64,
        ),
        counter(
            "slurm_jobs_submitted",
            "Jobs submitted since slurmctld's statistics were last reset.",
            j.submitted,
        ),
        counter(
            "slurm_jobs_started",
            "Jobs started since slurmctld's statistics were last reset.",
            j.started,
        ),
        counter(
            "slurm_jobs_completed",
            "Jobs completed since slurmctld's statistics were last reset.",
            j.completed,
        ),
        counter(
            "slurm_jobs_canceled",
            "Jobs canceled since slurmctld's statistics were last reset.",
            j.canceled,
        ),
        counter(
            "slurm_jobs_failed",
            "Jobs failed since slurmctld's statistics were last reset.",
            j.failed,
        ),
        counter(
            "slurm_scheduler_cycles",
            "Main scheduler cycles run.",
            s.cycles,
        ),
        gauge(
            "slurm_scheduler_cycle_last_seconds",
            "Duration of the last main scheduler cycle.",
            micros_to_seconds(s.cycle_last_us),
        ),
        gauge(
            "slurm_scheduler_cycle_max_seconds",
            "Longest main scheduler cycle.",
            micros_to_seconds(s.cycle_max_us),
        ),
        gauge(
            "slurm_scheduler_cycle_mean_seconds",
            "Mean duration of main scheduler cycles.",
            micros_to_seconds(s.cycle_mean_us),
        ),
        gauge(
            "slurm_scheduler_cycle_mean_depth",
            "Mean number of jobs the main scheduler looked at per cycle.",
            s.mean_depth as f64,
        ),
        gauge(
            "slurm_scheduler_cycles_per_minute",
            "Main scheduler cycles per minute.",
            s.cycles_per_minute as f64,
        ),
        gauge(
            "slurm_scheduler_queue_length",
            "Jobs pending in the main scheduler's queue.",
            s.queue_length as f64,
        ),
        gauge(
            "slurm_backfill_active",
            "Whether the backfill scheduler is running a cycle now (1) or not (0).",
            if b.active { 1.0 } else { 0.0 },
        ),
        counter(
            "slurm_backfill_jobs_backfilled",
            "Jobs started by the backfill scheduler.",
            b.backfilled_jobs,
        ),
        counter(
            "slurm_backfill_het_jobs_backfilled",
            "Heterogeneous job components started by the backfill scheduler.",
            b.backfilled_het_jobs,
        ),
        gauge(
            "slurm_backfill_last_cycle_jobs_backfilled",
            "Jobs started by the backfill scheduler since its last statistics report.",
            b.last_backfilled_jobs as f64,
        ),
        counter(
            "slurm_backfill_cycles",
            "Backfill scheduler cycles run.",
            b.cycles,
        ),
        gauge(
            "slurm_backfill_cycle_last_seconds",
            "Duration of the last backfill cycle.",
            micros_to_seconds(b.cycle_last_us),
        ),
        gauge(
            "slurm_backfill_cycle_max_seconds",
            "Longest backfill cycle.",
            micros_to_seconds(b.cycle_max_us),
        ),
        gauge(
            "slurm_backfill_cycle_mean_seconds",
            "Mean duration of backfill cycles.",
            micros_to_seconds(b.cycle_mean_us),
        ),
        gauge(
            "slurm_backfill_last_depth",
            "Jobs the last backfill cycle looked at.",
            b.last_depth as f64,
        ),
        gauge(
            "slurm_backfill_last_depth_try",
            "Jobs the last backfill cycle tried to schedule.",
            b.last_depth_try as f64,
        ),
        gauge(
            "slurm_backfill_depth_mean",
            "Mean number of jobs backfill cycles looked at.",
            b.depth_mean as f64,
        ),
        gauge(
            "slurm_backfill_depth_try_mean",
            "Mean number of jobs backfill cycles tried to schedule.",
            b.depth_mean_try as f64,
        ),
        gauge(
            "slurm_backfill_queue_length",
            "Jobs pending for the backfill scheduler in its last cycle.",
            b.queue_length as f64,
        ),
        gauge(
            "slurm_backfill_queue_length_mean",
            "Mean number of jobs pending for the backfill scheduler.",
            b.queue_length_mean as f64,
        ),
        gauge(
            "slurm_backfill_table_size",
            "Time slots in the backfill table in the last cycle.",
            b.table_size as f64,
        ),
        gauge(
            "slurm_backfill_table_size_mean",
            "Mean number of time slots in the backfill table.",
            b.table_size_mean as f64,
        ),
    ];
    if let Some(t) = b.last_cycle_time {
        out.push(gauge(
            "slurm_backfill_last_cycle_timestamp_seconds",
            "When the last backfill cycle ran (Unix time).",
            t as f64,
        ));
    }
    if let Some(t) = d.since {
        out.push(gauge(
            "slurm_controller_statistics_reset_timestamp_seconds",
            "When slurmctld's statistics were last reset (Unix time).",
            t as f64,
        ));
    }

    let mut calls = Family::counter(
        "slurm_rpc_calls",
        "RPCs slurmctld served, by message type.",
        &["message_type"],
    );
    let mut time = Family::counter(
        "slurm_rpc_time_seconds",
        "Time slurmctld spent serving RPCs, by message type.",
        &["message_type"],
    );
    for r in &d.rpcs_by_type {
        let t = [r.message_type.as_str()];
        calls.add(&t, r.count as f64);
        time.add(&t, micros_to_seconds(r.total_time_us));
    }
    let mut user_calls = Family::counter(
        "slurm_rpc_user_calls",
        "RPCs slurmctld served, by user.",
        &["user"],
    );
    let mut user_time = Family::counter(
        "slurm_rpc_user_time_seconds",
        "Time slurmctld spent serving RPCs, by user.",
        &["user"],
    );
    for r in &d.rpcs_by_user {
        let u = [r.user.as_str()];
        user_calls.add(&u, r.count as f64);
        user_time.add(&u, micros_to_seconds(r.total_time_us));
    }
    out.extend([calls, time, user_calls, user_time]);
    out
}

/// The families from `ping`.
pub fn ping_families(p: &Ping) -> Vec<Family> {
    let mut up = Family::gauge(
        "slurm_controller_up",
        "Whether this slurmctld answers pings (1) or not (0).",
        &["hostname"],
    );
    let mut latency = Family::gauge(
        "slurm_controller_ping_latency_seconds",
        "How long this slurmctld took to answer slurmrestd's ping.",
        &["hostname"],
    );
    for c in &p.controllers {
        let labels = [c.hostname.as_str()];
        up.set(&labels, if c.responding { 1.0 } else { 0.0 });
        latency.set_opt(&labels, c.latency_us.map(micros_to_seconds));
    }
    vec![up, latency]
}
