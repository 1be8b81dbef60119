//! RestApi: slurmrestd's Deployment and Service `N-restapi`, configured from its Controller.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;

use super::adopt::{self, Held};
use super::apply::apply;
use super::conditions;
use super::{Context, Error};
use crate::crd::{Controller, RestApi};
use crate::render;

/// Watches RestApis in the context's scope, their children, and their Controllers.
pub async fn run(ctx: Arc<Context>) {
    let cache = &ctx.cache;
    let store = cache.restapis.store();
    let runner = Runner::for_stream(cache.restapis.subscribe(), store.clone())
        .owns_stream(cache.deployments.subscribe())
        .owns_stream(cache.services.subscribe())
        .watches_stream(cache.controllers.subscribe(), move |c| {
            store
                .state()
                .iter()
                .filter(|r| {
                    r.namespace() == c.namespace() && r.spec.controller_ref.name == c.name_any()
                })
                .map(|r| ObjectRef::from_obj(&**r))
                .collect::<Vec<_>>()
        });
    super::run("restapi", runner, ctx, reconcile).await;
}

async fn reconcile(restapi: Arc<RestApi>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = sync(&restapi, &ctx).await;
    let wanted = adopt::conditions(&ctx, &*restapi, result.as_deref()).await;
    conditions::set(&ctx, &*restapi, &wanted).await?;
    result.map(|_| Action::requeue(Duration::from_secs(600)))
}

/// The Controller named by `controllerRef` of an object in `namespace`, from the cache.
pub fn controller_of(ctx: &Context, namespace: &str, name: &str) -> Result<Controller, Error> {
    if name.is_empty() {
        return Err(Error::InvalidSpec(
            "spec.controllerRef.name is empty".into(),
        ));
    }
    ctx.cache
        .controllers
        .get(namespace, name)
        .map(|c| (*c).clone())
        .ok_or_else(|| Error::MissingReference {
            kind: "Controller",
            namespace: namespace.into(),
            name: name.into(),
            field: "spec.controllerRef",
        })
}

/// The workloads another operator made that were left as they are (see [`adopt`]).
async fn sync(restapi: &RestApi, ctx: &Context) -> Result<Vec<Held>, Error> {
    let ns = restapi.namespace().ok_or(Error::Unnamed)?;
    let controller = controller_of(ctx, &ns, &restapi.spec.controller_ref.name)?;
    let (deployment, service) = render::restapi::render(restapi, &controller)?;
    apply(ctx, service).await?;
    Ok(adopt::apply_workload(ctx, restapi, deployment)
        .await?
        .into_iter()
        .collect())
}
