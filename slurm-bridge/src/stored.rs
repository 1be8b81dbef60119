//! What the bridge's stores keep of a pod and of a node: everything its decisions and writes
//! read, and none of what they never do. The store holds every pod of the bridge's scheduler, bound or
//! not, so its size is what the bridge's memory grows with (kube-rs's optimization guide:
//! minimize what you store). Dropped: `managedFields`, kubectl's last-applied copy of the
//! object, the containers' all but their name, resources and restart policy (their commands,
//! environment, probes and mounts: an ML job's pod carries kilobytes of them), ephemeral
//! containers and the containers' statuses. Kept: metadata (labels, annotations, owners,
//! finalizers), the rest of the spec (scheduling constraints, volumes, overhead), and the
//! pod's phase and conditions. Of a node, its image list goes too (fifty images make ten
//! kilobytes a node). Nothing writes a stored object back whole: the bridge's writes are
//! patches of the fields they set.

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::ResourceExt as _;

/// kubectl's copy of the applied object (`kubectl apply` without server-side apply).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Trims `pod` to what the store keeps (`watcher(..).modify(trim)`).
pub fn trim(pod: &mut Pod) {
    kube_support::stores::drop_managed_fields(pod);
    pod.annotations_mut().remove(LAST_APPLIED);
    if let Some(spec) = pod.spec.as_mut() {
        let init = spec.init_containers.iter_mut().flatten();
        for container in spec.containers.iter_mut().chain(init) {
            *container = Container {
                name: std::mem::take(&mut container.name),
                resources: container.resources.take(),
                restart_policy: container.restart_policy.take(),
                ..Container::default()
            };
        }
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

/// Trims `node` to what the store keeps (`watcher(..).modify(trim_node)`).
pub fn trim_node(node: &mut Node) {
    kube_support::stores::drop_managed_fields(node);
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Requests, pod_needs};

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "train-0",
                "namespace": "ml",
                "labels": {"app": "train"},
                "annotations": {LAST_APPLIED: "{\"big\": true}", "slinky.slurm.net/account": "ml"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {
                "schedulerName": "slurm-bridge-scheduler",
                "nodeSelector": {"gpu": "a100"},
                "initContainers": [
                    {"name": "fetch", "image": "busybox", "command": ["wget", "x"],
                     "resources": {"requests": {"cpu": "4"}}},
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ],
                "containers": [{
                    "name": "main",
                    "image": "pytorch",
                    "command": ["torchrun"],
                    "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"requests": {"cpu": "2", "memory": "8Gi"},
                                  "limits": {"nvidia.com/gpu": "2"}}
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False"}],
                "containerStatuses": [{"name": "main", "image": "pytorch", "imageID": "",
                                       "ready": false, "restartCount": 0}]
            }
        }))
        .expect("a pod")
    }

    #[test]
    fn keeps_what_the_decisions_read() {
        let before = pod();
        let mut after = before.clone();
        trim(&mut after);
        assert_eq!(pod_needs(&after), pod_needs(&before));
        assert_eq!(Requests::of(&after), Requests::of(&before));
        assert_eq!(after.labels(), before.labels());
        assert_eq!(
            after.annotations().get("slinky.slurm.net/account"),
            Some(&"ml".to_owned())
        );
        let (spec, old) = (after.spec.as_ref().unwrap(), before.spec.as_ref().unwrap());
        assert_eq!(spec.node_selector, old.node_selector);
        assert_eq!(spec.volumes, old.volumes);
        assert_eq!(spec.scheduler_name, old.scheduler_name);
        let init = spec.init_containers.as_ref().unwrap();
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            after.status.as_ref().unwrap().conditions,
            before.status.unwrap().conditions
        );
    }

    #[test]
    fn drops_what_they_never_read() {
        let mut pod = pod();
        trim(&mut pod);
        assert!(pod.metadata.managed_fields.is_none());
        assert!(!pod.annotations().contains_key(LAST_APPLIED));
        let main = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(main.name, "main");
        assert!(main.image.is_none() && main.command.is_none() && main.env.is_none());
        assert!(main.volume_mounts.is_none());
        assert!(pod.status.unwrap().container_statuses.is_none());
    }
}
