//! Every PersistentVolumeClaim is Bound at once, with its requested size as capacity: the kubelet
//! gives each claim a directory of its own (`<state-dir>/claims/<namespace>/<claim>`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use super::common::Failed;

pub async fn run(client: Client) -> anyhow::Result<()> {
    Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .run(
        |pvc, client: Arc<Client>| async move { bind(&pvc, &client).await.map_err(Failed) },
        |_, err, _| {
            tracing::warn!("binding a claim: {err}");
            Action::requeue(Duration::from_secs(2))
        },
        Arc::new(client),
    )
    .for_each(|_| futures::future::ready(()))
    .await;
    Ok(())
}

async fn bind(pvc: &PersistentVolumeClaim, client: &Client) -> anyhow::Result<Action> {
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if bound || pvc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = pvc.spec.clone().unwrap_or_default();
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned());
    let status = serde_json::json!({"status": {
        "phase": "Bound",
        "accessModes": spec.access_modes.unwrap_or_default(),
        "capacity": {"storage": size},
    }});
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), &pvc.namespace().unwrap_or_default())
        .patch_status(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    Ok(Action::await_change())
}
