//! Licenses: tokens configured, used, free and reserved.

use slurm_client::License;

use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The license source.
pub struct Licenses;

impl Source for Licenses {
    fn kind(&self) -> SourceKind {
        SourceKind::Licenses
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let list = ctx.call(ctx.client.licenses()).await?.into_value();
            Ok(Collected::Families(families(&list)))
        })
    }
}

/// The license families.
pub fn families(licenses: &[License]) -> Vec<Family> {
    let l = &["license"];
    let mut total = Family::gauge("slurm_license_tokens", "License tokens configured.", l);
    let mut used = Family::gauge(
        "slurm_license_tokens_used",
        "License tokens in use by jobs.",
        l,
    );
    let mut free = Family::gauge("slurm_license_tokens_free", "License tokens free.", l);
    let mut reserved = Family::gauge(
        "slurm_license_tokens_reserved",
        "License tokens held by reservations.",
        l,
    );
    for lic in licenses {
        let name = [lic.name.as_str()];
        total.set(&name, lic.total as f64);
        used.set(&name, lic.used as f64);
        free.set(&name, lic.free as f64);
        reserved.set(&name, lic.reserved as f64);
    }
    vec![total, used, free, reserved]
}
