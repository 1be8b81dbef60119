//! Which pods make one Slurm job (a workload), and which object's annotations describe it.
//!
//! A coscheduling PodGroup (`scheduling.x-k8s.io/pod-group` label) or one group of a
//! LeaderWorkerSet is one job for all its pods (a gang: Slurm allocates all nodes or none).
//! Every other pod is a job of its own — a bare pod, a batch Job's pod, a JobSet's pod, a pod of
//! a ReplicaSet, Deployment or StatefulSet — with the job fields read from the highest owner
//! the bridge knows (see [`RootKind`]).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::keys;

/// One Slurm job's worth of pods.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    /// The pods' namespace.
    pub namespace: String,
    /// How the pods are grouped.
    pub group: Group,
    /// The pod's name, the PodGroup's name, or `<lws>-<group index>`.
    pub name: String,
}

/// How a workload's pods are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// One pod, one job.
    Pod,
    /// All pods labelled with one coscheduling PodGroup.
    PodGroup,
    /// All pods of one LeaderWorkerSet group.
    LeaderWorkerSet,
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.group {
            Group::Pod => "pod",
            Group::PodGroup => "podgroup",
            Group::LeaderWorkerSet => "leaderworkerset",
        };
        write!(f, "{kind} {}/{}", self.namespace, self.name)
    }
}

/// The workload a pod belongs to.
pub fn key_of(pod: &Pod) -> WorkloadKey {
    let namespace = pod.namespace().unwrap_or_default();
    let labels = pod.labels();
    if let Some(group) = labels.get(keys::POD_GROUP_LABEL).filter(|g| !g.is_empty()) {
        return WorkloadKey {
            namespace,
            group: Group::PodGroup,
            name: group.clone(),
        };
    }
    if let (Some(lws), Some(index)) = (
        labels.get(keys::LWS_NAME_LABEL),
        labels.get(keys::LWS_GROUP_INDEX_LABEL),
    ) {
        return WorkloadKey {
            namespace,
            group: Group::LeaderWorkerSet,
            name: format!("{lws}-{index}"),
        };
    }
    WorkloadKey {
        namespace,
        group: Group::Pod,
        name: pod.name_any(),
    }
}

/// The kinds whose annotations can describe a job, with their API coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootKind {
    /// `scheduling.x-k8s.io/v1alpha1` PodGroup (coscheduling plugin).
    PodGroup,
    /// `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet.
    LeaderWorkerSet,
    /// `jobset.x-k8s.io/v1alpha2` JobSet.
    JobSet,
    /// `batch/v1` Job.
    Job,
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` StatefulSet.
    StatefulSet,
}

impl RootKind {
    /// `(group, version, kind, plural)`.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            RootKind::PodGroup => ("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups"),
            RootKind::LeaderWorkerSet => (
                "leaderworkerset.x-k8s.io",
                "v1",
                "LeaderWorkerSet",
                "leaderworkersets",
            ),
            RootKind::JobSet => ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
            RootKind::Job => ("batch", "v1", "Job", "jobs"),
            RootKind::Deployment => ("apps", "v1", "Deployment", "deployments"),
            RootKind::ReplicaSet => ("apps", "v1", "ReplicaSet", "replicasets"),
            RootKind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
        }
    }

    /// The kind of an owner reference, when the bridge reads that kind.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<RootKind> {
        [
            RootKind::PodGroup,
            RootKind::LeaderWorkerSet,
            RootKind::JobSet,
            RootKind::Job,
            RootKind::Deployment,
            RootKind::ReplicaSet,
            RootKind::StatefulSet,
        ]
        .into_iter()
        .find(|k| {
            let (group, version, k_kind, _) = k.gvk();
            k_kind == kind && api_version == format!("{group}/{version}")
        })
    }
}

/// A reference to an object that may hold a workload's annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRef {
    /// Its kind.
    pub kind: RootKind,
    /// Its name (in the pod's namespace).
    pub name: String,
}

/// Where to look first for the workload's annotations, from the pod alone: the group object,
/// else the JobSet the pod's labels name, else the pod's controller. The caller follows the
/// controller chain further up (ReplicaSet → Deployment, Job → JobSet) with [`controller_of`].
pub fn first_root(pod: &Pod) -> Option<RootRef> {
    let labels = pod.labels();
    if let Some(group) = labels.get(keys::POD_GROUP_LABEL).filter(|g| !g.is_empty()) {
        return Some(RootRef {
            kind: RootKind::PodGroup,
            name: group.clone(),
        });
    }
    if let Some(lws) = labels.get(keys::LWS_NAME_LABEL) {
        return Some(RootRef {
            kind: RootKind::LeaderWorkerSet,
            name: lws.clone(),
        });
    }
    if let Some(jobset) = labels.get(keys::JOBSET_NAME_LABEL) {
        return Some(RootRef {
            kind: RootKind::JobSet,
            name: jobset.clone(),
        });
    }
    controller_of(pod.owner_references())
}

/// The controlling owner among `owners`, when it is a kind the bridge reads.
pub fn controller_of(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Option<RootRef> {
    let owner = owners.iter().find(|o| o.controller == Some(true))?;
    Some(RootRef {
        kind: RootKind::of_owner(&owner.api_version, &owner.kind)?,
        name: owner.name.clone(),
    })
}

/// What the bridge needs from a workload's root object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RootFacts {
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// A Job's `spec.activeDeadlineSeconds`.
    pub active_deadline_seconds: Option<i64>,
    /// A PodGroup's `spec.minMember`.
    pub min_member: Option<u32>,
    /// A LeaderWorkerSet's `spec.leaderWorkerTemplate.size`.
    pub group_size: Option<u32>,
    /// The PodGroup the pods name, when it does not exist (yet) or may not be read.
    pub missing_group: Option<String>,
}

impl RootFacts {
    /// The facts of a root object given as JSON (a `DynamicObject`'s data plus metadata).
    pub fn from_object(
        kind: RootKind,
        annotations: BTreeMap<String, String>,
        spec: &serde_json::Value,
    ) -> RootFacts {
        let int = |v: &serde_json::Value| v.as_i64();
        let mut facts = RootFacts {
            annotations,
            ..RootFacts::default()
        };
        match kind {
            RootKind::Job => facts.active_deadline_seconds = int(&spec["activeDeadlineSeconds"]),
            RootKind::PodGroup => {
                facts.min_member = int(&spec["minMember"]).and_then(|n| u32::try_from(n).ok())
            }
            RootKind::LeaderWorkerSet => {
                facts.group_size =
                    int(&spec["leaderWorkerTemplate"]["size"]).and_then(|n| u32::try_from(n).ok())
            }
            _ => {}
        }
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn grouping() {
        let bare = pod("metadata: {name: a, namespace: ns}\n");
        assert_eq!(key_of(&bare).group, Group::Pod);
        assert_eq!(first_root(&bare), None);

        let grouped = pod(
            "metadata: {name: a, namespace: ns, labels: {scheduling.x-k8s.io/pod-group: pg}}\n",
        );
        let key = key_of(&grouped);
        assert_eq!((key.group, key.name.as_str()), (Group::PodGroup, "pg"));
        assert_eq!(first_root(&grouped).unwrap().kind, RootKind::PodGroup);

        let lws = pod(
            "metadata: {name: a-1, namespace: ns, labels: {leaderworkerset.sigs.k8s.io/name: w, leaderworkerset.sigs.k8s.io/group-index: '2'}}\n",
        );
        let key = key_of(&lws);
        assert_eq!(
            (key.group, key.name.as_str()),
            (Group::LeaderWorkerSet, "w-2")
        );
    }

    #[test]
    fn owner_chain_roots() {
        let job_pod = pod(
            "metadata:\n  name: j-x\n  namespace: ns\n  ownerReferences:\n  - {apiVersion: batch/v1, kind: Job, name: j, uid: u, controller: true}\n",
        );
        assert_eq!(key_of(&job_pod).group, Group::Pod);
        assert_eq!(
            first_root(&job_pod),
            Some(RootRef {
                kind: RootKind::Job,
                name: "j".into()
            })
        );
        let unknown = pod(
            "metadata:\n  name: x\n  namespace: ns\n  ownerReferences:\n  - {apiVersion: example.com/v1, kind: Thing, name: t, uid: u, controller: true}\n",
        );
        assert_eq!(first_root(&unknown), None);
    }

    #[test]
    fn facts_from_specs() {
        let facts = RootFacts::from_object(
            RootKind::Job,
            BTreeMap::new(),
            &serde_json::json!({"activeDeadlineSeconds": 90}),
        );
        assert_eq!(facts.active_deadline_seconds, Some(90));
        let facts = RootFacts::from_object(
            RootKind::PodGroup,
            BTreeMap::new(),
            &serde_json::json!({"minMember": 2}),
        );
        assert_eq!(facts.min_member, Some(2));
    }
}
