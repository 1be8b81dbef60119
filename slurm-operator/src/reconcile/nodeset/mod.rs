//! NodeSet: worker pods created directly (`N-<ordinal>`), drained in Slurm before they are
//! deleted, cordon sync, `SlurmNodeState*` pod conditions and status counters — decided by
//! [`crate::nodeset::plan`] and applied by [`act`]. Woken by the NodeSet, its pods, the
//! Kubernetes nodes (cordon), its Controller, and the cluster's Slurm node changes.

mod act;
mod observe;
mod triggers;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::conditions::{self, Wanted};
use super::restapi::controller_of;
use super::{Context, Error, Scope, cluster};
use crate::crd::NodeSet;
use crate::nodeset::{PlanInput, SlurmView, plan};
use crate::render;
use crate::slurm::{ClusterKey, NodeView};

pub use triggers::SlurmChanges;

/// Watches NodeSets in `scope` with their pods, the nodes under them, their Controllers and
/// the Slurm node changes of their clusters.
pub async fn run(
    scope: Scope,
    ctx: Arc<Context>,
    changes: tokio::sync::broadcast::Receiver<ClusterKey>,
) {
    let runner = Runner::new(
        scope.api::<NodeSet>(&ctx.client),
        watcher::Config::default(),
    );
    let runner = triggers::wire(runner, &scope, &ctx, changes);
    super::run("nodeset", runner, ctx, reconcile).await;
}

async fn reconcile(nodeset: Arc<NodeSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    if nodeset.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if nodeset.spec.is_daemonset() {
        let e = Error::InvalidSpec(
            "spec.scalingMode DaemonSet is not supported yet; use StatefulSet".into(),
        );
        conditions::set(&ctx, &*nodeset, &[Wanted::synced(Err(&e))]).await?;
        return Err(e);
    }
    let result = sync(&nodeset, &ctx).await;
    conditions::set(
        &ctx,
        &*nodeset,
        &[Wanted::synced(result.as_ref().map(|_| ()))],
    )
    .await?;
    result
}

async fn sync(nodeset: &NodeSet, ctx: &Context) -> Result<Action, Error> {
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let name = nodeset.name_any();
    let controller = controller_of(ctx, &ns, &nodeset.spec.controller_ref.name).await?;

    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = render::labels::selector_string(&render::labels::selector_labels(
        render::labels::Component::Worker,
        &name,
    ));
    let uid = nodeset.uid().unwrap_or_default();
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let nodes = kube_nodes(ctx, &pods).await?;

    let slurm_client = cluster::client(ctx, &controller).await;
    let node_view = match &slurm_client {
        Ok(Some(_)) => ctx.slurm.nodes(&cluster::key(&controller)),
        Ok(None) => NodeView::Unknown,
        Err(e) => NodeView::Unavailable(e.to_string()),
    };
    let slurm = match (&slurm_client, &node_view) {
        (Ok(None), _) => SlurmView::NotConfigured,
        (Ok(Some(_)), NodeView::Known(nodes)) => SlurmView::Nodes(nodes),
        _ => SlurmView::Unavailable,
    };

    let revision = render::nodeset_pod::revision_hash(&nodeset.spec);
    let view = observe::nodeset_view(nodeset, &revision);
    let pod_views: Vec<_> = pods
        .iter()
        .map(|p| observe::pod_view(&name, p, &nodes))
        .collect();
    let plan = plan(&PlanInput {
        nodeset: &view,
        pods: &pod_views,
        slurm,
        deadlines: None,
        now: jiff::Timestamp::now(),
    });
    act::apply_plan(
        ctx,
        act::Target {
            nodeset,
            controller: &controller,
            revision: &revision,
            pods: &pods,
            slurm: slurm_client.as_ref().ok().and_then(|c| c.as_ref()),
        },
        &plan,
    )
    .await?;
    // Everything Kubernetes-only was done; report why Slurm actions were held back.
    slurm_client?;
    if let NodeView::Unavailable(why) = &node_view {
        return Err(Error::InvalidReference(format!(
            "cannot read the Slurm nodes of cluster {}: {why}; no worker pod is deleted until this recovers",
            controller.name_any()
        )));
    }
    Ok(Action::requeue(plan.requeue_after))
}

async fn kube_nodes(ctx: &Context, pods: &[Pod]) -> Result<HashMap<String, Node>, Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut nodes = HashMap::new();
    for name in pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
    {
        if nodes.contains_key(&name) {
            continue;
        }
        if let Some(node) = api.get_opt(&name).await? {
            nodes.insert(name, node);
        }
    }
    Ok(nodes)
}
