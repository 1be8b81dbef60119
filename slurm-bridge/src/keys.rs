//! The label, annotation, finalizer and taint keys the bridge shares with Slinky's slurm-bridge,
//! so that manifests and tools written for it keep working.

/// Prefix of the job-field annotations on a workload's root object (`slurmjob.slinky.slurm.net/qos`).
pub const JOB_ANNOTATION_PREFIX: &str = "slurmjob.slinky.slurm.net/";
/// The 0.x releases' spelling of the same annotations (`slinky.slurm.net/timelimit`).
pub const LEGACY_JOB_ANNOTATION_PREFIX: &str = "slinky.slurm.net/";

/// Pod label: the Slurm job id of the pod's placeholder job.
pub const JOB_ID_LABEL: &str = "scheduler.slinky.slurm.net/slurm-jobid";
/// Pod annotation: the Kubernetes node the pod was given from its job's allocation.
pub const SLURM_NODE_ANNOTATION: &str = "slinky.slurm.net/slurm-node";
/// Pod finalizer: held while the pod's Slurm job may still need cancelling.
pub const FINALIZER: &str = "scheduler.slinky.slurm.net/finalizer";
/// Toleration key (and node taint key) of nodes managed by the bridge.
pub const MANAGED_NODE_TAINT: &str = "slinky.slurm.net/managed-node";

/// Node label: the Slurm node name when it differs from the Kubernetes node name.
pub const SLURM_NODENAME_LABEL: &str = "slinky.slurm.net/slurm-nodename";
/// Node label: register this Kubernetes node in Slurm as an external node.
pub const EXTERNAL_NODE_LABEL: &str = "scheduler.slinky.slurm.net/external-node";
/// Node annotation: comma-separated partitions (node features) of an external node.
pub const EXTERNAL_NODE_PARTITIONS_ANNOTATION: &str =
    "scheduler.slinky.slurm.net/external-node-partitions";

/// Node annotation: the node's place in Slurm's dynamic topology (`topo-switch:s1,topo-block:b1`).
pub const TOPOLOGY_ANNOTATION: &str = "topology.slinky.slurm.net/spec";

/// Pod label naming a coscheduling PodGroup (`scheduling.x-k8s.io/v1alpha1`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// LeaderWorkerSet pod labels: the set's name and the group's index.
pub const LWS_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// See [`LWS_NAME_LABEL`].
pub const LWS_GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// JobSet pod label: the JobSet's name.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

/// Prefix of the drain reasons the bridge writes; other reasons belong to an admin.
pub const DRAIN_REASON_PREFIX: &str = "slurm-bridge: ";

/// Pod condition type carrying where the pod stands in Slurm (pending reason, job ended, …).
pub const SLURM_JOB_CONDITION: &str = "SlurmJob";
