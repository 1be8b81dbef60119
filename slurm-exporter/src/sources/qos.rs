//! QoS from slurmdbd: priority, usage factor and limits. What jobs of each QoS use now is
//! in the job metrics (`slurm_jobs_cpus{qos=…}` and friends).

use slurm_client::{Limit, Qos};

use super::labels::{list_label, state_label, tres_values};
use super::partitions::minutes;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The QoS source.
pub struct QosSource;

impl Source for QosSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Qos
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let list = ctx.call(ctx.client.list_qos()).await?.into_value();
            Ok(Collected::Families(families(&list)))
        })
    }
}

fn count(limit: Limit<u32>) -> Option<f64> {
    limit.value().map(f64::from)
}

/// The QoS families. Limits that are unset or unlimited are absent.
pub fn families(qos: &[Qos]) -> Vec<Family> {
    let q = &["qos"];
    let mut info = Family::info(
        "slurm_qos",
        "Facts about the QoS: flags, which QoS it may preempt, preemption mode.",
        &["qos", "flags", "preempt", "preempt_mode"],
    );
    let mut priority = Family::gauge("slurm_qos_priority", "Priority of the QoS.", q);
    let mut usage_factor = Family::gauge(
        "slurm_qos_usage_factor",
        "Factor applied to the usage of jobs in the QoS.",
        q,
    );
    let limit = |name, help| Family::gauge(name, help, q);
    let mut max_jobs_user = limit(
        "slurm_qos_max_jobs_per_user",
        "Most running jobs per user in the QoS.",
    );
    let mut max_jobs_account = limit(
        "slurm_qos_max_jobs_per_account",
        "Most running jobs per account in the QoS.",
    );
    let mut max_submit_user = limit(
        "slurm_qos_max_submit_jobs_per_user",
        "Most running and pending jobs per user in the QoS.",
    );
    let mut max_wall = limit(
        "slurm_qos_max_wall_per_job_seconds",
        "Time limit of each job in the QoS.",
    );
    let mut grp_jobs = limit(
        "slurm_qos_grp_jobs",
        "Most running jobs in the QoS altogether.",
    );
    let mut grp_submit = limit(
        "slurm_qos_grp_submit_jobs",
        "Most running and pending jobs in the QoS altogether.",
    );
    let qt = &["qos", "tres"];
    let mut grp_tres = Family::gauge(
        "slurm_qos_grp_tres",
        "Most of each TRES jobs in the QoS may use altogether (memory in bytes).",
        qt,
    );
    let mut tres_user = Family::gauge(
        "slurm_qos_max_tres_per_user",
        "Most of each TRES one user's jobs in the QoS may use (memory in bytes).",
        qt,
    );
    let mut tres_job = Family::gauge(
        "slurm_qos_max_tres_per_job",
        "Most of each TRES one job in the QoS may use (memory in bytes).",
        qt,
    );
    for item in qos {
        let name = [item.name.as_str()];
        let flags: Vec<String> = item.flags.iter().map(|f| state_label(f)).collect();
        let modes: Vec<String> = item.preempt_mode.iter().map(|f| state_label(f)).collect();
        info.info_series(&[
            item.name.as_str(),
            &list_label(&flags),
            &list_label(&item.preempt),
            &list_label(&modes),
        ]);
        priority.set_opt(&name, count(item.priority));
        usage_factor.set_opt(&name, item.usage_factor.value());
        let l = &item.limits;
        max_jobs_user.set_opt(&name, count(l.max_jobs_per_user));
        max_jobs_account.set_opt(&name, count(l.max_jobs_per_account));
        max_submit_user.set_opt(&name, count(l.max_submit_jobs_per_user));
        max_wall.set_opt(&name, minutes(l.max_wall_minutes_per_job));
        grp_jobs.set_opt(&name, count(l.grp_jobs));
        grp_submit.set_opt(&name, count(l.grp_submit_jobs));
        for (tres, family) in [
            (&l.grp_tres, &mut grp_tres),
            (&l.max_tres_per_user, &mut tres_user),
            (&l.max_tres_per_job, &mut tres_job),
        ] {
            for (res, value) in tres_values(tres) {
                family.set(&[item.name.as_str(), res], value);
            }
        }
    }
    vec![
        info,
        priority,
        usage_factor,
        max_jobs_user,
        max_jobs_account,
        max_submit_user,
        max_wall,
        grp_jobs,
        grp_submit,
        grp_tres,
        tres_user,
        tres_job,
    ]
}
