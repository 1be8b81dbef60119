//! Associations from slurmdbd (account, user, partition): limits, shares and QoS. Their
//! usage is in the fair-share metrics (`slurm_share_*`) and the job metrics.

use slurm_client::{Association, AssociationQuery, Limit};

use super::labels::{list_label, tres_values};
use super::partitions::minutes;
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The association source; asks only for the associations of the cluster behind
/// slurmrestd when its name is known.
pub struct Associations;

impl Source for Associations {
    fn kind(&self) -> SourceKind {
        SourceKind::Associations
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let mut query = AssociationQuery::new();
            if let Some(cluster) = ctx.client.negotiate().await?.cluster {
                query = query.cluster(cluster);
            }
            let list = ctx
                .call(ctx.client.list_associations(&query))
                .await?
                .into_value();
            Ok(Collected::Families(families(&list)))
        })
    }
}

fn count(limit: Limit<u32>) -> Option<f64> {
    limit.value().map(f64::from)
}

/// The association families. Limits that are unset or unlimited are absent.
pub fn families(associations: &[Association]) -> Vec<Family> {
    let who = &["cluster", "account", "user", "partition"];
    let mut info = Family::info(
        "slurm_association",
        "Facts about the association: parent account, QoS allowed and default.",
        &[
            "cluster",
            "account",
            "user",
            "partition",
            "parent_account",
            "qos",
            "default_qos",
        ],
    );
    let mut shares = Family::gauge(
        "slurm_association_shares",
        "Raw fair-share shares of the association.",
        who,
    );
    let mut priority = Family::gauge(
        "slurm_association_priority",
        "Priority of the association.",
        who,
    );
    let mut max_jobs = Family::gauge(
        "slurm_association_max_jobs",
        "Most running jobs of the association.",
        who,
    );
    let mut max_submit = Family::gauge(
        "slurm_association_max_submit_jobs",
        "Most running and pending jobs of the association.",
        who,
    );
    let mut max_wall = Family::gauge(
        "slurm_association_max_wall_per_job_seconds",
        "Time limit of each job of the association.",
        who,
    );
    let mut grp_jobs = Family::gauge(
        "slurm_association_grp_jobs",
        "Most running jobs of the association and its children altogether.",
        who,
    );
    let mut grp_submit = Family::gauge(
        "slurm_association_grp_submit_jobs",
        "Most running and pending jobs of the association and its children altogether.",
        who,
    );
    let with_tres = &["cluster", "account", "user", "partition", "tres"];
    let mut grp_tres = Family::gauge(
        "slurm_association_grp_tres",
        "Most of each TRES the association and its children may use altogether (memory in bytes).",
        with_tres,
    );
    let mut tres_job = Family::gauge(
        "slurm_association_max_tres_per_job",
        "Most of each TRES one job of the association may use (memory in bytes).",
        with_tres,
    );
    for a in associations {
        let user = a.user.as_deref().unwrap_or("");
        let partition = a.partition.as_deref().unwrap_or("");
        let labels = [a.cluster.as_str(), a.account.as_str(), user, partition];
        info.info_series(&[
            a.cluster.as_str(),
            a.account.as_str(),
            user,
            partition,
            a.parent_account.as_deref().unwrap_or(""),
            &list_label(&a.qos),
            a.default_qos.as_deref().unwrap_or(""),
        ]);
        shares.set_opt(&labels, a.shares_raw.map(f64::from));
        priority.set_opt(&labels, count(a.priority));
        let l = &a.limits;
        max_jobs.set_opt(&labels, count(l.max_jobs));
        max_submit.set_opt(&labels, count(l.max_submit_jobs));
        max_wall.set_opt(&labels, minutes(l.max_wall_minutes_per_job));
        grp_jobs.set_opt(&labels, count(l.grp_jobs));
        grp_submit.set_opt(&labels, count(l.grp_submit_jobs));
        for (tres, family) in [
            (&l.grp_tres, &mut grp_tres),
            (&l.max_tres_per_job, &mut tres_job),
        ] {
            for (res, value) in tres_values(tres) {
                family.set(&[labels[0], labels[1], labels[2], labels[3], res], value);
            }
        }
    }
    vec![
        info, shares, priority, max_jobs, max_submit, max_wall, grp_jobs, grp_submit, grp_tres,
        tres_job,
    ]
}
