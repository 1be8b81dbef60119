//! RestApi: slurmrestd's Deployment and Service `N-restapi`, configured from its Controller.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::apply::apply;
use super::conditions::{self, Wanted};
use super::{Context, Error, Scope};
use crate::crd::{Controller, RestApi};
use crate::render;

/// Watches RestApis in `scope`, their children, and their Controllers.
pub async fn run(scope: Scope, ctx: Arc<Context>) {
    let wc = watcher::Config::default;
    let runner = Runner::new(scope.api::<RestApi>(&ctx.client), wc());
    let store = runner.store();
    let runner = runner
        .owns(scope.api::<Deployment>(&ctx.client), wc())
        .owns(scope.api::<Service>(&ctx.client), wc())
        .watches(scope.api::<Controller>(&ctx.client), wc(), move |c| {
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
    conditions::set(
        &ctx,
        &*restapi,
        &[Wanted::synced(result.as_ref().map(|_| ()))],
    )
    .await?;
    result.map(|()| Action::requeue(Duration::from_secs(600)))
}

/// The Controller named by `controllerRef` of an object in `namespace`.
pub async fn controller_of(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Controller, Error> {
    if name.is_empty() {
        return Err(Error::InvalidSpec(
            "spec.controllerRef.name is empty".into(),
        ));
    }
    let api: Api<Controller> = Api::namespaced(ctx.client.clone(), namespace);
    api.get_opt(name)
        .await?
        .ok_or_else(|| Error::MissingReference {
            kind: "Controller",
            namespace: namespace.into(),
            name: name.into(),
            field: "spec.controllerRef",
        })
}

async fn sync(restapi: &RestApi, ctx: &Context) -> Result<(), Error> {
    let ns = restapi.namespace().ok_or(Error::Unnamed)?;
    let controller = controller_of(ctx, &ns, &restapi.spec.controller_ref.name).await?;
    let (deployment, service) = render::restapi::render(restapi, &controller)?;
    apply(&ctx.client, service).await?;
    apply(&ctx.client, deployment).await?;
    Ok(())
}
