//! A workload (its pods and root object) → the placeholder Slurm job that stands for it.
//!
//! The job is an external job (`EXTERNAL_JOB`: Slurm allocates and accounts, launches
//! nothing); its `admin_comment` `{"pods":["<ns>/<name>",…]}` links it to its pods, which is how
//! a restarted bridge finds its jobs again.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use slurm_client::JobSubmission;

use crate::annotations::{self, Invalid};
use crate::config::Config;
use crate::decide::Gang;
use crate::resources::{self, PodNeeds};
use crate::workload::{Group, RootFacts, WorkloadKey};

/// Everything [`submission`] needs.
#[derive(Debug, Clone, Copy)]
pub struct Workload<'a> {
    /// Which workload.
    pub key: &'a WorkloadKey,
    /// Its pods, sorted by name.
    pub pods: &'a [&'a Pod],
    /// Its root object's facts (annotations, deadlines, gang size).
    pub root: &'a RootFacts,
}

/// The `admin_comment` linking a job to its pods and to the bridge that submitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminComment {
    /// `<namespace>/<name>` of each pod, sorted.
    pub pods: Vec<String>,
    /// The submitting bridge's `mcsLabel`. Slurm keeps a job's MCS label only with an
    /// `MCSPlugin`; the comment keeps it whatever the configuration, so a bridge knows its own
    /// jobs (to find them again after a restart, and to cancel orphans) without one. Absent in
    /// the comments of bridges before it, whose jobs are told by their MCS label alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
}

impl AdminComment {
    /// The comment of a job for `pods`, submitted by the bridge whose label is `bridge`.
    pub fn new(pods: &[&Pod], bridge: &str) -> AdminComment {
        let mut pods: Vec<String> = pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
            .collect();
        pods.sort();
        AdminComment {
            pods,
            bridge: Some(bridge.to_owned()),
        }
    }

    /// The comment of a bridge job, or `None` for any other text.
    pub fn parse(text: &str) -> Option<AdminComment> {
        serde_json::from_str(text).ok()
    }

    /// As Slurm stores it.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("strings serialize")
    }
}

/// How many pods a gang needs before its job is submitted: a PodGroup's `minMember`, a
/// LeaderWorkerSet group's size, one otherwise; unknown while the PodGroup is missing (a gang
/// is never submitted partially).
pub fn gang_size(key: &WorkloadKey, root: &RootFacts) -> Gang {
    match key.group {
        Group::Pod => Gang::Size(1),
        Group::PodGroup => match &root.missing_group {
            Some(why) => Gang::Unknown(format!(
                "{why}: the gang's Slurm job is submitted once it exists and minMember pods are here"
            )),
            None => Gang::Size(root.min_member.unwrap_or(1).max(1) as usize),
        },
        Group::LeaderWorkerSet => Gang::Size(root.group_size.unwrap_or(1).max(1) as usize),
    }
}

/// The job for `workload`, not using `excluded_nodes` (Slurm names of nodes Kubernetes cannot
/// use for it). Precedence: the config's defaults, then what the pods ask for, then the
/// annotations (the pods', then the root object's). Pods that request no memory get the
/// config's `defaultMemPerPod`; no CPU request leaves Slurm's one CPU per task. A job the
/// namespace's identity policy does not allow is an error naming the annotation.
pub fn submission(
    workload: Workload<'_>,
    config: &Config,
    excluded_nodes: Vec<String>,
) -> Result<JobSubmission, Invalid> {
    let pod_annotations: Vec<_> = workload.pods.iter().map(|p| p.annotations()).collect();
    let mut layers: Vec<_> = pod_annotations;
    layers.push(&workload.root.annotations);
    let (fields, sources) = annotations::job_fields_with_sources(&layers)?;
    // The effective values (every pod's and the root's annotations, the default partition): the
    // webhook saw one pod only, and may be off or older than the policy.
    config.identity_policy.check(
        &workload.key.namespace,
        &fields,
        &sources,
        Some(&config.partition),
    )?;

    let mut needs = PodNeeds::default();
    for pod in workload.pods {
        let pod_needs = resources::pod_needs(pod).map_err(|message| Invalid {
            field: format!("pod {}", pod.name_any()),
            message,
        })?;
        needs.cpus = needs.cpus.max(pod_needs.cpus);
        needs.memory_mb = needs.memory_mb.max(pod_needs.memory_mb);
        needs.gpus = needs.gpus.max(pod_needs.gpus);
    }
    let pods = workload.pods.len().max(1) as u32;
    let time_limit = fields.time_limit_minutes.or_else(|| {
        workload
            .root
            .active_deadline_seconds
            .filter(|s| *s > 0)
            .map(|s| ((s + 59) / 60).min(i64::from(u32::MAX)) as u32)
    });
    let gres = match (&fields.gres, needs.gpus) {
        (Some(gres), _) if gres.starts_with("gres/") => Some(gres.clone()),
        (Some(gres), _) => Some(format!("gres/{gres}")),
        (None, 0) => None,
        (None, n) => Some(format!("gres/gpu={n}")),
    };

    let mut job = JobSubmission::external_job()
        .name(fields.job_name.unwrap_or_else(|| workload.key.name.clone()))
        .partition(fields.partition.unwrap_or_else(|| config.partition.clone()))
        // One pod per node: Slurm hands out one node per pod of the gang.
        .min_nodes(fields.min_nodes.unwrap_or(pods))
        .max_nodes(fields.max_nodes.unwrap_or(pods))
        .tasks_per_node(1)
        .exclusive(fields.exclusive.unwrap_or(config.exclusive))
        .admin_comment(AdminComment::new(workload.pods, &config.mcs_label).to_text())
        .excluded_nodes(excluded_nodes)
        .working_directory("/tmp");
    if !config.mcs_label.is_empty() {
        job = job.mcs_label(config.mcs_label.clone());
    }
    // Unset when nothing asks for them: Slurm's defaults apply.
    job.account = fields.account;
    job.qos = fields.qos;
    job.reservation = fields.reservation;
    job.constraints = fields.constraints;
    job.licenses = fields.licenses;
    job.wckey = fields.wckey;
    job.priority = fields.priority;
    job.user_id = fields.user_id;
    job.group_id = fields.group_id;
    job.time_limit_minutes = time_limit;
    job.cpus_per_task = fields
        .cpus_per_task
        .or((needs.cpus > 0).then_some(needs.cpus));
    job.memory_per_node_mb = fields
        .memory_per_node_mb
        .or((needs.memory_mb > 0).then_some(needs.memory_mb))
        .or((config.default_mem_per_pod > 0).then_some(config.default_mem_per_pod));
    job.tres_per_node = gres;
    Ok(job)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::workload::key_of;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// The job for `pods` (the first one's workload) with the default config.
    fn job_for(
        pods: &[&Pod],
        root: &RootFacts,
        excluded: Vec<String>,
    ) -> Result<JobSubmission, Invalid> {
        let key = key_of(pods[0]);
        let workload = Workload {
            key: &key,
            pods,
            root,
        };
        submission(workload, &Config::default(), excluded)
    }

    #[test]
    fn bare_pod() {
        let p = pod(
            "metadata: {name: a, namespace: ns, annotations: {slurmjob.slinky.slurm.net/job-name: hello, slurmjob.slinky.slurm.net/exclusive: 'false'}}\nspec:\n  containers:\n  - {name: c, resources: {requests: {cpu: '1', memory: 64Mi}}}\n",
        );
        let root = RootFacts::default();
        let pods = [&p];
        let job = job_for(&pods, &root, vec!["n9".into()]).unwrap();
        assert!(job.external);
        assert_eq!(job.name.as_deref(), Some("hello"));
        assert_eq!(job.partition.as_deref(), Some("slurm-bridge"));
        assert_eq!(job.cpus_per_task, Some(1));
        assert_eq!(job.memory_per_node_mb, Some(64));
        assert_eq!((job.min_nodes, job.max_nodes), (Some(1), Some(1)));
        assert!(!job.exclusive);
        assert_eq!(job.mcs_label.as_deref(), Some("kubernetes"));
        assert_eq!(
            job.admin_comment.as_deref(),
            Some(r#"{"pods":["ns/a"],"bridge":"kubernetes"}"#)
        );
        assert_eq!(job.excluded_nodes, ["n9"]);
        assert_eq!(
            AdminComment::parse(job.admin_comment.as_deref().unwrap())
                .unwrap()
                .pods,
            ["ns/a"]
        );
    }

    #[test]
    fn a_pod_without_requests_gets_the_default_memory_not_the_whole_node() {
        let p = pod(
            "metadata: {name: a, namespace: ns, annotations: {slurmjob.slinky.slurm.net/exclusive: 'false'}}\nspec:\n  containers:\n  - {name: c, image: busybox}\n",
        );
        let root = RootFacts::default();
        let job = job_for(&[&p], &root, vec![]).unwrap();
        assert_eq!(job.memory_per_node_mb, Some(200));
        assert_eq!(job.cpus_per_task, None, "Slurm's one CPU per task");

        // The annotation still wins, and 0 in the config leaves it to the partition.
        let key = key_of(&p);
        let config = Config {
            default_mem_per_pod: 0,
            ..Config::default()
        };
        let workload = Workload {
            key: &key,
            pods: &[&p],
            root: &root,
        };
        assert_eq!(
            submission(workload, &config, vec![])
                .unwrap()
                .memory_per_node_mb,
            None
        );
        let annotated = pod(
            "metadata: {name: a, namespace: ns, annotations: {slurmjob.slinky.slurm.net/mem-per-node: 1Gi}}\nspec:\n  containers:\n  - {name: c, image: busybox}\n",
        );
        let job = job_for(&[&annotated], &root, vec![]).unwrap();
        assert_eq!(job.memory_per_node_mb, Some(1024));
    }

    #[test]
    fn gang_and_job_deadline() {
        let a = pod(
            "metadata: {name: b, namespace: ns, labels: {scheduling.x-k8s.io/pod-group: pg}}\nspec:\n  containers:\n  - {name: c, resources: {requests: {cpu: '3', nvidia.com/gpu: '2'}, limits: {nvidia.com/gpu: '2'}}}\n",
        );
        let b = pod(
            "metadata: {name: a, namespace: ns, labels: {scheduling.x-k8s.io/pod-group: pg}}\nspec:\n  containers:\n  - {name: c, resources: {requests: {cpu: '2'}}}\n",
        );
        let key = key_of(&a);
        let root = RootFacts {
            annotations: BTreeMap::from([(
                "slurmjob.slinky.slurm.net/account".into(),
                "physics".into(),
            )]),
            active_deadline_seconds: Some(61),
            min_member: Some(2),
            group_size: None,
            missing_group: None,
        };
        assert_eq!(gang_size(&key, &root), Gang::Size(2));
        let missing = RootFacts {
            missing_group: Some("PodGroup ns/pg does not exist (yet)".into()),
            ..RootFacts::default()
        };
        assert!(
            matches!(gang_size(&key, &missing), Gang::Unknown(why) if why.starts_with("PodGroup ns/pg does not exist"))
        );
        let pods = [&b, &a];
        let job = job_for(&pods, &root, vec![]).unwrap();
        assert_eq!(job.name.as_deref(), Some("pg"));
        assert_eq!((job.min_nodes, job.max_nodes), (Some(2), Some(2)));
        assert_eq!(job.cpus_per_task, Some(3));
        assert_eq!(job.tres_per_node.as_deref(), Some("gres/gpu=2"));
        assert_eq!(job.time_limit_minutes, Some(2));
        assert_eq!(job.account.as_deref(), Some("physics"));
        assert!(job.exclusive);
        assert_eq!(
            job.admin_comment.as_deref(),
            Some(r#"{"pods":["ns/a","ns/b"],"bridge":"kubernetes"}"#)
        );
    }

    #[test]
    fn bad_annotation_is_named() {
        let p = pod(
            "metadata: {name: a, namespace: ns, annotations: {slurmjob.slinky.slurm.net/timelimit: soon}}\n",
        );
        let root = RootFacts::default();
        let pods = [&p];
        let err = job_for(&pods, &root, vec![]).unwrap_err();
        assert_eq!(err.field, "slurmjob.slinky.slurm.net/timelimit");
    }

    #[test]
    fn the_identity_policy_applies_to_the_effective_values() {
        let config = Config::parse(
            "identityPolicy:\n  namespaces:\n    ns: {accounts: [ml], partitions: [gpu]}\n",
        )
        .unwrap();
        let p = pod(
            "metadata: {name: a, namespace: ns, annotations: {slurmjob.slinky.slurm.net/account: ml, slurmjob.slinky.slurm.net/partition: gpu}}\n",
        );
        let key = key_of(&p);
        let job = |root: &RootFacts, config: &Config| {
            submission(
                Workload {
                    key: &key,
                    pods: &[&p],
                    root,
                },
                config,
                vec![],
            )
        };
        assert!(job(&RootFacts::default(), &config).is_ok());
        // The root object's annotation wins over the pod's, and is what the policy judges.
        let root = RootFacts {
            annotations: BTreeMap::from([(
                "slurmjob.slinky.slurm.net/account".into(),
                "physics".into(),
            )]),
            ..RootFacts::default()
        };
        let err = job(&root, &config).unwrap_err();
        assert_eq!(err.field, "slurmjob.slinky.slurm.net/account");
        assert!(err.message.contains("\"physics\""), "{err}");
        // A pod naming no partition gets the config's, which must be allowed too.
        let bare = pod("metadata: {name: b, namespace: ns}\n");
        let key = key_of(&bare);
        let err = submission(
            Workload {
                key: &key,
                pods: &[&bare],
                root: &RootFacts::default(),
            },
            &config,
            vec![],
        )
        .unwrap_err();
        assert!(
            err.message.contains("default partition \"slurm-bridge\""),
            "{err}"
        );
        // Without a policy, no limits.
        assert!(job(&root, &Config::default()).is_ok());
    }
}
