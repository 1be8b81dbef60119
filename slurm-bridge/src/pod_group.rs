//! A coscheduling PodGroup's `status`, as the bridge (its scheduler) keeps it: the counts
//! scheduler-plugins' PodGroup controller writes (`scheduled`, `running`, `succeeded`, `failed`,
//! `occupiedBy`) and its phases, `Pending` → `Scheduling` → `Scheduled` → `Running` →
//! `Finished` or `Failed`. Pure; the scheduler writes it when it changes, unless the config's
//! `podGroupStatus` is off because scheduler-plugins' own controller runs in the cluster.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::Serialize;

use crate::workload::WorkloadKey;

/// The written part of a PodGroup's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// `Pending`, `Scheduling`, `Scheduled`, `Running`, `Finished` or `Failed`.
    pub phase: &'static str,
    /// Pods bound to a node.
    pub scheduled: u32,
    /// Pods running.
    pub running: u32,
    /// Pods that succeeded.
    pub succeeded: u32,
    /// Pods that failed.
    pub failed: u32,
    /// `<namespace>/<owner>` of the first pod's owners, sorted and joined by commas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occupied_by: Option<String>,
}

impl GroupStatus {
    /// Finished and Failed are final: the group's status is left alone after them.
    pub fn is_final(&self) -> bool {
        matches!(self.phase, "Finished" | "Failed")
    }
}

/// The status of a group of `min_member` whose pods (all that carry its label, sorted by name)
/// are `pods`.
pub fn status(pods: &[&Pod], min_member: u32) -> GroupStatus {
    let phase_of = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let count = |phase: &str| {
        pods.iter()
            .filter(|p| phase_of(p).as_deref() == Some(phase))
            .count() as u32
    };
    let scheduled = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count() as u32;
    let (running, succeeded, failed) = (count("Running"), count("Succeeded"), count("Failed"));
    let min = min_member.max(1);
    let phase = if succeeded >= min {
        "Finished"
    } else if failed > 0 && failed + running + succeeded >= min {
        "Failed"
    } else if running + succeeded >= min {
        "Running"
    } else if scheduled >= min {
        "Scheduled"
    } else if pods.len() as u32 >= min {
        "Scheduling"
    } else {
        "Pending"
    };
    let occupied_by = pods.first().and_then(|p| {
        let mut owners: Vec<String> = p
            .owner_references()
            .iter()
            .map(|o| format!("{}/{}", p.namespace().unwrap_or_default(), o.name))
            .collect();
        owners.sort();
        (!owners.is_empty()).then(|| owners.join(","))
    });
    GroupStatus {
        phase,
        scheduled,
        running,
        succeeded,
        failed,
        occupied_by,
    }
}

/// What the scheduler knows of each PodGroup: its `minMember` once read, and the status it last
/// wrote, so that an unchanged status is not written again.
#[derive(Debug, Default)]
pub struct Groups(Mutex<HashMap<WorkloadKey, Known>>);

#[derive(Debug, Default)]
struct Known {
    min_member: Option<u32>,
    written: Option<GroupStatus>,
}

impl Groups {
    /// The group's `minMember`, if read.
    pub fn min_member(&self, key: &WorkloadKey) -> Option<u32> {
        self.0.lock().expect("not poisoned").get(key)?.min_member
    }

    /// Notes the group's `minMember`.
    pub fn set_min_member(&self, key: &WorkloadKey, min_member: u32) {
        let mut groups = self.0.lock().expect("not poisoned");
        groups.entry(key.clone()).or_default().min_member = Some(min_member);
    }

    /// Whether `status` is worth writing: it differs from the last written one, and that one
    /// was not final.
    pub fn needs_write(&self, key: &WorkloadKey, status: &GroupStatus) -> bool {
        let groups = self.0.lock().expect("not poisoned");
        match groups.get(key).and_then(|k| k.written.as_ref()) {
            Some(written) => written != status && !written.is_final(),
            None => true,
        }
    }

    /// Notes what was written.
    pub fn written(&self, key: &WorkloadKey, status: GroupStatus) {
        let mut groups = self.0.lock().expect("not poisoned");
        groups.entry(key.clone()).or_default().written = Some(status);
    }

    /// Forgets a group none of whose pods is left.
    pub fn forget(&self, key: &WorkloadKey) {
        self.0.lock().expect("not poisoned").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Pod {
        let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
        serde_yaml::from_str(&format!(
            "metadata:\n  name: {name}\n  namespace: ns\n  ownerReferences:\n  - {{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u, controller: true}}\nspec:\n{node}  containers: []\nstatus: {{phase: {phase}}}\n"
        ))
        .unwrap()
    }

    fn phase(pods: &[Pod], min: u32) -> &'static str {
        let refs: Vec<&Pod> = pods.iter().collect();
        status(&refs, min).phase
    }

    #[test]
    fn phases_through_a_gangs_life() {
        let waiting = pod("a", None, "Pending");
        assert_eq!(phase(std::slice::from_ref(&waiting), 2), "Pending");
        let both_waiting = [waiting.clone(), pod("b", None, "Pending")];
        assert_eq!(phase(&both_waiting, 2), "Scheduling");
        let bound = [
            pod("a", Some("n1"), "Pending"),
            pod("b", Some("n2"), "Pending"),
        ];
        assert_eq!(phase(&bound, 2), "Scheduled");
        let running = [
            pod("a", Some("n1"), "Running"),
            pod("b", Some("n2"), "Running"),
        ];
        assert_eq!(phase(&running, 2), "Running");
        let one_done = [
            pod("a", Some("n1"), "Succeeded"),
            pod("b", Some("n2"), "Running"),
        ];
        assert_eq!(phase(&one_done, 2), "Running");
        let done = [
            pod("a", Some("n1"), "Succeeded"),
            pod("b", Some("n2"), "Succeeded"),
        ];
        assert_eq!(phase(&done, 2), "Finished");
        let failed = [
            pod("a", Some("n1"), "Failed"),
            pod("b", Some("n2"), "Running"),
        ];
        assert_eq!(phase(&failed, 2), "Failed");
    }

    #[test]
    fn counts_and_owner() {
        let pods = [
            pod("a", Some("n1"), "Running"),
            pod("b", Some("n2"), "Succeeded"),
            pod("c", None, "Pending"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = status(&refs, 2);
        assert_eq!(
            (s.scheduled, s.running, s.succeeded, s.failed),
            (2, 1, 1, 0)
        );
        assert_eq!(s.occupied_by.as_deref(), Some("ns/rs"));
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"phase": "Running", "scheduled": 2, "running": 1, "succeeded": 1, "failed": 0, "occupiedBy": "ns/rs"})
        );
        assert!(!s.is_final());
    }

    #[test]
    fn written_once_and_never_after_the_end() {
        let key = crate::workload::key_of(
            &serde_yaml::from_str::<Pod>(
                "metadata: {name: a, namespace: ns, labels: {scheduling.x-k8s.io/pod-group: pg}}\n",
            )
            .unwrap(),
        );
        let groups = Groups::default();
        let pods = [pod("a", Some("n1"), "Running")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let running = status(&refs, 1);
        assert!(groups.needs_write(&key, &running));
        groups.written(&key, running.clone());
        assert!(!groups.needs_write(&key, &running));
        let done = [pod("a", Some("n1"), "Succeeded")];
        let refs: Vec<&Pod> = done.iter().collect();
        let finished = status(&refs, 1);
        assert!(groups.needs_write(&key, &finished));
        groups.written(&key, finished);
        // The pods deleted afterwards: Finished stays.
        assert!(!groups.needs_write(&key, &status(&[], 1)));
    }
}
