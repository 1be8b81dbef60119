//! NodeSet: worker pods created directly (`N-<ordinal>`, or one per eligible Kubernetes node
//! in DaemonSet mode), drained in Slurm before they are deleted, cordon sync,
//! `SlurmNodeState*` pod conditions and status counters — decided by
//! [`crate::planner::plan`] (DaemonSet mode: [`crate::planner::daemon`]) and applied by
//! [`act`]. Woken by the NodeSet, its pods, the
//! Kubernetes nodes (cordon), its Controller, and the cluster's Slurm node changes and job
//! deadline changes (`pod-deadline`, from the running jobs' time limits).

mod act;
mod history;
mod observe;
mod reservation;
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
use crate::crd::nodeset::PruneSlurmNodeRecords;
use crate::planner::{DaemonInput, PlanInput, SlurmView, daemon_plan, plan_scheduled};
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
        finalize(&nodeset, &ctx).await?;
        return Ok(Action::await_change());
    }
    let mut wanted = Vec::new();
    let result = sync(&nodeset, &ctx, &mut wanted).await;
    wanted.insert(0, Wanted::synced(result.as_ref().map(|_| ())));
    conditions::set(&ctx, &*nodeset, &wanted).await?;
    result
}

/// A NodeSet being deleted: its ScheduledUpdate reservation goes first (see [`reservation`]).
async fn finalize(nodeset: &NodeSet, ctx: &Context) -> Result<(), Error> {
    if !nodeset
        .finalizers()
        .iter()
        .any(|f| f == crate::planner::scheduled::FINALIZER)
    {
        return Ok(());
    }
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let slurm = match controller_of(ctx, &ns, &nodeset.spec.controller_ref.name).await {
        Ok(controller) => match cluster::client(ctx, &controller).await {
            Ok(client) => client,
            // Its key Secret is gone (a namespace being deleted): no client can be made.
            Err(Error::MissingReference { .. }) => None,
            Err(e) => return Err(e),
        },
        // The Controller is gone: so is the cluster and its reservation.
        Err(Error::MissingReference { .. } | Error::InvalidSpec(_)) => None,
        Err(e) => return Err(e),
    };
    reservation::finalize(ctx, nodeset, slurm.as_ref()).await
}

/// `wanted` receives conditions to set besides `Synced`.
async fn sync(nodeset: &NodeSet, ctx: &Context, wanted: &mut Vec<Wanted>) -> Result<Action, Error> {
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
    let daemonset = nodeset.spec.is_daemonset();
    let nodes = kube_nodes(ctx, &pods, daemonset).await?;

    let slurm_client = cluster::client(ctx, &controller).await;
    let node_view = match &slurm_client {
        Ok(Some(_)) => ctx.slurm.nodes(&cluster::key(&controller)),
        Ok(None) => NodeView::Unknown,
        Err(e) => NodeView::Unavailable(e.to_string()),
    };
    // Running jobs' time-limit ends per Slurm node (`pod-deadline`); unknown ⇒ left as is.
    let deadlines = match &slurm_client {
        Ok(Some(_)) => ctx.slurm.deadlines(&cluster::key(&controller)),
        _ => None,
    };
    let slurm = match (&slurm_client, &node_view) {
        (Ok(None), _) => SlurmView::NotConfigured,
        (Ok(Some(_)), NodeView::Known(nodes)) => SlurmView::Nodes(nodes),
        _ => SlurmView::Unavailable,
    };

    let revision = render::nodeset_pod::revision_hash(&nodeset.spec);
    // Kept beside the pods, never in their way: a failure is reported after the plan ran.
    let history = history::sync(ctx, nodeset, &pods, &revision).await;
    let view = observe::nodeset_view(nodeset, &revision);
    let pod_views: Vec<_> = pods
        .iter()
        .map(|p| {
            observe::pod_view(
                &name,
                p,
                &nodes,
                nodeset.spec.scaling_mode,
                &ctx.propagated_node_conditions,
            )
        })
        .collect();
    // ScheduledUpdate's reservation; a lookup failure replaces nothing (fail closed).
    let reserved = reservation::sync(
        ctx,
        nodeset,
        slurm_client.as_ref().ok().and_then(|c| c.as_ref()),
        &pod_views,
        match slurm {
            SlurmView::Nodes(nodes) => Some(nodes),
            _ => None,
        },
    )
    .await;
    wanted.extend(reserved.condition);
    let input = PlanInput {
        nodeset: &view,
        pods: &pod_views,
        slurm,
        deadlines: deadlines.as_deref(),
        now: jiff::Timestamp::now(),
    };
    let plan = if daemonset {
        // DaemonSet mode: every Kubernetes node against the template's constraints.
        let template =
            render::nodeset_pod::pod(nodeset, &controller, 0, &revision, &ctx.cluster_domain)?;
        let kube_nodes: Vec<_> = nodes.values().map(observe::kube_node).collect();
        let pod_nodes: HashMap<String, String> = pods
            .iter()
            .filter_map(|p| Some((p.name_any(), observe::pinned_node(p)?)))
            .collect();
        daemon_plan(&DaemonInput {
            plan: input,
            nodes: &kube_nodes,
            placement: &observe::placement(&template.spec.unwrap_or_default()),
            pod_nodes: &pod_nodes,
            reservation: reserved.replace_under.as_deref(),
            prune_node_records: nodeset.spec.prune_slurm_node_records
                == PruneSlurmNodeRecords::NodeNotFound,
        })
    } else {
        plan_scheduled(&input, reserved.replace_under.as_deref())
    };
    act::apply_plan(
        ctx,
        act::Target {
            nodeset,
            controller: &controller,
            revision: &revision,
            pods: &pods,
            slurm: slurm_client.as_ref().ok().and_then(|c| c.as_ref()),
            seen: match slurm {
                SlurmView::Nodes(nodes) => Some(nodes),
                _ => None,
            },
        },
        &plan,
    )
    .await?;
    history?;
    // Everything Kubernetes-only was done; report why Slurm actions were held back.
    slurm_client?;
    if let Some(e) = reserved.error {
        return Err(e);
    }
    if let NodeView::Unavailable(why) = &node_view {
        return Err(Error::InvalidReference(format!(
            "cannot read the Slurm nodes of cluster {}: {why}; no worker pod is deleted until this recovers",
            controller.name_any()
        )));
    }
    Ok(Action::requeue(plan.requeue_after))
}

/// The Kubernetes nodes under `pods`, or every node (`all`, DaemonSet mode).
async fn kube_nodes(
    ctx: &Context,
    pods: &[Pod],
    all: bool,
) -> Result<HashMap<String, Node>, Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    if all {
        let nodes = api.list(&ListParams::default()).await?.items;
        return Ok(nodes.into_iter().map(|n| (n.name_any(), n)).collect());
    }
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
