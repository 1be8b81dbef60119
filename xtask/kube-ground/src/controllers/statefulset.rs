//! StatefulSet: pods `<set>-<ordinal>` with hostname and subdomain (`serviceName`), PVCs
//! `<template>-<set>-<ordinal>` from the claim templates (kept when pods go), OrderedReady (one
//! at a time, each waiting for the one before to be Running and Ready) or Parallel; scale-down
//! and template changes remove pods from the highest ordinal down, one at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::common;

const REVISION: &str = "controller-revision-hash";

pub async fn run(client: Client) -> anyhow::Result<()> {
    common::run::<StatefulSet, _, _>(client, "statefulset", reconcile).await
}

async fn reconcile(set: Arc<StatefulSet>, client: Client) -> anyhow::Result<()> {
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let spec = set.spec.clone().unwrap_or_default();
    let replicas = spec.replicas.unwrap_or(1).max(0) as usize;
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    let on_delete = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        == Some("OnDelete");
    let revision = format!("{name}-{}", common::template_hash(&spec.template));
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pods = common::owned_or_adopted_pods(&client, set.as_ref(), Some(&spec.selector)).await?;
    let by_ordinal: BTreeMap<usize, Pod> = pods
        .into_iter()
        .filter_map(|p| {
            let ord = p
                .name_any()
                .strip_prefix(&format!("{name}-"))?
                .parse()
                .ok()?;
            Some((ord, p))
        })
        .collect();
    // Create what is missing, in order.
    for ord in 0..replicas {
        match by_ordinal.get(&ord) {
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                if !parallel {
                    break;
                }
            }
            Some(p) if matches!(common::phase(p), "Succeeded" | "Failed") => {
                common::benign(
                    pods_api
                        .delete(&p.name_any(), &DeleteParams::default())
                        .await,
                )?;
                if !parallel {
                    break;
                }
            }
            Some(p) => {
                let up = common::phase(p) == "Running" && common::ready(p);
                if !parallel && !up {
                    break;
                }
            }
            None => {
                ensure_claims(&client, &set, ord).await?;
                let pod = pod_for(&set, ord, &revision);
                common::benign(pods_api.create(&PostParams::default(), &pod).await)?;
                if !parallel {
                    break;
                }
            }
        }
    }
    // Remove extras, highest first; then replace one outdated pod, highest first.
    let extras: Vec<&Pod> = by_ordinal
        .iter()
        .rev()
        .filter(|(ord, p)| **ord >= replicas && p.metadata.deletion_timestamp.is_none())
        .map(|(_, p)| p)
        .collect();
    let terminating = by_ordinal
        .values()
        .any(|p| p.metadata.deletion_timestamp.is_some());
    if let Some(p) = extras.first() {
        if parallel || !terminating {
            common::benign(
                pods_api
                    .delete(&p.name_any(), &DeleteParams::default())
                    .await,
            )?;
        }
    } else if !on_delete && !terminating {
        let all_ready = (0..replicas).all(|o| by_ordinal.get(&o).is_some_and(common::ready));
        let outdated = by_ordinal
            .iter()
            .rev()
            .find(|(ord, p)| **ord < replicas && p.labels().get(REVISION) != Some(&revision));
        if let Some((_, p)) = outdated
            && all_ready
        {
            common::benign(
                pods_api
                    .delete(&p.name_any(), &DeleteParams::default())
                    .await,
            )?;
        }
    }
    let live: Vec<&Pod> = by_ordinal
        .iter()
        .filter(|(o, p)| **o < replicas && common::active(p))
        .map(|(_, p)| p)
        .collect();
    let ready = live.iter().filter(|p| common::ready(p)).count();
    let updated = live
        .iter()
        .filter(|p| p.labels().get(REVISION) == Some(&revision))
        .count();
    let status = serde_json::json!({"status": {
        "replicas": live.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": updated,
        "updatedReplicas": updated,
        "currentRevision": revision,
        "updateRevision": revision,
        "observedGeneration": set.metadata.generation,
    }});
    Api::<StatefulSet>::namespaced(client, &ns)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

fn claim_name(template: &str, set: &str, ord: usize) -> String {
    format!("{template}-{set}-{ord}")
}

fn pod_for(set: &StatefulSet, ord: usize, revision: &str) -> Pod {
    let spec = set.spec.clone().unwrap_or_default();
    let name = format!("{}-{ord}", set.name_any());
    let labels = BTreeMap::from([
        (REVISION.to_string(), revision.to_string()),
        (
            "statefulset.kubernetes.io/pod-name".to_string(),
            name.clone(),
        ),
        ("apps.kubernetes.io/pod-index".to_string(), ord.to_string()),
    ]);
    let mut pod = common::pod_from_template(
        &spec.template,
        common::owner_ref(set),
        Some(name.clone()),
        None,
        labels,
    );
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.hostname = Some(name);
    if !spec.service_name.clone().unwrap_or_default().is_empty() {
        pod_spec.subdomain = spec.service_name.clone();
    }
    let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
    for t in spec.volume_claim_templates.iter().flatten() {
        let tname = t.name_any();
        volumes.retain(|v| v.name != tname);
        volumes.push(Volume {
            name: tname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&tname, &set.name_any(), ord),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    pod
}

async fn ensure_claims(client: &Client, set: &StatefulSet, ord: usize) -> anyhow::Result<()> {
    let ns = set.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    for t in set
        .spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
    {
        let mut claim = t.clone();
        claim.metadata.name = Some(claim_name(&t.name_any(), &set.name_any(), ord));
        claim.metadata.namespace = None;
        claim.metadata.labels = set
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone());
        claim.status = None;
        common::benign(api.create(&PostParams::default(), &claim).await)?;
    }
    Ok(())
}
