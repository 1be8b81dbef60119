//! Deployment, through ReplicaSets named `<deployment>-<pod-template-hash>`: the current
//! template's ReplicaSet gets `replicas`, every older one is scaled to zero at once (a test-ground
//! simplification of RollingUpdate), and the status is summed from them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::common;

const HASH: &str = "pod-template-hash";

pub async fn run(client: Client) -> anyhow::Result<()> {
    common::run::<Deployment, _, _>(client, "deployment", reconcile).await
}

async fn reconcile(d: Arc<Deployment>, client: Client) -> anyhow::Result<()> {
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = d.namespace().unwrap_or_default();
    let uid = d.uid().unwrap_or_default();
    let spec = d.spec.clone().unwrap_or_default();
    let replicas = spec.replicas.unwrap_or(1);
    let hash = common::template_hash(&spec.template);
    let name = format!("{}-{hash}", d.name_any());
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let owned: Vec<ReplicaSet> = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect();
    if !owned.iter().any(|rs| rs.name_any() == name) {
        let mut template = spec.template.clone();
        let labels = template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new);
        labels.insert(HASH.into(), hash.clone());
        let mut selector: LabelSelector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH.into(), hash.clone());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                owner_references: Some(vec![common::owner_ref(d.as_ref())]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                selector,
                template: Some(template),
                min_ready_seconds: spec.min_ready_seconds,
            }),
            status: None,
        };
        common::benign(api.create(&PostParams::default(), &rs).await)?;
    }
    let (mut total, mut ready, mut updated) = (0, 0, 0);
    for rs in &owned {
        let current = rs.name_any() == name;
        let want = if current { replicas } else { 0 };
        if rs.spec.as_ref().and_then(|s| s.replicas) != Some(want) {
            let patch = serde_json::json!({"spec": {"replicas": want}});
            api.patch(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        }
        let st = rs.status.clone().unwrap_or_default();
        total += st.replicas;
        ready += st.ready_replicas.unwrap_or(0);
        if current {
            updated += st.replicas;
        }
    }
    let available = ready >= replicas;
    // As the deployment controller reports a finished rollout; Helm's --wait (kstatus) waits for it.
    let rolled_out = available && updated == replicas && total == replicas;
    let status = serde_json::json!({"status": {
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": (replicas - ready).max(0),
        "observedGeneration": d.metadata.generation,
        "conditions": [{
            "type": "Available",
            "status": if available { "True" } else { "False" },
            "reason": if available { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
        }, {
            "type": "Progressing",
            "status": "True",
            "reason": if rolled_out { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
            "message": format!("ReplicaSet \"{name}\" {}", if rolled_out { "has successfully progressed." } else { "is progressing." }),
        }],
    }});
    Api::<Deployment>::namespaced(client, &ns)
        .patch_status(
            &d.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    Ok(())
}
