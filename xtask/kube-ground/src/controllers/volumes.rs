//! The PersistentVolume controller and a local provisioner, as far as the tests need them. The
//! kubelet gives each claim a directory of its own (`<state-dir>/claims/<namespace>/<claim>-<uid>`),
//! so most claims need no volume: they are Bound at once, with their requested size as capacity.
//! A claim of a StorageClass with `volumeBindingMode: WaitForFirstConsumer` stays Pending until a
//! scheduler gives it a node (`volume.kubernetes.io/selected-node`), as Kubernetes' PV controller
//! leaves it; then, as a local-path provisioner does, a PersistentVolume `pvc-<claim uid>` is made
//! with node affinity to that node (`kubernetes.io/hostname`) and the claim bound to it. Such a
//! volume is deleted once its claim is gone (reclaim policy Delete, the classes' default).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::common::Failed;

const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Marks the volumes this provisioner made (and may delete).
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const PROVISIONER: &str = "kube-ground";

pub async fn run(client: Client) -> anyhow::Result<()> {
    tokio::try_join!(bind_claims(client.clone()), reclaim(client))?;
    Ok(())
}

async fn bind_claims(client: Client) -> anyhow::Result<()> {
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

/// What to do with an unbound claim.
#[derive(Debug, PartialEq)]
enum Plan {
    /// Bound at once, without a volume.
    Bind,
    /// Wait for a scheduler to give it a node.
    Wait,
    /// Provision a volume on this node, and bind the claim to it.
    Provision(String),
}

/// A claim of no class, of a class that does not exist or of an `Immediate` one is bound at
/// once (what the tests always had); a `WaitForFirstConsumer` claim waits for its node.
fn plan(pvc: &PersistentVolumeClaim, class: Option<&StorageClass>) -> Plan {
    let late = class.and_then(|c| c.volume_binding_mode.as_deref()) == Some("WaitForFirstConsumer");
    if !late {
        return Plan::Bind;
    }
    match pvc
        .annotations()
        .get(SELECTED_NODE)
        .filter(|n| !n.is_empty())
    {
        Some(node) => Plan::Provision(node.clone()),
        None => Plan::Wait,
    }
}

async fn bind(pvc: &PersistentVolumeClaim, client: &Client) -> anyhow::Result<Action> {
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if bound || pvc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = pvc.spec.clone().unwrap_or_default();
    let class = match spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) {
        Some(name) => {
            Api::<StorageClass>::all(client.clone())
                .get_opt(name)
                .await?
        }
        None => None,
    };
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned());
    let ns = pvc.namespace().unwrap_or_default();
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    match plan(pvc, class.as_ref()) {
        Plan::Wait => return Ok(Action::await_change()),
        Plan::Bind => {}
        Plan::Provision(node) => {
            let class = class.expect("a WaitForFirstConsumer claim has its class");
            let volume = provisioned(pvc, &class, &node);
            let name = volume.name_any();
            let volumes = Api::<PersistentVolume>::all(client.clone());
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            volumes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Bound"}})),
                )
                .await?;
            let claim = json!({
                "metadata": {"annotations": {
                    "pv.kubernetes.io/bind-completed": "yes",
                    "pv.kubernetes.io/bound-by-controller": "yes",
                    "volume.kubernetes.io/storage-provisioner": class.provisioner,
                }},
                "spec": {"volumeName": name},
            });
            claims
                .patch(
                    &pvc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&claim),
                )
                .await?;
            tracing::info!(claim = %format!("{ns}/{}", pvc.name_any()), volume = %name, %node, "provisioned");
        }
    }
    let status = json!({"status": {
        "phase": "Bound",
        "accessModes": spec.access_modes.unwrap_or_default(),
        "capacity": {"storage": size},
    }});
    claims
        .patch_status(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    Ok(Action::await_change())
}

/// The volume a local provisioner makes for `pvc` on `node`, bound to it.
fn provisioned(pvc: &PersistentVolumeClaim, class: &StorageClass, node: &str) -> PersistentVolume {
    let spec = pvc.spec.clone().unwrap_or_default();
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned());
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("pvc-{}", pvc.uid().unwrap_or_default()),
            "annotations": {PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.access_modes.unwrap_or_default(),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "storageClassName": class.name_any(),
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": pvc.namespace(),
                "name": pvc.name_any(),
                "uid": pvc.uid(),
            },
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]},
            ]}]}},
        },
    }))
    .expect("a valid PersistentVolume")
}

/// Deletes the volumes this provisioner made whose claim is gone (or made again under its
/// name), unless their reclaim policy keeps them.
async fn reclaim(client: Client) -> anyhow::Result<()> {
    Controller::new(
        Api::<PersistentVolume>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
        |pvc| {
            pvc.spec
                .and_then(|s| s.volume_name)
                .map(|v| ObjectRef::<PersistentVolume>::new(&v))
        },
    )
    .run(
        |pv, client: Arc<Client>| async move { release(&pv, &client).await.map_err(Failed) },
        |_, err, _| {
            tracing::warn!("reclaiming a volume: {err}");
            Action::requeue(Duration::from_secs(2))
        },
        Arc::new(client),
    )
    .for_each(|_| futures::future::ready(()))
    .await;
    Ok(())
}

async fn release(pv: &PersistentVolume, client: &Client) -> anyhow::Result<Action> {
    let ours = pv.annotations().get(PROVISIONED_BY).map(String::as_str) == Some(PROVISIONER);
    let spec = pv.spec.clone().unwrap_or_default();
    let deletes = spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete");
    let Some(claim_ref) = spec.claim_ref.filter(|_| ours && deletes) else {
        return Ok(Action::await_change());
    };
    let claims = Api::<PersistentVolumeClaim>::namespaced(
        client.clone(),
        claim_ref.namespace.as_deref().unwrap_or_default(),
    );
    let claim = claims
        .get_opt(claim_ref.name.as_deref().unwrap_or_default())
        .await?;
    if claim.is_some_and(|c| c.uid() == claim_ref.uid) {
        return Ok(Action::await_change());
    }
    match Api::<PersistentVolume>::all(client.clone())
        .delete(&pv.name_any(), &Default::default())
        .await
    {
        Ok(_) => tracing::info!(volume = %pv.name_any(), "deleted: its claim is gone"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn wait_for_first_consumer_claims_wait_for_their_node() {
        let late: StorageClass = yaml(
            r#"{"metadata": {"name": "local"}, "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer"}"#,
        );
        let now: StorageClass = yaml(
            r#"{"metadata": {"name": "net"}, "provisioner": "p", "volumeBindingMode": "Immediate"}"#,
        );
        let fresh: PersistentVolumeClaim = yaml(
            r#"{"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}, "spec": {"storageClassName": "local"}}"#,
        );
        let picked: PersistentVolumeClaim = yaml(
            r#"{"metadata": {"name": "c", "namespace": "ns", "uid": "u1", "annotations": {"volume.kubernetes.io/selected-node": "k2"}},
                "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}"#,
        );
        assert_eq!(plan(&fresh, None), Plan::Bind);
        assert_eq!(plan(&fresh, Some(&now)), Plan::Bind);
        assert_eq!(plan(&fresh, Some(&late)), Plan::Wait);
        assert_eq!(plan(&picked, Some(&late)), Plan::Provision("k2".into()));

        let pv = provisioned(&picked, &late, "k2");
        assert_eq!(pv.name_any(), "pvc-u1");
        let spec = pv.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );
        assert_eq!(spec.capacity.unwrap()["storage"].0, "1Gi");
        let claim_ref = spec.claim_ref.unwrap();
        assert_eq!(
            (claim_ref.name.as_deref(), claim_ref.uid.as_deref()),
            (Some("c"), Some("u1"))
        );
        let term = &spec
            .node_affinity
            .unwrap()
            .required
            .unwrap()
            .node_selector_terms[0];
        let expr = &term.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (
                expr.key.as_str(),
                expr.operator.as_str(),
                expr.values.as_deref()
            ),
            (
                "kubernetes.io/hostname",
                "In",
                Some(&["k2".to_string()][..])
            )
        );
    }
}
