//! Label, annotation, finalizer and toleration keys that Slinky's tools depend on, and the
//! component label sets of every child object.

use std::collections::BTreeMap;

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

/// kubectl's bookkeeping on the custom resource; copying it onto children would make kubectl
/// think they were applied from the parent's manifest.
pub(crate) const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

pub const FINALIZER_RESERVATION: &str = "nodeset.slinky.slurm.net/reservation";
pub const TAINT_KEY_WORKER: &str = "nodeset.slinky.slurm.net/worker";

/// The five kinds of Slurm daemon pod, with their `app.kubernetes.io/{name,component}` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Controller,
    RestApi,
    Accounting,
    Worker,
    Login,
}

impl Component {
    /// `app.kubernetes.io/name`, also the main container's and port's name.
    pub fn app(self) -> &'static str {
        match self {
            Component::Controller => "slurmctld",
            Component::RestApi => "slurmrestd",
            Component::Accounting => "slurmdbd",
            Component::Worker => "slurmd",
            Component::Login => "login",
        }
    }

    /// `app.kubernetes.io/component`.
    pub fn component(self) -> &'static str {
        match self {
            Component::Controller => "controller",
            Component::RestApi => "restapi",
            Component::Accounting => "accounting",
            Component::Worker => "worker",
            Component::Login => "login",
        }
    }
}

/// `app.kubernetes.io/{name,instance}`: what Deployments, StatefulSets and Services select on.
pub fn selector_labels(component: Component, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_APP.to_owned(), component.app().to_owned()),
        (LABEL_INSTANCE.to_owned(), instance.to_owned()),
    ])
}

/// The selector labels plus `app.kubernetes.io/component`.
pub fn component_labels(component: Component, instance: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(component, instance);
    labels.insert(LABEL_COMPONENT.to_owned(), component.component().to_owned());
    labels
}

/// A NodeSet's component labels plus `slinky.slurm.net/cluster=<controllerRef>`.
pub fn worker_labels(nodeset: &str, controller: &str) -> BTreeMap<String, String> {
    let mut labels = component_labels(Component::Worker, nodeset);
    labels.insert(LABEL_CLUSTER.to_owned(), controller.to_owned());
    labels
}

/// Selects every worker pod of one Slurm cluster (all its NodeSets).
pub fn cluster_worker_selector(controller: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_APP.to_owned(), Component::Worker.app().to_owned()),
        (LABEL_CLUSTER.to_owned(), controller.to_owned()),
    ])
}

/// Renders a label map as a selector string (`k=v,k2=v2`), as NodeSet `status.selector` wants.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_labels_carry_cluster() {
        let l = worker_labels("cpu", "slurm");
        assert_eq!(l[LABEL_APP], "slurmd");
        assert_eq!(l[LABEL_INSTANCE], "cpu");
        assert_eq!(l[LABEL_COMPONENT], "worker");
        assert_eq!(l[LABEL_CLUSTER], "slurm");
        assert_eq!(
            selector_string(&selector_labels(Component::Worker, "cpu")),
            "app.kubernetes.io/instance=cpu,app.kubernetes.io/name=slurmd"
        );
    }
}
