//! Accounting: slurmdbd's StatefulSet, Service and `slurmdbd.conf` Secret `N-accounting`
//! (nothing for an external slurmdbd).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;

use super::adopt::{self, Held};
use super::apply::apply;
use super::conditions;
use super::{Context, Error, secrets};
use crate::crd::Accounting;
use crate::render;

/// Watches Accountings in the context's scope, their children and the Secrets they read.
pub async fn run(ctx: Arc<Context>) {
    let cache = &ctx.cache;
    let store = cache.accountings.store();
    let runner = Runner::for_stream(cache.accountings.subscribe(), store.clone())
        .owns_stream(cache.stateful_sets.subscribe())
        .owns_stream(cache.services.subscribe())
        .owns_stream(cache.secrets.subscribe())
        .watches_stream(cache.secrets.subscribe(), move |s| {
            store
                .state()
                .iter()
                .filter(|a| {
                    a.namespace() == s.namespace() && secret_names(a).contains(&s.name_any())
                })
                .map(|a| ObjectRef::from_obj(&**a))
                .collect::<Vec<_>>()
        });
    super::run("accounting", runner, ctx, reconcile).await;
}

fn secret_names(a: &Accounting) -> Vec<String> {
    [
        a.spec.slurm_key_ref.as_ref(),
        a.spec.jwt_key_ref(),
        Some(&a.spec.storage_config.password_key_ref),
    ]
    .into_iter()
    .flatten()
    .map(|s| s.name.clone())
    .collect()
}

async fn reconcile(acct: Arc<Accounting>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = sync(&acct, &ctx).await;
    let wanted = adopt::conditions(&ctx, &*acct, result.as_deref()).await;
    conditions::set(&ctx, &*acct, &wanted).await?;
    result.map(|_| Action::requeue(Duration::from_secs(600)))
}

/// The workloads another operator made that were left as they are (see [`adopt`]).
async fn sync(acct: &Accounting, ctx: &Context) -> Result<Vec<Held>, Error> {
    if acct.spec.external {
        return Ok(Vec::new());
    }
    let ns = acct.namespace().ok_or(Error::Unnamed)?;
    let password = secrets::key(
        ctx,
        &ns,
        &acct.spec.storage_config.password_key_ref,
        "spec.storageConfig.passwordKeyRef",
    )
    .await?;
    let mut key_secrets = Vec::new();
    for (selector, field) in [
        (acct.spec.slurm_key_ref.as_ref(), "spec.slurmKeyRef"),
        (acct.spec.jwt_key_ref(), "spec.jwtKeyRef"),
    ] {
        let selector = selector.ok_or_else(|| {
            Error::InvalidSpec(format!("{field} is required unless spec.external"))
        })?;
        secrets::key(ctx, &ns, selector, field).await?;
        key_secrets.push(secrets::secret(ctx, &ns, &selector.name, field).await?);
    }
    let children = render::accounting::render(acct, &password, &key_secrets)?;
    apply(ctx, children.secret).await?;
    apply(ctx, children.service).await?;
    Ok(adopt::apply_workload(ctx, acct, children.stateful_set)
        .await?
        .into_iter()
        .collect())
}
