//! Controller: the slurmctld StatefulSet, its Service, the cluster's `N-config` ConfigMap and
//! the ServiceMonitor of slurmctld's metrics ([`super::service_monitor`]). slurm.conf lists
//! every NodeSet of the cluster, so NodeSets, the Accounting, the key Secrets and the mounted
//! ConfigMaps all wake this reconciler.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;

use super::adopt::{self, Held};
use super::apply::apply;
use super::conditions;
use super::{Context, Error, refs, secrets};
use crate::crd::{Accounting, Controller, NodeSet};
use crate::render;

/// Watches Controllers in the context's scope, their children, and what they refer to.
pub async fn run(ctx: Arc<Context>) {
    let c = &ctx.cache;
    let store = c.controllers.store();
    let (secret_store, cm_store) = (store.clone(), store.clone());
    let acct_store = store.clone();
    let runner = Runner::for_stream(c.controllers.subscribe(), store)
        .owns_stream(c.stateful_sets.subscribe())
        .owns_stream(c.services.subscribe())
        .owns_stream(c.config_maps.subscribe())
        .watches_stream(c.nodesets.subscribe(), |ns| refs::nodeset_controller(&ns))
        .watches_stream(c.accountings.subscribe(), move |acct| {
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
        .watches_stream(c.secrets.subscribe(), move |s| {
            refs::controllers_reading_secret(&secret_store, &s)
        })
        .watches_stream(c.config_maps.subscribe(), move |cm| {
            refs::controllers_mounting(&cm_store, &cm)
        });
    super::run("controller", runner, ctx, reconcile).await;
}

async fn reconcile(controller: Arc<Controller>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = sync(&controller, &ctx).await;
    let wanted = adopt::conditions(&ctx, &*controller, result.as_deref()).await;
    conditions::set(&ctx, &*controller, &wanted).await?;
    result.map(|_| Action::requeue(Duration::from_secs(600)))
}

/// What a Controller's children are made from, read from the cache.
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

/// The NodeSets of the cluster of `controller` (not being deleted), sorted by name.
pub fn nodesets_of(ctx: &Context, controller: &Controller) -> Vec<NodeSet> {
    let name = controller.name_any();
    let mut nodesets: Vec<NodeSet> = ctx
        .cache
        .nodesets
        .list(&controller.namespace().unwrap_or_default(), |n| {
            n.spec.controller_ref.name == name && n.metadata.deletion_timestamp.is_none()
        })
        .iter()
        .map(|n| (**n).clone())
        .collect();
    nodesets.sort_by_key(|n| n.name_any());
    nodesets
}

/// Reads everything `controller` refers to; a missing reference is an error that names it
/// (the children then stay as they are: nothing is rendered from a guess).
pub async fn fetch(ctx: &Context, controller: &Controller) -> Result<Fetched, Error> {
    let ns = controller.namespace().ok_or(Error::Unnamed)?;
    let nodesets = nodesets_of(ctx, controller);
    let accounting = match &controller.spec.accounting_ref {
        Some(r) if !r.name.is_empty() => Some(
            ctx.cache
                .accountings
                .get(&ns, &r.name)
                .map(|a| (*a).clone())
                .ok_or_else(|| Error::MissingReference {
                    kind: "Accounting",
                    namespace: ns.clone(),
                    name: r.name.clone(),
                    field: "spec.accountingRef",
                })?,
        ),
        _ => None,
    };
    let mut config_maps = Vec::new();
    for cm in refs::controller_config_maps(controller) {
        config_maps.push(secrets::config_map(ctx, &ns, cm, "spec.configFileRefs")?);
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

/// The workloads another operator made that were left as they are (see [`adopt`]).
async fn sync(controller: &Controller, ctx: &Context) -> Result<Vec<Held>, Error> {
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
        apply(ctx, obj).await?;
    }
    for obj in children.services {
        apply(ctx, obj).await?;
    }
    let mut held = Vec::new();
    for obj in children.stateful_sets {
        held.extend(adopt::apply_workload(ctx, controller, obj).await?);
    }
    // Last: a ServiceMonitor that cannot be made leaves the cluster itself running.
    super::service_monitor::sync(ctx, controller).await?;
    Ok(held)
}
