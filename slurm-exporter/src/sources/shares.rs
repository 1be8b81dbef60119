//! Fair share (`sshare`): shares, usage and fair-share factors per account and user.

use slurm_client::{Share, SharesQuery};

use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The fair-share source.
pub struct SharesSource;

impl Source for SharesSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Shares
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let shares = ctx
                .call(ctx.client.shares(&SharesQuery::default()))
                .await?
                .into_value();
            Ok(Collected::Families(families(&shares.shares)))
        })
    }
}

/// `(account, user)` of a share entry: a user entry sits under its account (`parent`);
/// an account entry has no user.
fn owner(s: &Share) -> (&str, &str) {
    if s.kind.iter().any(|k| k.eq_ignore_ascii_case("USER")) {
        (s.parent.as_deref().unwrap_or(""), s.name.as_str())
    } else {
        (s.name.as_str(), "")
    }
}

/// Slurm sends LevelFS "infinity" (no usage yet) as the largest 64-bit integer.
fn infinite_sentinel(v: f64) -> f64 {
    if v >= u64::MAX as f64 {
        f64::INFINITY
    } else {
        v
    }
}

/// The fair-share families.
pub fn families(shares: &[Share]) -> Vec<Family> {
    let who = &["account", "user", "partition"];
    let mut raw = Family::gauge(
        "slurm_share_shares",
        "Raw shares assigned to the account or user (FairShare).",
        who,
    );
    let mut norm = Family::gauge(
        "slurm_share_shares_normalized",
        "Shares of the account or user as a fraction of its parent's (NormShares).",
        who,
    );
    let mut usage = Family::gauge(
        "slurm_share_usage_raw",
        "Decayed usage of the account or user in TRES-seconds (RawUsage).",
        who,
    );
    let mut usage_norm = Family::gauge(
        "slurm_share_usage_normalized",
        "Usage of the account or user as a fraction of the cluster's (NormUsage).",
        who,
    );
    let mut effective = Family::gauge(
        "slurm_share_usage_effective",
        "Effective usage of the account or user (EffectvUsage).",
        who,
    );
    let mut factor = Family::gauge(
        "slurm_share_fairshare_factor",
        "Fair-share factor of the account or user, 0 to 1 (FairShare).",
        who,
    );
    let mut level = Family::gauge(
        "slurm_share_fairshare_level",
        "Fair-share level of the account or user under Fair Tree (LevelFS; +Inf with no usage).",
        who,
    );
    for s in shares {
        let (account, user) = owner(s);
        let labels = [account, user, s.partition.as_deref().unwrap_or("")];
        raw.set_opt(&labels, s.shares.value().map(|v| v as f64));
        norm.set_opt(&labels, s.shares_normalized.value());
        usage.set(&labels, s.usage as f64);
        usage_norm.set_opt(&labels, s.usage_normalized.value());
        effective.set_opt(&labels, s.effective_usage.value());
        factor.set_opt(&labels, s.fairshare_factor.value());
        level.set_opt(&labels, s.fairshare_level.value().map(infinite_sentinel));
    }
    vec![raw, norm, usage, usage_norm, effective, factor, level]
}
