//! The NodeSet's pods and ControllerRevisions another operator made (see
//! [`crate::planner::adopt`]): its revisions are taken over (labelled with the worker selector,
//! so that the cache and [`super::history`] see them), and the update revision is chosen among
//! them. Read from the cache; listed directly only while a pod carries a hash the cache has no
//! revision for, which happens once, before the takeover.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::act::patch_params;
use crate::crd::NodeSet;
use crate::keys::{ADOPT_RESTART, ANNOTATION_ADOPT, LABEL_CONTROLLER_REVISION_HASH};
use crate::planner::adopt::{RevisionInfo, choose, same_template};
use crate::reconcile::adopt::{ADOPTED, RESTART_REQUIRED, restart_allowed};
use crate::reconcile::conditions::Wanted;
use crate::reconcile::{Context, Error};
use crate::render;
use crate::render::labels::{Component, selector_labels};

/// The revision pods must carry, and whether updates wait for the user.
pub struct Adoption {
    pub update_revision: String,
    /// `Adopted=False` while pods another operator made from an older template are kept from
    /// the rolling update; updates then wait as with `OnDelete`.
    pub held: Option<Wanted>,
}

pub async fn revisions(
    ctx: &Context,
    nodeset: &NodeSet,
    pods: &[Pod],
    hash: &str,
) -> Result<Adoption, Error> {
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let uid = nodeset.uid().unwrap_or_default();
    let owned = |r: &ControllerRevision| {
        r.owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid)
    };
    let pod_hashes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.labels().get(LABEL_CONTROLLER_REVISION_HASH).cloned())
        .collect();
    let cached: Vec<ControllerRevision> = ctx
        .cache
        .revisions
        .list(&ns, owned)
        .iter()
        .map(|r| (**r).clone())
        .collect();
    let known = |revs: &[ControllerRevision], h: &str| {
        revs.iter().any(|r| {
            r.labels()
                .get(LABEL_CONTROLLER_REVISION_HASH)
                .map(String::as_str)
                == Some(h)
        })
    };
    let revisions = if pod_hashes.iter().all(|h| h == hash || known(&cached, h)) {
        cached
    } else {
        take_over(ctx, nodeset, &ns, &owned).await?
    };
    let current = render::nodeset_pod::revision_data(&nodeset.spec);
    let infos: Vec<RevisionInfo> = revisions
        .iter()
        .filter_map(|r| {
            let label = r.labels().get(LABEL_CONTROLLER_REVISION_HASH)?.clone();
            let data = r.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
            Some(RevisionInfo {
                ours: render::nodeset_pod::data_hash(&data) == label,
                current: same_template(&data, &current),
                hash: label,
                revision: r.revision,
            })
        })
        .collect();
    let choice = choose(&infos, hash, &pod_hashes);
    let held = (!choice.foreign_outdated.is_empty() && !restart_allowed(nodeset)).then(|| {
        let pods: Vec<String> = pods
            .iter()
            .filter(|p| {
                p.labels()
                    .get(LABEL_CONTROLLER_REVISION_HASH)
                    .is_some_and(|h| choice.foreign_outdated.contains(h))
            })
            .map(|p| p.name_any())
            .collect();
        Wanted {
            type_: ADOPTED.into(),
            status: "False",
            reason: RESTART_REQUIRED.into(),
            message: format!(
                "pods {} were made by another operator from an older template: replacing them restarts their slurmd, so updates wait as with OnDelete (deleting a pod replaces it). Annotate the NodeSet {ANNOTATION_ADOPT}={ADOPT_RESTART} to let the rolling update replace them",
                pods.join(", ")
            ),
        }
    });
    Ok(Adoption {
        update_revision: choice.update_revision,
        held,
    })
}

/// The NodeSet's revisions listed directly; those without the worker selector (another
/// operator's) get it, so that the cache holds them from then on.
async fn take_over(
    ctx: &Context,
    nodeset: &NodeSet,
    ns: &str,
    owned: &impl Fn(&ControllerRevision) -> bool,
) -> Result<Vec<ControllerRevision>, Error> {
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), ns);
    let labels = selector_labels(Component::Worker, &nodeset.name_any());
    let listed = api
        .list(&ListParams::default().labels(LABEL_CONTROLLER_REVISION_HASH))
        .await?;
    let mut revisions = Vec::new();
    for mut r in listed.items.into_iter().filter(|r| owned(r)) {
        if !labels.iter().all(|(k, v)| r.labels().get(k) == Some(v)) {
            api.patch(
                &r.name_any(),
                &patch_params(),
                &Patch::Merge(json!({ "metadata": { "labels": labels } })),
            )
            .await?;
            r.labels_mut().extend(labels.clone());
            ctx.event(
                nodeset,
                false,
                ADOPTED,
                "Adopt",
                format!(
                    "took over ControllerRevision {} made by another operator",
                    r.name_any()
                ),
            )
            .await;
        }
        revisions.push(r);
    }
    Ok(revisions)
}
