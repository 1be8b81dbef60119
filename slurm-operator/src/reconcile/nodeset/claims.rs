//! The owners of a NodeSet's claims, as [`crate::planner::claims`] decides from
//! `persistentVolumeClaimRetentionPolicy`: read (the claims of the NodeSet's selector), and
//! patched where they differ, before the pass deletes any pod. Nothing is read for a NodeSet
//! without `volumeClaimTemplates`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ListParams, Patch};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::super::{Context, Error};
use super::act::patch_params;
use crate::crd::NodeSet;
use crate::planner::claims::{owners, references};
use crate::planner::{DeleteReason, Plan};
use crate::render::{self, labels};

/// The pods of `plan` that a scale-in deletes: their claims may go with them.
pub fn condemned(plan: &Plan) -> BTreeSet<&str> {
    plan.delete
        .iter()
        .filter(|d| matches!(d.reason, DeleteReason::ScaleIn | DeleteReason::Ineligible))
        .map(|d| d.pod.as_str())
        .collect()
}

/// The suffix of `pod`'s claim names: its padded ordinal, or (DaemonSet mode) its hostname.
fn suffix<'a>(nodeset: &NodeSet, pod: &'a Pod) -> Option<&'a str> {
    if nodeset.spec.is_daemonset() {
        pod.spec.as_ref()?.hostname.as_deref()
    } else {
        pod.metadata
            .name
            .as_deref()?
            .strip_prefix(&format!("{}-", nodeset.name_any()))
    }
}

/// Brings the owners of `nodeset`'s claims in line with its policy, `condemned` naming the
/// pods about to go in a scale-in. Gives the pods whose claims could not be brought in line:
/// they are not deleted in this pass (their claims would outlive a policy that deletes them).
pub async fn sync(
    ctx: &Context,
    nodeset: &NodeSet,
    pods: &[Pod],
    condemned: &BTreeSet<&str>,
) -> (BTreeSet<String>, Option<Error>) {
    let mut held = BTreeSet::new();
    if nodeset.spec.volume_claim_templates.is_empty() {
        return (held, None);
    }
    let ns = nodeset.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = labels::selector_string(&labels::selector_labels(
        labels::Component::Worker,
        &nodeset.name_any(),
    ));
    let hold_all = |e: Error| {
        let all = condemned.iter().map(|p| p.to_string()).collect();
        (all, Some(e))
    };
    let listed = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(l) => l.items,
        Err(e) => return hold_all(e.into()),
    };
    let set_ref = match render::owner_ref(nodeset) {
        Ok(r) => r,
        Err(e) => return hold_all(e.into()),
    };
    let policy = &nodeset.spec.persistent_volume_claim_retention_policy;
    let templates: Vec<String> = nodeset
        .spec
        .volume_claim_templates
        .iter()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    let mut first_error = None;
    for claim in &listed {
        let name = claim.name_any();
        // The claim's pod: the one whose claim names this is.
        let pod = pods.iter().find(|p| {
            suffix(nodeset, p).is_some_and(|s| {
                templates
                    .iter()
                    .any(|t| name == format!("{t}-{}-{s}", nodeset.name_any()))
            })
        });
        // Only the claims of live pods, as the StatefulSet controller does: a claim whose pod
        // is gone, or on its way out, keeps the owners it was given when the pod was condemned
        // (the pod is no longer among the plan's deletions, and the claim would lose them).
        let Some(pod) = pod.filter(|p| p.metadata.deletion_timestamp.is_none()) else {
            continue;
        };
        let pod_name = pod.name_any();
        let doomed = condemned.contains(pod_name.as_str());
        let pod_ref = render::owner_ref(pod).ok();
        let Some(next) = references(
            claim.owner_references(),
            &set_ref,
            pod_ref.as_ref(),
            owners(policy, doomed),
        ) else {
            continue;
        };
        let patch = json!({ "metadata": {
            "ownerReferences": next,
            "resourceVersion": claim.resource_version(),
        }});
        match api
            .patch(&name, &patch_params(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => tracing::info!(
                claim = name,
                pod = pod_name,
                "claim owners set by persistentVolumeClaimRetentionPolicy"
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                held.insert(pod_name);
                first_error.get_or_insert(e.into());
            }
        }
    }
    (held, first_error)
}
