//! Every label, annotation, finalizer and taint key the operator reads or writes, in one place:
//! Slinky's (which its tools and users depend on, so they must not change) and the few of our
//! own (`slurm-rs/…`).

pub const SLINKY_PREFIX: &str = "slinky.slurm.net/";

pub const LABEL_APP: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_CLUSTER: &str = "slinky.slurm.net/cluster";

pub const LABEL_POD_NAME: &str = "nodeset.slinky.slurm.net/pod-name";
pub const LABEL_POD_INDEX: &str = "nodeset.slinky.slurm.net/pod-index";
pub const LABEL_POD_HOSTNAME: &str = "nodeset.slinky.slurm.net/pod-hostname";
pub const LABEL_POD_PROTECT: &str = "nodeset.slinky.slurm.net/pod-protect";
pub const LABEL_SCALING_MODE: &str = "nodeset.slinky.slurm.net/scaling-mode";
pub const LABEL_CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
pub const LABEL_CONTROLLER_ACTIVE: &str = "controller.slinky.slurm.net/active";

pub const ANNOTATION_POD_CORDON: &str = "nodeset.slinky.slurm.net/pod-cordon";
pub const ANNOTATION_POD_DELETION_COST: &str = "nodeset.slinky.slurm.net/pod-deletion-cost";
pub const ANNOTATION_POD_DEADLINE: &str = "nodeset.slinky.slurm.net/pod-deadline";
pub const ANNOTATION_NODE_CORDON_REASON: &str = "nodeset.slinky.slurm.net/node-cordon-reason";
pub const ANNOTATION_HOSTNAME_OVERRIDE: &str = "nodeset.slinky.slurm.net/hostname-override";
pub const ANNOTATION_TOPOLOGY_SPEC: &str = "topology.slinky.slurm.net/spec";
pub const ANNOTATION_FEATURES_SPEC: &str = "features.slinky.slurm.net/spec";

pub const ANNOTATION_SLURM_CONFIG_HASH: &str = "slinky.slurm.net/slurm-config-hash";
pub const ANNOTATION_SLURM_KEY_HASH: &str = "slinky.slurm.net/slurm-key-hash";
pub const ANNOTATION_JWT_KEY_HASH: &str = "slinky.slurm.net/jwt-key-hash";
pub const ANNOTATION_SLURMDBD_CONF_HASH: &str = "slinky.slurm.net/slurmdbd-conf-hash";
pub const ANNOTATION_SSHD_CONF_HASH: &str = "slinky.slurm.net/sshd-conf-hash";
pub const ANNOTATION_SSSD_CONF_HASH: &str = "slinky.slurm.net/sssd-conf-hash";
pub const ANNOTATION_SSH_HOST_KEYS_HASH: &str = "slinky.slurm.net/ssh-host-keys-hash";
pub const ANNOTATION_DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// Ours, not Slinky's: the content hash of the controller's `configFileRefs` and script
/// ConfigMaps. Slinky does not roll slurmctld when those change; we do (unless in-place
/// reconfigure is on, where the sidecar notices the new files).
pub const ANNOTATION_CONFIG_FILES_HASH: &str = "slurm-rs/config-files-hash";
/// Ours: hash of the desired object, for the reconcilers' change detection.
pub const ANNOTATION_DESIRED_HASH: &str = "slurm-rs/desired-hash";
/// Ours: set beside `pod-cordon` when the operator itself cordoned the pod (to drain it before
/// a delete, or because its Kubernetes node was cordoned). `pod-cordon` alone cannot tell the
/// operator's cordon from an administrator's, and a pod condemned and then kept must get its
/// cordon lifted while an administrator's stays.
pub const ANNOTATION_CORDONED_BY_OPERATOR: &str = "slurm-rs/cordoned-by-operator";

/// kubectl's bookkeeping on the custom resource; copying it onto children would make kubectl
/// think they were applied from the parent's manifest.
pub(crate) const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

pub const FINALIZER_RESERVATION: &str = "nodeset.slinky.slurm.net/reservation";
pub const TAINT_KEY_WORKER: &str = "nodeset.slinky.slurm.net/worker";

/// Ours: on a Controller, RestApi, Accounting or LoginSet (value `restart`), lets the operator
/// take over a StatefulSet or Deployment that another operator (Slinky's) made, although its
/// own pod template or an immutable field differs and the pods restart; on a NodeSet, lets a
/// rolling update replace the pods of a revision another operator made. Without it such objects
/// are left running and the resource's `Adopted` condition names them.
pub const ANNOTATION_ADOPT: &str = "slurm-rs/adopt";
/// The value of [`ANNOTATION_ADOPT`] that allows the restart.
pub const ADOPT_RESTART: &str = "restart";
