//! Controller: the slurmctld StatefulSet, its Service and the cluster's `N-config` ConfigMap
//! (slurm.conf lists every NodeSet of the cluster, so NodeSets, the Accounting, the key Secrets
//! and the mounted ConfigMaps all wake this reconciler).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::ListParams;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::apply::apply;
use super::conditions::{self, Wanted};
use super::{Context, Error, Scope, refs, secrets};
use crate::crd::{Accounting, Controller, NodeSet};
use crate::render;

/// Watches Controllers in `scope`, their children, and what they refer to.
pub async fn run(scope: Scope, ctx: Arc<Context>) {
    let wc = watcher::Config::default;
    let runner = Runner::new(scope.api::<Controller>(&ctx.client), wc());
    let store = runner.store();
    let (secret_store, cm_store) = (store.clone(), store.clone());
    let acct_store = store.clone();
    let runner = runner
        .owns(scope.api::<StatefulSet>(&ctx.client), wc())
        .owns(scope.api::<Service>(&ctx.client), wc())
        .owns(scope.api::<ConfigMap>(&ctx.client), wc())
        .watches(scope.api::<NodeSet>(&ctx.client), wc(), |ns| {
            refs::nodeset_controller(&ns)
        })
        .watches(scope.api::<Accounting>(&ctx.client), wc(), move |acct| {
            acct_store
                .state()
                .iter()
                .filter(|c| {
                    c.namespace() == acct.namespace()
                        && c.spec.accounting_ref.as_ref().map(|r| &r.name) == Some(&acct.name_any())
                })
                .map(|c| ObjectRef::from_obj(&**c))
                .collect::<Vec<_>>()
        })
        .watches(scope.api::<Secret>(&ctx.client), wc(), move |s| {
            refs::controllers_reading_secret(&secret_store, &s)
        })
        .watches(scope.api::<ConfigMap>(&ctx.client), wc(), move |cm| {
            refs::controllers_mounting(&cm_store, &cm)
        });
    super::run("controller", runner, ctx, reconcile).await;
}

async fn reconcile(controller: Arc<Controller>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = sync(&controller, &ctx).await;
    conditions::set(
        &ctx,
        &*controller,
        &[Wanted::synced(result.as_ref().map(|_| ()))],
    )
    .await?;
    result.map(|()| Action::requeue(Duration::from_secs(600)))
}

/// What a Controller's children are made from, fetched from the API server.
pub struct Fetched {
    /// The NodeSets that name this Controller, sorted by name.
    pub nodesets: Vec<NodeSet>,
    /// The Accounting of `spec.accountingRef`.
    pub accounting: Option<Accounting>,
    /// The ConfigMaps the Controller mounts.
    pub config_maps: Vec<ConfigMap>,
    /// The Secrets of `slurmKeyRef` and `jwtKeyRef`.
    pub secrets: Vec<Secret>,
}

/// Reads everything `controller` refers to; a missing reference is an error that names it
/// (the children then stay as they are: nothing is rendered from a guess).
pub async fn fetch(ctx: &Context, controller: &Controller) -> Result<Fetched, Error> {
    let ns = controller.namespace().ok_or(Error::Unnamed)?;
    let name = controller.name_any();
    let nodesets: Api<NodeSet> = Api::namespaced(ctx.client.clone(), &ns);
    let mut nodesets: Vec<NodeSet> = nodesets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|n| n.spec.controller_ref.name == name && n.metadata.deletion_timestamp.is_none())
        .collect();
    nodesets.sort_by_key(|n| n.name_any());
    let accounting = match &controller.spec.accounting_ref {
        Some(r) if !r.name.is_empty() => {
            let api: Api<Accounting> = Api::namespaced(ctx.client.clone(), &ns);
            Some(
                api.get_opt(&r.name)
                    .await?
                    .ok_or_else(|| Error::MissingReference {
                        kind: "Accounting",
                        namespace: ns.clone(),
                        name: r.name.clone(),
                        field: "spec.accountingRef",
                    })?,
            )
        }
        _ => None,
    };
    let mut config_maps = Vec::new();
    for cm in refs::controller_config_maps(controller) {
        config_maps.push(secrets::config_map(ctx, &ns, cm, "spec.configFileRefs").await?);
    }
    let mut fetched_secrets = Vec::new();
    if !controller.spec.external {
        let slurm_key = controller.spec.slurm_key_ref.as_ref().ok_or_else(|| {
            Error::InvalidSpec("spec.slurmKeyRef is required unless spec.external".into())
        })?;
        let jwt_key = controller.spec.jwt_key_ref().ok_or_else(|| {
            Error::InvalidSpec("spec.jwtKeyRef is required unless spec.external".into())
        })?;
        secrets::key(ctx, &ns, slurm_key, "spec.slurmKeyRef").await?;
        secrets::key(ctx, &ns, jwt_key, "spec.jwtKeyRef").await?;
        fetched_secrets.push(secrets::secret(ctx, &ns, &slurm_key.name, "spec.slurmKeyRef").await?);
        fetched_secrets.push(secrets::secret(ctx, &ns, &jwt_key.name, "spec.jwtKeyRef").await?);
    }
    Ok(Fetched {
        nodesets,
        accounting,
        config_maps,
        secrets: fetched_secrets,
    })
}

async fn sync(controller: &Controller, ctx: &Context) -> Result<(), Error> {
    let fetched = fetch(ctx, controller).await?;
    let children = render::controller::render(
        controller,
        &render::controller::ControllerInputs {
            nodesets: &fetched.nodesets,
            accounting: fetched.accounting.as_ref(),
            config_maps: &fetched.config_maps,
            secrets: &fetched.secrets,
        },
    )?;
    for obj in children.config_maps {
        apply(&ctx.client, obj).await?;
    }
    for obj in children.services {
        apply(&ctx.client, obj).await?;
    }
    for obj in children.stateful_sets {
        apply(&ctx.client, obj).await?;
    }
    Ok(())
}
