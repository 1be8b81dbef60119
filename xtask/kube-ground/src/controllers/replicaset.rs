//! ReplicaSet: as many active pods from the template as `replicas`, extras removed (not-ready and
//! newest first), and the status counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::common;

pub async fn run(client: Client) -> anyhow::Result<()> {
    common::run::<ReplicaSet, _, _>(client, "replicaset", reconcile).await
}

async fn reconcile(rs: Arc<ReplicaSet>, client: Client) -> anyhow::Result<()> {
    if rs.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = rs.namespace().unwrap_or_default();
    let uid = rs.uid().unwrap_or_default();
    let spec = rs.spec.clone().unwrap_or_default();
    let want = spec.replicas.unwrap_or(1).max(0) as usize;
    let mut pods: Vec<Pod> = common::owned_pods(&client, &ns, &uid, Some(&spec.selector))
        .await?
        .into_iter()
        .filter(common::active)
        .collect();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let template = spec.template.clone().unwrap_or_default();
    for _ in pods.len()..want {
        let pod = common::pod_from_template(
            &template,
            common::owner_ref(rs.as_ref()),
            None,
            Some(format!("{}-", rs.name_any())),
            BTreeMap::new(),
        );
        api.create(&PostParams::default(), &pod).await?;
    }
    if pods.len() > want {
        pods.sort_by_key(|p| (common::ready(p), std::cmp::Reverse(p.creation_timestamp())));
        for p in &pods[..pods.len() - want] {
            common::benign(api.delete(&p.name_any(), &DeleteParams::default()).await)?;
        }
        pods.drain(..pods.len() - want);
    }
    let ready = pods.iter().filter(|p| common::ready(p)).count() as i32;
    let status = serde_json::json!({"status": {
        "replicas": pods.len(),
        "fullyLabeledReplicas": pods.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": rs.metadata.generation,
    }});
    Api::<ReplicaSet>::namespaced(client, &ns)
        .patch_status(
            &rs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    Ok(())
}
