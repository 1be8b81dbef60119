//! The NodeSet's ControllerRevisions, kept as [`crate::planner::history`] decides: read from
//! the cache, and listed directly (by the worker selector) only when the cached ones call for a
//! change, which is then decided from that listing (it holds a revision made a moment ago).
//! Written only when the template changed.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ListParams, Patch, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::act::patch_params;
use crate::crd::NodeSet;
use crate::keys::LABEL_CONTROLLER_REVISION_HASH;
use crate::planner::history::{HistoryAction, Revision, history_actions};
use crate::reconcile::apply::FIELD_MANAGER;
use crate::reconcile::{Context, Error};
use crate::render;
use crate::render::labels::{Component, selector_labels};

pub async fn sync(
    ctx: &Context,
    nodeset: &NodeSet,
    pods: &[Pod],
    revision: &str,
) -> Result<(), Error> {
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let name = nodeset.name_any();
    let uid = nodeset.uid().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let labels = selector_labels(Component::Worker, &name);
    let selector = render::labels::selector_string(&labels);
    let ours = |r: &ControllerRevision| {
        labels.iter().all(|(k, v)| r.labels().get(k) == Some(v))
            && r.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
    };
    let in_use: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.labels().get(LABEL_CONTROLLER_REVISION_HASH).cloned())
        .collect();
    let limit = nodeset.spec.revision_history_limit;
    let actions = |owned: &[&ControllerRevision]| {
        let existing: Vec<Revision> = owned
            .iter()
            .filter_map(|r| {
                Some(Revision {
                    name: r.name_any(),
                    hash: r.labels().get(LABEL_CONTROLLER_REVISION_HASH)?.clone(),
                    revision: r.revision,
                })
            })
            .collect();
        history_actions(&name, &existing, revision, &in_use, limit)
    };
    let cached = ctx.cache.revisions.list(&ns, ours);
    if actions(&cached.iter().map(|r| &**r).collect::<Vec<_>>()).is_empty() {
        return Ok(());
    }
    let listed = api.list(&ListParams::default().labels(&selector)).await?;
    let owned: Vec<&ControllerRevision> = listed.items.iter().filter(|r| ours(r)).collect();
    for action in actions(&owned) {
        let result = match action {
            HistoryAction::Create {
                name,
                revision: number,
            } => {
                let mut labels = labels.clone();
                labels.insert(LABEL_CONTROLLER_REVISION_HASH.into(), revision.into());
                let object = ControllerRevision {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(ns.clone()),
                        labels: Some(labels),
                        owner_references: Some(vec![render::controller_ref(nodeset)?]),
                        ..ObjectMeta::default()
                    },
                    data: Some(RawExtension(render::nodeset_pod::revision_data(
                        &nodeset.spec,
                    ))),
                    revision: number,
                };
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                api.create(&params, &object).await.map(drop)
            }
            HistoryAction::Renumber { name, revision } => api
                .patch(
                    &name,
                    &patch_params(),
                    &Patch::Merge(json!({ "revision": revision })),
                )
                .await
                .map(drop),
            HistoryAction::Delete { name } => {
                api.delete(&name, &DeleteParams::default()).await.map(drop)
            }
        };
        match result {
            // Made or removed meanwhile (another reconcile, a restarted operator).
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            other => other?,
        }
    }
    Ok(())
}
