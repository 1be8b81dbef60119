//! What the admission webhook does to a pod, as pure functions of the pod and the config.

use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::json;

use crate::annotations;
use crate::config::Config;
use crate::identity_policy;
use crate::keys;
use crate::taint;
use crate::workload;

/// The default scheduler's name: pods that name it (or none) are handed to the bridge.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The patch that hands a new pod to the bridge: its scheduler name (unless it names another
/// scheduler than the default), no preset node, and the toleration of the bridge's node taint.
pub fn mutate(pod: &Pod, scheduler: &str) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let Some(spec) = &pod.spec else {
        return ops;
    };
    let pointer = |p: &str| PointerBuf::parse(p).expect("a valid pointer");
    match spec.scheduler_name.as_deref() {
        None | Some("") => ops.push(PatchOperation::Add(AddOperation {
            path: pointer("/spec/schedulerName"),
            value: json!(scheduler),
        })),
        Some(DEFAULT_SCHEDULER) => ops.push(PatchOperation::Replace(ReplaceOperation {
            path: pointer("/spec/schedulerName"),
            value: json!(scheduler),
        })),
        Some(other) if other != scheduler => return Vec::new(),
        Some(_) => {}
    }
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        ops.push(PatchOperation::Remove(RemoveOperation {
            path: pointer("/spec/nodeName"),
        }));
    }
    let toleration = json!(taint::toleration(scheduler));
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let has = tolerations.iter().any(|t| {
        t.key.as_deref() == Some(keys::MANAGED_NODE_TAINT) && t.value.as_deref() == Some(scheduler)
    });
    if !has {
        if spec.tolerations.is_none() {
            ops.push(PatchOperation::Add(AddOperation {
                path: pointer("/spec/tolerations"),
                value: json!([toleration]),
            }));
        } else {
            ops.push(PatchOperation::Add(AddOperation {
                path: pointer("/spec/tolerations/-"),
                value: toleration,
            }));
        }
    }
    ops
}

/// Why a new pod of the bridge cannot be honoured, naming the field; `Ok` when it can.
pub fn validate_create(pod: &Pod) -> Result<(), String> {
    if pod.labels().contains_key(keys::JOB_ID_LABEL) {
        return Err(format!(
            "metadata.labels[{}]: set by the bridge once it submitted the pod's Slurm job; remove it",
            keys::JOB_ID_LABEL
        ));
    }
    if pod.annotations().contains_key(keys::SLURM_NODE_ANNOTATION) {
        return Err(format!(
            "metadata.annotations[{}]: set by the bridge from the Slurm allocation; remove it",
            keys::SLURM_NODE_ANNOTATION
        ));
    }
    let spec = pod.spec.clone().unwrap_or_default();
    if spec
        .topology_spread_constraints
        .as_ref()
        .is_some_and(|c| !c.is_empty())
    {
        return Err("spec.topologySpreadConstraints: Slurm places the pods; use the constraints annotation or a Slurm topology instead".into());
    }
    annotations::job_fields(&[pod.annotations()])
        .map_err(|e| format!("metadata.annotations[{}]: {}", e.field, e.message))?;
    crate::resources::pod_needs(pod).map_err(|e| format!("spec: {e}"))?;
    Ok(())
}

/// Why an update of a bridge pod cannot be allowed: once the pod runs, its job label and node
/// annotation are the link to its Slurm job and may not change.
pub fn validate_update(old: &Pod, new: &Pod) -> Result<(), String> {
    let running = old.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    if running {
        if old.labels().get(keys::JOB_ID_LABEL) != new.labels().get(keys::JOB_ID_LABEL) {
            return Err(format!(
                "metadata.labels[{}]: cannot change while the pod runs",
                keys::JOB_ID_LABEL
            ));
        }
        if old.annotations().get(keys::SLURM_NODE_ANNOTATION)
            != new.annotations().get(keys::SLURM_NODE_ANNOTATION)
        {
            return Err(format!(
                "metadata.annotations[{}]: cannot change while the pod runs",
                keys::SLURM_NODE_ANNOTATION
            ));
        }
    }
    annotations::job_fields(&[new.annotations()])
        .map_err(|e| format!("metadata.annotations[{}]: {}", e.field, e.message))?;
    Ok(())
}

/// Why what `pod`'s own annotations ask for is not allowed in `namespace` by the config's
/// identity policy, naming the annotation. The bridge's default partition counts only for a pod
/// that is its own workload: another's root object may still name a partition (the scheduler
/// checks the whole workload before it submits). On an update (`old` given) only a change of
/// those values is checked, so that a pod older than the policy can still be labelled by the
/// bridge and lose its finalizer.
pub fn validate_identity(
    config: &Config,
    namespace: &str,
    pod: &Pod,
    old: Option<&Pod>,
) -> Result<(), String> {
    if config.identity_policy.is_open() {
        return Ok(());
    }
    let named =
        |e: annotations::Invalid| format!("metadata.annotations[{}]: {}", e.field, e.message);
    let (fields, sources) =
        annotations::job_fields_with_sources(&[pod.annotations()]).map_err(named)?;
    if let Some(old) = old
        && annotations::job_fields(&[old.annotations()])
            .is_ok_and(|before| identity_policy::same_identity(&before, &fields))
    {
        return Ok(());
    }
    let default_partition = workload::first_root(pod)
        .is_none()
        .then_some(config.partition.as_str());
    config
        .identity_policy
        .check(namespace, &fields, &sources, default_partition)
        .map_err(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn paths(ops: &[PatchOperation]) -> Vec<String> {
        ops.iter()
            .map(|o| format!("{} {}", op_name(o), o.path()))
            .collect()
    }

    fn op_name(o: &PatchOperation) -> &'static str {
        match o {
            PatchOperation::Add(_) => "add",
            PatchOperation::Remove(_) => "remove",
            PatchOperation::Replace(_) => "replace",
            _ => "other",
        }
    }

    #[test]
    fn hands_default_pods_to_the_bridge() {
        let p = pod("spec: {containers: [], nodeName: n1, schedulerName: default-scheduler}\n");
        assert_eq!(
            paths(&mutate(&p, "slurm-bridge-scheduler")),
            [
                "replace /spec/schedulerName",
                "remove /spec/nodeName",
                "add /spec/tolerations"
            ]
        );
        let p = pod("spec: {containers: [], tolerations: [{key: a, operator: Exists}]}\n");
        assert_eq!(
            paths(&mutate(&p, "slurm-bridge-scheduler")),
            ["add /spec/schedulerName", "add /spec/tolerations/-"]
        );
        let other = pod("spec: {containers: [], schedulerName: volcano}\n");
        assert!(mutate(&other, "slurm-bridge-scheduler").is_empty());
    }

    #[test]
    fn refuses_what_it_cannot_honour_naming_the_field() {
        let labelled = pod(
            "metadata: {labels: {scheduler.slinky.slurm.net/slurm-jobid: '3'}}\nspec: {containers: []}\n",
        );
        assert!(
            validate_create(&labelled)
                .unwrap_err()
                .contains("slurm-jobid")
        );
        let claims = pod("spec: {containers: [], resourceClaims: [{name: gpu}]}\n");
        assert!(
            validate_create(&claims)
                .unwrap_err()
                .starts_with("spec: resourceClaims: ")
        );
        // A DRA extended resource, as Slinky's bridge examples request a GPU: a pod bound
        // with it would run without a device.
        let extended = pod(
            "spec: {containers: [{name: cuda, resources: {limits: {deviceclass.resource.kubernetes.io/gpu.nvidia.com: '1'}}}]}\n",
        );
        let err = validate_create(&extended).unwrap_err();
        assert!(
            err.starts_with(
                "spec: containers[cuda].resources.limits[deviceclass.resource.kubernetes.io/gpu.nvidia.com]"
            ),
            "{err}"
        );
        let bad = pod(
            "metadata: {annotations: {slurmjob.slinky.slurm.net/timelimit: 1h}}\nspec: {containers: []}\n",
        );
        let err = validate_create(&bad).unwrap_err();
        assert!(
            err.contains("slurmjob.slinky.slurm.net/timelimit") && err.contains("1h"),
            "{err}"
        );
        assert!(validate_create(&pod("spec: {containers: []}\n")).is_ok());
    }

    #[test]
    fn running_pods_keep_their_link() {
        let old = pod(
            "metadata: {labels: {scheduler.slinky.slurm.net/slurm-jobid: '3'}}\nstatus: {phase: Running}\n",
        );
        let new = pod("metadata: {labels: {scheduler.slinky.slurm.net/slurm-jobid: '4'}}\n");
        assert!(validate_update(&old, &new).is_err());
        let pending = pod("metadata: {}\nstatus: {phase: Pending}\n");
        assert!(validate_update(&pending, &new).is_ok());
    }

    #[test]
    fn the_identity_policy_on_create_and_update() {
        let config = Config::parse(
            "partition: slurm-bridge\nidentityPolicy:\n  default: {partitions: [gpu], accounts: [ml]}\n",
        )
        .unwrap();
        let bare = pod("spec: {containers: []}\n");
        // A bare pod that names no partition would get the bridge's default, which is not
        // allowed; one that names an allowed one is fine.
        let err = validate_identity(&config, "ns", &bare, None).unwrap_err();
        assert!(
            err.starts_with("metadata.annotations[slurmjob.slinky.slurm.net/partition]: unset, so the bridge's default partition \"slurm-bridge\""),
            "{err}"
        );
        let named = pod(
            "metadata: {annotations: {slurmjob.slinky.slurm.net/partition: gpu}}\nspec: {containers: []}\n",
        );
        assert!(validate_identity(&config, "ns", &named, None).is_ok());
        // A Job's pod: the Job may name the partition, the scheduler checks the whole workload.
        let owned = pod(
            "metadata: {ownerReferences: [{apiVersion: batch/v1, kind: Job, name: j, uid: u, controller: true}]}\nspec: {containers: []}\n",
        );
        assert!(validate_identity(&config, "ns", &owned, None).is_ok());
        // But a value the pod asks for itself is refused whatever its root.
        let owned_root = pod(
            "metadata: {annotations: {slurmjob.slinky.slurm.net/account: root}, ownerReferences: [{apiVersion: batch/v1, kind: Job, name: j, uid: u, controller: true}]}\nspec: {containers: []}\n",
        );
        let err = validate_identity(&config, "ns", &owned_root, None).unwrap_err();
        assert!(err.contains("account \"root\""), "{err}");

        // An update that leaves the identity as it was passes, even when the pod predates the
        // policy (the bridge labels it, and takes its finalizer off); one that changes it is
        // checked.
        let mut relabelled = owned_root.clone();
        relabelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert(keys::JOB_ID_LABEL.into(), "7".into());
        assert!(validate_identity(&config, "ns", &relabelled, Some(&owned_root)).is_ok());
        assert!(validate_identity(&config, "ns", &owned_root, Some(&owned)).is_err());

        // No policy: Slinky's behaviour.
        assert!(validate_identity(&Config::default(), "ns", &owned_root, None).is_ok());
    }
}
