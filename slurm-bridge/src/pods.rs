//! Writes to pods: each one a patch or call that is safe to repeat.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::feasible::tolerates;
use crate::keys;
use crate::taint;

/// The field manager of the bridge's patches.
pub const FIELD_MANAGER: &str = "slurm-bridge";

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

fn api(client: &Client, namespace: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), namespace)
}

/// Labels the pod with its job id and adds the finalizer (a strategic merge: the finalizer list
/// is merged, not replaced), and the toleration of the bridge's node taint when the pod lacks it
/// (as when no webhook mutated it). Tolerations are replaced whole: the pod's own come first.
pub async fn label(client: &Client, pod: &Pod, job_id: u32) -> kube::Result<()> {
    let mut patch = json!({"metadata": {
        "labels": {keys::JOB_ID_LABEL: job_id.to_string()},
        "finalizers": [keys::FINALIZER],
    }});
    if let Some(tolerations) = with_toleration(pod) {
        patch["spec"] = json!({"tolerations": tolerations});
    }
    api(client, &pod.namespace().unwrap_or_default())
        .patch(&pod.name_any(), &params(), &Patch::Strategic(patch))
        .await
        .map(drop)
}

/// Takes the job id label off the pod (its finalizer stays): the pod is submitted again.
pub async fn unlabel(client: &Client, namespace: &str, pod: &str) -> kube::Result<()> {
    let patch = json!({"metadata": {"labels": {keys::JOB_ID_LABEL: null}}});
    match api(client, namespace)
        .patch(pod, &params(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the pod lacks the toleration of its scheduler's node taint (it must have it before it
/// is bound: the taint is `NoExecute`).
pub fn needs_toleration(pod: &Pod) -> bool {
    with_toleration(pod).is_some()
}

/// The pod's tolerations with the one of its scheduler's node taint, or `None` if it has it.
fn with_toleration(pod: &Pod) -> Option<Vec<Toleration>> {
    let spec = pod.spec.as_ref()?;
    let scheduler = spec.scheduler_name.as_deref()?;
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    if tolerations
        .iter()
        .any(|t| tolerates(t, &taint::managed(scheduler)))
    {
        return None;
    }
    tolerations.push(taint::toleration(scheduler));
    Some(tolerations)
}

/// Binds the pod to `node`, with the node in its annotation: one write, as the API server copies
/// a Binding's annotations to the pod it binds. A pod already bound to that node counts as done.
pub async fn bind(client: &Client, namespace: &str, pod: &str, node: &str) -> kube::Result<()> {
    let api = api(client, namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_owned()),
            namespace: Some(namespace.to_owned()),
            annotations: Some([(keys::SLURM_NODE_ANNOTATION.to_owned(), node.to_owned())].into()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    match api
        .create_subresource::<Binding, serde_json::Value>(
            "binding",
            pod,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let now = api.get(pod).await?;
            let bound = now.spec.and_then(|s| s.node_name);
            if bound.as_deref() == Some(node) {
                Ok(())
            } else {
                Err(kube::Error::Api(e))
            }
        }
        Err(e) => Err(e),
    }
}

/// Deletes the pod gracefully; a pod already gone counts as done.
pub async fn delete(client: &Client, namespace: &str, pod: &str) -> kube::Result<()> {
    match api(client, namespace)
        .delete(pod, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the bridge's finalizer, checking that it is still where it was seen (a JSON patch
/// with a test), so that a concurrent change of the list is never overwritten.
pub async fn release(client: &Client, current: &Pod) -> kube::Result<()> {
    let Some(index) = current
        .finalizers()
        .iter()
        .position(|f| f == keys::FINALIZER)
    else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": path, "value": keys::FINALIZER},
        {"op": "remove", "path": path},
    ]))
    .expect("a valid JSON patch");
    let namespace = current.namespace().unwrap_or_default();
    match api(client, &namespace)
        .patch(&current.name_any(), &params(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sets the pod's `SlurmJob` condition (merged by type into `status.conditions`).
pub async fn condition(
    client: &Client,
    namespace: &str,
    pod: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> kube::Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({"status": {"conditions": [{
        "type": keys::SLURM_JOB_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }]}});
    match api(client, namespace)
        .patch_status(pod, &params(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_toleration_is_added_once_after_the_pods_own() {
        let bare = pod(
            "spec: {schedulerName: b1, containers: [], tolerations: [{key: gpu, operator: Exists}]}\n",
        );
        let tolerations = with_toleration(&bare).unwrap();
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0].key.as_deref(), Some("gpu"));
        assert!(tolerates(&tolerations[1], &taint::managed("b1")));
        // From the webhook, or a pod that tolerates every taint: nothing to add.
        let mutated = pod(
            "spec: {schedulerName: b1, containers: [], tolerations: [{key: slinky.slurm.net/managed-node, operator: Equal, value: b1, effect: NoExecute}]}\n",
        );
        assert_eq!(with_toleration(&mutated), None);
        let everything =
            pod("spec: {schedulerName: b1, containers: [], tolerations: [{operator: Exists}]}\n");
        assert_eq!(with_toleration(&everything), None);
        assert!(needs_toleration(&bare));
        assert!(!needs_toleration(&mutated) && !needs_toleration(&everything));
    }
}
