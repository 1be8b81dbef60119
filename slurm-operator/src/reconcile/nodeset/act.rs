//! Applies a NodeSet [`Plan`]: the cluster's worker Service and PDB, the NodeSet's
//! `N-ssh-config` (with `ssh.enabled`), pod annotations, Slurm
//! drains and undrains, defunct Slurm node records, Slurm node comments, pod creates and
//! deletes, labels, pod conditions and status — in that order, each write only when something
//! changes.
//!
//! A delete is checked once more against a fresh read of the Slurm node right before it is
//! sent: the plan may be a few seconds old, and a pod is never deleted while its node runs jobs.
//! A drain or undrain is sent only while the node is still as the plan saw it (state, flags,
//! reason): the tracker's view lags the operator's own writes by up to one poll, and a decision
//! made on a stale view (say, a pod cordoned by the operator a moment ago read as an
//! administrator's cordon) must not reach Slurm. A skipped write is decided anew once the
//! tracker has seen the change, which wakes the NodeSet.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;
use slurm_client::model::{Node, NodeStateChange, NodeUpdate};

use super::super::apply::{FIELD_MANAGER, apply};
use super::super::{Context, Error};
use super::claims;
use crate::crd::{Controller, NodeSet};
use crate::planner::pod_info::{self, NodeComment};
use crate::planner::{CONDITION_PREFIX, DeleteReason, Plan, PodConditions};
use crate::render;

/// What the plan is applied to.
pub struct Target<'a> {
    pub nodeset: &'a NodeSet,
    pub controller: &'a Controller,
    pub revision: &'a str,
    pub pods: &'a [Pod],
    /// `None`: the cluster has no RestApi (Slurm actions are skipped).
    pub slurm: Option<&'a slurm_client::Client>,
    /// The Slurm nodes the plan was made from; `None` when they were not known.
    pub seen: Option<&'a HashMap<String, Node>>,
}

pub(super) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// Whether `plan` would change anything beyond the Slurm-independent cluster objects and the
/// history (which check the cache themselves): a pod or Slurm action, a pod condition or the
/// NodeSet status. `pods` are those the plan was made from.
pub fn has_work(nodeset: &NodeSet, revision: &str, pods: &[Pod], plan: &Plan) -> bool {
    let acts = !(plan.create.is_empty()
        && plan.create_daemon.is_empty()
        && plan.delete.is_empty()
        && plan.annotations.is_empty()
        && plan.drain.is_empty()
        && plan.undrain.is_empty()
        && plan.protect.is_empty()
        && plan.comments.is_empty()
        && plan.node_syncs.is_empty()
        && plan.prune.is_empty());
    acts || status_patch(nodeset, revision, plan).is_some()
        || plan.conditions.iter().any(|c| {
            pods.iter()
                .find(|p| p.name_any() == c.pod)
                .is_some_and(|p| conditions_patch(p, c).is_some())
        })
}

/// The largest batch of [`slow_start`].
const MAX_CREATE_BATCH: usize = 32;

/// Runs `create` for `items` in batches of 1, 2, 4, … up to [`MAX_CREATE_BATCH`] at once, each
/// batch after the last succeeded whole, as the ReplicaSet and StatefulSet controllers' slow
/// start: a NodeSet of thousands is created concurrently (one after another, 1,000 pods took a
/// minute), while a quota or webhook that rejects every pod costs one request, not thousands.
/// The first failure stops the rest, which the next pass creates.
async fn slow_start<'a, T, F, Fut>(items: &'a [T], create: F) -> Result<(), Error>
where
    F: Fn(&'a T) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let mut batch = 1;
    let mut rest = items;
    while !rest.is_empty() {
        let (now, later) = rest.split_at(batch.min(rest.len()));
        let results = futures::future::join_all(now.iter().map(&create)).await;
        if let Some(e) = results.into_iter().find_map(Result::err) {
            return Err(e);
        }
        rest = later;
        batch = (batch * 2).min(MAX_CREATE_BATCH);
    }
    Ok(())
}

/// Applies `plan`; the first error is returned after every independent step was tried.
pub async fn apply_plan(ctx: &Context, t: Target<'_>, plan: &Plan) -> Result<(), Error> {
    let ns = t.nodeset.namespace().ok_or(Error::Unnamed)?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let mut first_error: Option<Error> = None;
    let mut keep = |r: Result<(), Error>| {
        if let Err(e) = r {
            tracing::warn!(error = %e, "NodeSet step failed");
            first_error.get_or_insert(e);
        }
    };

    keep(cluster_objects(ctx, t.controller).await);
    keep(ssh_config(ctx, t.nodeset).await);

    for (pod, annotations) in annotations_by_pod(plan) {
        let patch = json!({ "metadata": { "annotations": annotations } });
        keep(unless_gone(
            pods.patch(pod, &patch_params(), &Patch::Merge(patch)).await,
        ));
    }

    if let Some(slurm) = t.slurm {
        for d in &plan.drain {
            match still_as_seen(ctx, slurm, t.seen, &d.node).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    keep(Err(e));
                    continue;
                }
            }
            let update = NodeUpdate::state(NodeStateChange::Drain, Some(&d.reason));
            let r = slurm.update_node(&d.node, &update).await;
            ctx.metrics.slurm_call("drain_node", &r);
            if r.is_ok() {
                ctx.event(
                    t.nodeset,
                    false,
                    "NodeDrain",
                    "Drain",
                    format!("drained Slurm node {}: {}", d.node, d.reason),
                )
                .await;
            }
            keep(r.map(drop).map_err(Error::from));
        }
        for u in &plan.undrain {
            match still_as_seen(ctx, slurm, t.seen, &u.node).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    keep(Err(e));
                    continue;
                }
            }
            let (state, operation) = if u.resume {
                (NodeStateChange::Resume, "resume_node")
            } else {
                (NodeStateChange::Undrain, "undrain_node")
            };
            let update = NodeUpdate::state(state, Some(&u.reason));
            let r = slurm.update_node(&u.node, &update).await;
            ctx.metrics.slurm_call(operation, &r);
            keep(r.map(drop).map_err(Error::from));
        }
        for name in &plan.prune {
            keep(prune_record(ctx, &t, slurm, name).await);
        }
        for c in &plan.comments {
            keep(write_comment(ctx, slurm, c).await);
        }
        for s in &plan.node_syncs {
            keep(sync_node(ctx, slurm, s).await);
        }
        for why in &plan.ignored {
            tracing::warn!(nodeset = %t.nodeset.name_any(), "{why}");
        }
    }

    if !plan.create.is_empty() {
        let names: Vec<&str> = plan.create.iter().map(|c| c.name.as_str()).collect();
        ctx.event(
            t.nodeset,
            false,
            "ScalingUp",
            "Create",
            format!("creating pods {}", names.join(", ")),
        )
        .await;
    }
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &ns);
    let (claims, pods_api) = (&claims, &pods);
    let target = &t;
    keep(
        slow_start(&plan.create, |c| async move {
            let mut first_error = None;
            for pvc in render::nodeset_pod::pvcs(target.nodeset, c.ordinal) {
                match claims.create(&PostParams::default(), &pvc).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        first_error.get_or_insert(Error::from(e));
                    }
                }
            }
            let mut pod = render::nodeset_pod::pod(
                target.nodeset,
                target.controller,
                c.ordinal,
                target.revision,
                &ctx.cluster_domain,
            )?;
            let pin = plan.ordinal_to_node.as_ref().and_then(|pins| {
                crate::planner::pinning::pin_of(pins, c.ordinal, |n| super::cached_node(ctx, n))
            });
            if let Some(pin) = pin {
                render::nodeset_pod::require_node(
                    pod.spec.get_or_insert_with(Default::default),
                    &pin.node,
                    pin.hostname_label.as_deref(),
                );
            }
            match pods_api.create(&PostParams::default(), &pod).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            first_error.map_or(Ok(()), Err)
        })
        .await,
    );

    // DaemonSet mode: one pod per node, its claims first (named after the hostname).
    if !plan.create_daemon.is_empty() {
        let nodes: Vec<&str> = plan.create_daemon.iter().map(|c| c.node.as_str()).collect();
        ctx.event(
            t.nodeset,
            false,
            "ScalingUp",
            "Create",
            format!("creating pods on nodes {}", nodes.join(", ")),
        )
        .await;
    }
    for c in &plan.create_daemon {
        for pvc in render::nodeset_pod::daemon_pvcs(t.nodeset, &c.hostname) {
            match claims.create(&PostParams::default(), &pvc).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => keep(Err(e.into())),
            }
        }
        let pod = render::nodeset_pod::daemon_pod(
            t.nodeset,
            t.controller,
            &c.node,
            c.hostname_override.as_deref(),
            t.revision,
            &ctx.cluster_domain,
        );
        keep(match pod {
            Ok(mut pod) => {
                render::nodeset_pod::require_node(
                    pod.spec.get_or_insert_with(Default::default),
                    &c.node,
                    c.hostname_label.as_deref(),
                );
                pods.create(&PostParams::default(), &pod)
                    .await
                    .map(drop)
                    .map_err(Error::from)
            }
            Err(e) => Err(e.into()),
        });
    }

    // Claims that go with a scale-in's pods name them first (the garbage collector deletes
    // them after the pods); a pod whose claims could not be set waits for the next pass.
    let (held, claims_error) = claims::sync(ctx, t.nodeset, t.pods, &claims::condemned(plan)).await;
    keep(claims_error.map_or(Ok(()), Err));
    for d in plan.delete.iter().filter(|d| !held.contains(&d.pod)) {
        keep(delete(ctx, &t, &pods, &d.pod, d.reason).await);
    }

    for p in &plan.protect {
        let value = p.protect.then_some("true");
        let patch = json!({ "metadata": { "labels": { crate::keys::LABEL_POD_PROTECT: value } } });
        keep(unless_gone(
            pods.patch(&p.pod, &patch_params(), &Patch::Merge(patch))
                .await,
        ));
    }

    for c in &plan.conditions {
        if let Some(pod) = t.pods.iter().find(|p| p.name_any() == c.pod) {
            keep(pod_conditions(&pods, pod, c).await);
        }
    }

    ctx.metrics
        .drains_in_progress
        .get_or_create(&crate::telemetry::metrics::ControllerLabel {
            controller: format!("{ns}/{}", t.nodeset.name_any()),
        })
        .set(plan.waiting_for_drain.len() as i64);
    keep(status(ctx, t.nodeset, t.revision, plan).await);
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Deletes a defunct Slurm node record, only while it is still the dead record the plan saw.
async fn prune_record(
    ctx: &Context,
    t: &Target<'_>,
    slurm: &slurm_client::Client,
    name: &str,
) -> Result<(), Error> {
    if !still_as_seen(ctx, slurm, t.seen, name).await? {
        return Ok(());
    }
    let r = slurm.delete_node(name).await;
    ctx.metrics.slurm_call("delete_node", &r);
    match r {
        Ok(_) => {
            ctx.event(
                t.nodeset,
                false,
                "DefunctSlurmNodePruned",
                "Delete",
                format!(
                    "deleted Slurm node {name}: down and not responding, its pod and Kubernetes node gone"
                ),
            )
            .await;
            Ok(())
        }
        Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sets a Slurm node's topology and `k8s/` features as its Kubernetes node asks (see
/// [`crate::planner::node_sync`]). Slurm checks a topology against its topology
/// configuration: one it refuses is an error that names the node.
async fn sync_node(
    ctx: &Context,
    slurm: &slurm_client::Client,
    s: &crate::planner::node_sync::NodeSync,
) -> Result<(), Error> {
    let mut update = NodeUpdate::new();
    if let Some(topology) = &s.topology {
        update = update.topology(topology.clone());
    }
    if let Some((available, active)) = &s.features {
        update = update
            .features(available.clone())
            .active_features(active.clone());
    }
    let r = slurm.update_node(&s.node, &update).await;
    ctx.metrics.slurm_call("sync_node", &r);
    match r {
        Ok(_) => {
            tracing::info!(node = %s.node, topology = ?s.topology, features = ?s.features, "Slurm node topology and features set from its Kubernetes node");
            Ok(())
        }
        Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                slurm_client::ErrorKind::Rejected | slurm_client::ErrorKind::BadRequest
            ) =>
        {
            Err(Error::InvalidReference(format!(
                "Slurm refused the topology or features of node {} that its Kubernetes node's annotations give ({:?}, {:?}): {e}",
                s.node, s.topology, s.features
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Sets a Slurm node's comment to its pod, unless a fresh read shows it already says so (the
/// plan's view lags the operator's own writes by a poll) or the node is gone.
async fn write_comment(
    ctx: &Context,
    slurm: &slurm_client::Client,
    c: &NodeComment,
) -> Result<(), Error> {
    let fresh = slurm.get_node(&c.node).await;
    ctx.metrics.slurm_call("get_node", &fresh);
    match fresh {
        Ok(n) if pod_info::says(n.value.comment.as_deref(), &c.comment) => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let update = NodeUpdate::new().comment(c.comment.clone());
    let r = slurm.update_node(&c.node, &update).await;
    ctx.metrics.slurm_call("comment_node", &r);
    match r {
        Ok(_) => {
            tracing::info!(node = %c.node, comment = %c.comment, "Slurm node comment set to its pod");
            Ok(())
        }
        // deleted since the listing: the next pass sees it gone
        Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether Slurm node `name` is still in the state, flags and reason the plan saw (a fresh
/// read). `false` when it changed since, or when the plan did not see it.
/// The plan's annotation changes as one merge patch body per pod (`null` removes), in the
/// order the pods first appear: a cordon and its mark land together or not at all.
fn annotations_by_pod(plan: &Plan) -> Vec<(&str, serde_json::Map<String, serde_json::Value>)> {
    let mut out: Vec<(&str, serde_json::Map<String, serde_json::Value>)> = Vec::new();
    for change in &plan.annotations {
        let value = change
            .value
            .clone()
            .map_or(serde_json::Value::Null, Into::into);
        match out.iter_mut().find(|(pod, _)| *pod == change.pod) {
            Some((_, map)) => {
                map.insert(change.key.to_owned(), value);
            }
            None => {
                let mut map = serde_json::Map::new();
                map.insert(change.key.to_owned(), value);
                out.push((&change.pod, map));
            }
        }
    }
    out
}

async fn still_as_seen(
    ctx: &Context,
    slurm: &slurm_client::Client,
    seen: Option<&HashMap<String, Node>>,
    name: &str,
) -> Result<bool, Error> {
    let Some(seen) = seen.and_then(|nodes| nodes.get(name)) else {
        return Ok(false);
    };
    let fresh = slurm.get_node(name).await;
    ctx.metrics.slurm_call("get_node", &fresh);
    let fresh = match fresh {
        Ok(n) => n.value,
        Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let same = fresh.state == seen.state
        && fresh.state_flags == seen.state_flags
        && fresh.reason.as_deref().unwrap_or_default()
            == seen.reason.as_deref().unwrap_or_default();
    if !same {
        tracing::debug!(
            node = name,
            "Slurm node changed since the plan was made; its drain or undrain waits for a fresh view"
        );
    }
    Ok(same)
}

/// The cluster's headless worker Service and PDB, owned by all of its NodeSets.
async fn cluster_objects(ctx: &Context, controller: &Controller) -> Result<(), Error> {
    let nodesets = crate::reconcile::controller::nodesets_of(ctx, controller);
    let (service, pdb) = render::workers::render(controller, &nodesets)?;
    apply(ctx, service).await?;
    apply(ctx, pdb).await?;
    Ok(())
}

/// With `ssh.enabled`, the `N-ssh-config` ConfigMap (`sshd_config`) the pods mount, as Slinky's
/// `SSHConfig` step makes it; the slurmd image starts sshd beside slurmd when it is mounted and
/// makes its host keys itself (Slinky's NodeSet has no host-key Secret). Like Slinky, turning
/// ssh off leaves the ConfigMap, which no pod mounts any more, until the NodeSet goes.
async fn ssh_config(ctx: &Context, nodeset: &NodeSet) -> Result<(), Error> {
    if !nodeset.spec.ssh.enabled {
        return Ok(());
    }
    apply(ctx, render::nodeset_pod::ssh_config_map(nodeset)?).await?;
    Ok(())
}

async fn delete(
    ctx: &Context,
    t: &Target<'_>,
    pods: &Api<Pod>,
    name: &str,
    reason: DeleteReason,
) -> Result<(), Error> {
    let Some(pod) = t.pods.iter().find(|p| p.name_any() == name) else {
        return Ok(());
    };
    let drain_needed = !matches!(reason, DeleteReason::Terminal | DeleteReason::NotRegistered);
    // "Not registered" comes from the tracker's view, which may predate the pod becoming
    // ready by a poll interval: confirmed against a fresh read as well.
    let check_fresh = drain_needed || reason == DeleteReason::NotRegistered;
    if let (true, Some(slurm)) = (check_fresh, t.slurm) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| name.to_owned());
        let fresh = slurm.get_node(&node).await;
        ctx.metrics.slurm_call("get_node", &fresh);
        match fresh {
            Ok(_) if reason == DeleteReason::NotRegistered => return Ok(()), // registered now
            Ok(n) if n.value.is_drained_idle() => {}
            Ok(_) => return Ok(()), // busy again or undrained: the next pass decides anew
            Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => {
            ctx.event(
                t.nodeset,
                false,
                "ScalingDown",
                "Delete",
                format!("deleted pod {name} ({reason:?})"),
            )
            .await;
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn pod_conditions(pods: &Api<Pod>, pod: &Pod, wanted: &PodConditions) -> Result<(), Error> {
    let Some(patch) = conditions_patch(pod, wanted) else {
        return Ok(());
    };
    unless_gone(
        pods.patch_status(&pod.name_any(), &patch_params(), &Patch::Strategic(patch))
            .await,
    )
}

/// A write to a pod deleted meanwhile has nothing left to do: its pass must not fail for it
/// (a scale-in's victims go while the pass that drained them still writes their conditions).
fn unless_gone<T>(result: kube::Result<T>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The strategic merge patch that gives `pod` the `wanted` Slurm conditions; `None` when it
/// has them.
fn conditions_patch(pod: &Pod, wanted: &PodConditions) -> Option<serde_json::Value> {
    let current: Vec<PodCondition> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let ours_now: BTreeMap<&str, &str> = current
        .iter()
        .filter(|c| c.type_.starts_with(CONDITION_PREFIX))
        .map(|c| (c.type_.as_str(), c.message.as_deref().unwrap_or("")))
        .collect();
    let ours_wanted: BTreeMap<&str, &str> = wanted
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.message.as_str()))
        .collect();
    if ours_now == ours_wanted {
        return None;
    }
    // A strategic merge patch keyed by condition type touches only our conditions: a merge patch
    // would replace the whole list from this (possibly stale) view and could turn the kubelet's
    // Ready back to False.
    let now = Time(jiff::Timestamp::now());
    let mut entries: Vec<serde_json::Value> = ours_now
        .keys()
        .filter(|t| !ours_wanted.contains_key(*t))
        .map(|t| json!({ "type": t, "$patch": "delete" }))
        .collect();
    for c in &wanted.conditions {
        if ours_now.get(c.type_.as_str()) != Some(&c.message.as_str()) {
            // Fields are merged into an existing entry: an empty message must be deleted (null).
            let message = (!c.message.is_empty()).then(|| c.message.clone());
            entries.push(json!({
                "type": c.type_,
                "status": "True",
                "message": message,
                "lastTransitionTime": now,
            }));
        }
    }
    Some(json!({ "status": { "conditions": entries } }))
}

async fn status(
    ctx: &Context,
    nodeset: &NodeSet,
    revision: &str,
    plan: &Plan,
) -> Result<(), Error> {
    let Some(body) = status_patch(nodeset, revision, plan) else {
        return Ok(());
    };
    let api: Api<NodeSet> =
        Api::namespaced(ctx.client.clone(), &nodeset.namespace().unwrap_or_default());
    api.patch_status(
        &nodeset.name_any(),
        &patch_params(),
        &Patch::Merge(json!({ "status": body })),
    )
    .await?;
    Ok(())
}

/// The NodeSet status the plan's counters make, as a merge patch body; `None` when the status
/// already says so.
fn status_patch(nodeset: &NodeSet, revision: &str, plan: &Plan) -> Option<serde_json::Value> {
    let c = &plan.status;
    let old = nodeset.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.replicas = c.pods.replicas as i32;
    new.updated_replicas = c.pods.updated as i32;
    new.ready_replicas = c.pods.ready as i32;
    new.available_replicas = c.pods.available as i32;
    new.unavailable_replicas = c.pods.unavailable as i32;
    new.desired = c.pods.desired as i32;
    if let Some(s) = c.slurm {
        new.slurm_idle = s.idle as i32;
        new.slurm_allocated = s.allocated as i32;
        new.slurm_down = s.down as i32;
        new.slurm_drain = s.drain as i32;
    }
    new.observed_generation = nodeset.metadata.generation.unwrap_or_default();
    new.node_set_hash = revision.to_owned();
    new.selector = render::labels::selector_string(&render::labels::selector_labels(
        render::labels::Component::Worker,
        &nodeset.name_any(),
    ));
    new.ordinal_to_node = plan.ordinal_to_node.clone().unwrap_or_default();
    if new == old {
        return None;
    }
    // Every counter is written, zeros too (a merge patch leaves out what it does not name);
    // conditions belong to the conditions module.
    Some(json!({
        "replicas": new.replicas,
        "updatedReplicas": new.updated_replicas,
        "readyReplicas": new.ready_replicas,
        "availableReplicas": new.available_replicas,
        "unavailableReplicas": new.unavailable_replicas,
        "desired": new.desired,
        "slurmIdle": new.slurm_idle,
        "slurmAllocated": new.slurm_allocated,
        "slurmDown": new.slurm_down,
        "slurmDrain": new.slurm_drain,
        "observedGeneration": new.observed_generation,
        "nodeSetHash": new.node_set_hash,
        "selector": new.selector,
        "ordinalToNode": map_patch(&old.ordinal_to_node, &new.ordinal_to_node),
    }))
}

/// A merge patch that turns map `old` into `new`: removed keys are `null`, and an empty map
/// removes the field.
fn map_patch(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> serde_json::Value {
    if new.is_empty() {
        return serde_json::Value::Null;
    }
    let mut patch: serde_json::Map<String, serde_json::Value> = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .map(|k| (k.clone(), serde_json::Value::Null))
        .collect();
    patch.extend(new.iter().map(|(k, v)| (k.clone(), json!(v))));
    serde_json::Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn pins_are_patched_key_by_key() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let old = map(&[("0", "a"), ("1", "b")]);
        assert_eq!(
            map_patch(&old, &map(&[("1", "c"), ("2", "a")])),
            json!({"0": null, "1": "c", "2": "a"})
        );
        assert_eq!(map_patch(&old, &map(&[])), serde_json::Value::Null);
        assert_eq!(map_patch(&map(&[]), &map(&[("0", "a")])), json!({"0": "a"}));
    }

    /// The batches `slow_start` makes of `n` items, the item `fail` failing.
    fn batches(n: usize, fail: Option<usize>) -> (Vec<Vec<usize>>, bool) {
        let items: Vec<usize> = (0..n).collect();
        let started: Mutex<Vec<(usize, usize)>> = Mutex::default();
        let in_flight = Mutex::new(0usize);
        let batch = Mutex::new(0usize);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let result = runtime.block_on(slow_start(&items, |i| {
            let (started, in_flight, batch) = (&started, &in_flight, &batch);
            async move {
                {
                    let mut flying = in_flight.lock().unwrap();
                    let mut b = batch.lock().unwrap();
                    if *flying == 0 {
                        *b += 1;
                    }
                    *flying += 1;
                    started.lock().unwrap().push((*b, *i));
                }
                // Every item of a batch starts before any ends.
                tokio::task::yield_now().await;
                *in_flight.lock().unwrap() -= 1;
                if Some(*i) == fail {
                    Err(Error::Unnamed)
                } else {
                    Ok(())
                }
            }
        }));
        let mut out: Vec<Vec<usize>> = Vec::new();
        for (b, i) in started.into_inner().unwrap() {
            if out.len() < b {
                out.push(Vec::new());
            }
            out[b - 1].push(i);
        }
        (out, result.is_ok())
    }

    #[test]
    fn creates_in_doubling_batches() {
        let (b, ok) = batches(10, None);
        assert!(ok);
        assert_eq!(b, [vec![0], vec![1, 2], vec![3, 4, 5, 6], vec![7, 8, 9]]);
        let (b, _) = batches(100, None);
        let sizes: Vec<usize> = b.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 32, 5]);
    }

    #[test]
    fn a_failed_batch_stops_the_rest() {
        let (b, ok) = batches(10, Some(2));
        assert!(!ok);
        assert_eq!(b, [vec![0], vec![1, 2]], "nothing after the failed batch");
    }
}
