//! NodeSet: worker pods created directly (`N-<ordinal>`, or one per eligible Kubernetes node
//! in DaemonSet mode), drained in Slurm before they are deleted, cordon sync,
//! `SlurmNodeState*` pod conditions and status counters — decided by
//! [`crate::planner::plan`] (DaemonSet mode: [`crate::planner::daemon`]) and applied by
//! [`act`]. Woken by the NodeSet, its pods, the
//! Kubernetes nodes (cordon), its Controller, and the cluster's Slurm node changes and job
//! deadline changes (`pod-deadline`, from the running jobs' time limits).
//!
//! A pass plans from the cache first; only when that plan would change something are the pods
//! listed directly and the pass planned again from the listing, which holds the operator's own
//! creates and deletes of a moment ago (a pod is never created, drained or deleted, nor the
//! status written, from the cache alone). At rest a pass sends no request, and with nothing
//! pending it comes back every [`crate::planner::RESYNC`].

mod act;
mod adopt;
mod claims;
mod history;
mod observe;
mod reservation;
mod triggers;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::conditions::{self, Wanted};
use super::restapi::controller_of;
use super::{Context, Error, cluster};
use crate::crd::nodeset::PruneSlurmNodeRecords;
use crate::crd::{Controller, NodeSet};
use crate::planner::{
    DaemonInput, Plan, PlanInput, PodView, SlurmView, daemon_plan, plan_scheduled,
};
use crate::render;
use crate::slurm::{ClusterKey, NodeView};

pub use triggers::SlurmChanges;

/// Watches NodeSets in the context's scope with their pods, the nodes under them, their
/// Controllers and the Slurm node changes of their clusters.
pub async fn run(ctx: Arc<Context>, changes: tokio::sync::broadcast::Receiver<ClusterKey>) {
    let runner = triggers::wire(&ctx, changes);
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
    let slurm = match controller_of(ctx, &ns, &nodeset.spec.controller_ref.name) {
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
    let controller = controller_of(ctx, &ns, &nodeset.spec.controller_ref.name)?;
    let daemonset = nodeset.spec.is_daemonset();

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
    let slurm_nodes = match slurm {
        SlurmView::Nodes(nodes) => Some(nodes),
        _ => None,
    };

    let pods = cached_pods(ctx, nodeset);
    let hash = render::nodeset_pod::revision_hash(&nodeset.spec);
    let adoption = adopt::revisions(ctx, nodeset, &pods, &hash).await?;
    let revision = adoption.update_revision;
    let hold_updates = adoption.held.is_some();
    wanted.extend(super::adopt::announce(ctx, nodeset, adoption.held).await);
    let slurm_topology = match &slurm_client {
        Ok(Some(c)) if configures_topology(ctx, &controller) => c
            .version()
            .await
            .is_ok_and(|v| v >= slurm_client::ApiVersion::V0_0_43),
        _ => false,
    };
    // ScheduledUpdate's reservation; a lookup failure replaces nothing (fail closed).
    let reserved = {
        let nodes = kube_nodes(ctx, &pods, daemonset);
        let views = pod_views(ctx, nodeset, &pods, &nodes);
        let slurm = slurm_client.as_ref().ok().and_then(|c| c.as_ref());
        reservation::sync(ctx, nodeset, slurm, &views, slurm_nodes).await
    };
    // Another operator's pods wait for the user: no maintenance window replaces them either.
    let replace_under = reserved.replace_under.as_deref().filter(|_| !hold_updates);
    wanted.extend(reserved.condition.clone());
    let observed = Observed {
        nodeset,
        controller: &controller,
        revision: &revision,
        slurm,
        deadlines: deadlines.as_deref(),
        reservation: replace_under,
        hold_updates,
        slurm_topology,
    };
    let mut plan = observed.plan(ctx, &pods)?;
    // The cache says whether there is anything to do; what is done is planned from a direct
    // listing, which holds the operator's own creates and deletes of a moment ago.
    let pods = if act::has_work(nodeset, &revision, &pods, &plan) {
        let fresh = listed_pods(ctx, nodeset).await?;
        plan = observed.plan(ctx, &fresh)?;
        fresh
    } else {
        pods
    };
    // Kept beside the pods, never in their way: a failure is reported after the plan ran.
    let history = history::sync(ctx, nodeset, &pods, &revision).await;
    act::apply_plan(
        ctx,
        act::Target {
            nodeset,
            controller: &controller,
            revision: &revision,
            pods: &pods,
            slurm: slurm_client.as_ref().ok().and_then(|c| c.as_ref()),
            seen: slurm_nodes,
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

/// What a plan is made from besides the pods.
struct Observed<'a> {
    nodeset: &'a NodeSet,
    controller: &'a Controller,
    revision: &'a str,
    slurm: SlurmView<'a>,
    deadlines: Option<&'a HashMap<String, jiff::Timestamp>>,
    reservation: Option<&'a str>,
    /// Updates wait as with `OnDelete` (see [`adopt`]).
    hold_updates: bool,
    /// The cluster's Slurm nodes have a topology to set (REST v0.0.43+).
    slurm_topology: bool,
}

impl Observed<'_> {
    /// The plan for `pods`, with the Kubernetes nodes from the cache.
    fn plan(&self, ctx: &Context, pods: &[Pod]) -> Result<Plan, Error> {
        let nodeset = self.nodeset;
        let daemonset = nodeset.spec.is_daemonset();
        let nodes = kube_nodes(ctx, pods, daemonset);
        let mut view = observe::nodeset_view(nodeset, self.revision);
        view.slurm_topology = self.slurm_topology;
        if self.hold_updates {
            view.update = crate::planner::UpdateStrategy::OnDelete;
        }
        let pod_views = pod_views(ctx, nodeset, pods, &nodes);
        let input = PlanInput {
            nodeset: &view,
            pods: &pod_views,
            slurm: self.slurm,
            deadlines: self.deadlines,
            now: jiff::Timestamp::now(),
        };
        if !daemonset {
            let mut plan = plan_scheduled(&input, self.reservation);
            if nodeset.spec.pin_to_node {
                let recorded = nodeset
                    .status
                    .as_ref()
                    .map(|s| s.ordinal_to_node.clone())
                    .unwrap_or_default();
                plan.ordinal_to_node = Some(crate::planner::pinning::ordinal_to_node(
                    &recorded,
                    &pod_views,
                    &self.placement(ctx)?,
                    |n| cached_node(ctx, n),
                ));
            }
            return Ok(plan);
        }
        // DaemonSet mode: every Kubernetes node against the template's constraints.
        let kube_nodes: Vec<_> = nodes.values().map(observe::kube_node).collect();
        let pod_nodes: HashMap<String, String> = pods
            .iter()
            .filter_map(|p| Some((p.name_any(), observe::pinned_node(p)?)))
            .collect();
        Ok(daemon_plan(&DaemonInput {
            plan: input,
            nodes: &kube_nodes,
            placement: &self.placement(ctx)?,
            pod_nodes: &pod_nodes,
            reservation: self.reservation,
            prune_node_records: nodeset.spec.prune_slurm_node_records
                == PruneSlurmNodeRecords::NodeNotFound,
        }))
    }

    /// The scheduling constraints of the NodeSet's pod template.
    fn placement(&self, ctx: &Context) -> Result<crate::planner::Placement, Error> {
        let template = render::nodeset_pod::pod(
            self.nodeset,
            self.controller,
            0,
            self.revision,
            &ctx.cluster_domain,
        )?;
        Ok(observe::placement(&template.spec.unwrap_or_default()))
    }
}

fn pod_views(
    ctx: &Context,
    nodeset: &NodeSet,
    pods: &[Pod],
    nodes: &HashMap<String, Node>,
) -> Vec<PodView> {
    let name = nodeset.name_any();
    let template_topology = nodeset
        .spec
        .template
        .metadata
        .annotations
        .get(crate::keys::ANNOTATION_TOPOLOGY_SPEC)
        .map(String::as_str);
    pods.iter()
        .map(|p| {
            observe::pod_view(
                &name,
                p,
                nodes,
                nodeset.spec.scaling_mode,
                &ctx.propagated_node_conditions,
                template_topology,
            )
        })
        .collect()
}

/// Whether `pod` is one of `nodeset`'s (its controller owner reference).
fn owned_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The NodeSet's pods as the cache has them (worker pods of its name, owned by it).
fn cached_pods(ctx: &Context, nodeset: &NodeSet) -> Vec<Pod> {
    let uid = nodeset.uid().unwrap_or_default();
    let labels =
        render::labels::selector_labels(render::labels::Component::Worker, &nodeset.name_any());
    ctx.cache
        .pods
        .list(&nodeset.namespace().unwrap_or_default(), |p| {
            labels.iter().all(|(k, v)| p.labels().get(k) == Some(v)) && owned_by(p, &uid)
        })
        .iter()
        .map(|p| (**p).clone())
        .collect()
}

/// The NodeSet's pods, listed from the API server (direct: see [`sync`]).
async fn listed_pods(ctx: &Context, nodeset: &NodeSet) -> Result<Vec<Pod>, Error> {
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let uid = nodeset.uid().unwrap_or_default();
    let selector = render::labels::selector_string(&render::labels::selector_labels(
        render::labels::Component::Worker,
        &nodeset.name_any(),
    ));
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| owned_by(p, &uid))
        .collect())
}

/// Whether `controller` configures a network topology (its `extraConf`, or a topology file in
/// one of its `configFileRefs` ConfigMaps, from the cache).
fn configures_topology(ctx: &Context, controller: &Controller) -> bool {
    let ns = controller.namespace().unwrap_or_default();
    let maps: Vec<_> = controller
        .spec
        .config_file_refs
        .iter()
        .filter_map(|r| {
            ctx.cache
                .config_maps
                .store()
                .get(&ObjectRef::new(&r.name).within(&ns))
        })
        .collect();
    let files = maps
        .iter()
        .flat_map(|m| m.data.iter().flat_map(|d| d.keys()).map(String::as_str));
    crate::planner::node_sync::configures_topology(&controller.spec.extra_conf, files)
}

/// Kubernetes node `name` from the cache, as the planner sees nodes.
fn cached_node(ctx: &Context, name: &str) -> Option<crate::planner::KubeNode> {
    let node = ctx.cache.nodes.store().get(&ObjectRef::new(name))?;
    Some(observe::kube_node(&node))
}

/// The Kubernetes nodes under `pods`, or every node (`all`, DaemonSet mode), from the cache.
/// A node's change reaches the NodeSet through the watch that fills this store, and the
/// operator never writes nodes, so the store is as fresh as what woke the pass.
fn kube_nodes(ctx: &Context, pods: &[Pod], all: bool) -> HashMap<String, Node> {
    let store = &ctx.cache.nodes;
    if all {
        return store
            .store()
            .state()
            .into_iter()
            .map(|n| (n.name_any(), (*n).clone()))
            .collect();
    }
    pods.iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .filter_map(|name| {
            let node = store.store().get(&ObjectRef::new(&name))?;
            Some((name, (*node).clone()))
        })
        .collect()
}
