//! The component label sets of every child object (the keys are in [`crate::keys`]).

use std::collections::BTreeMap;

use crate::keys::{LABEL_APP, LABEL_CLUSTER, LABEL_COMPONENT, LABEL_INSTANCE};

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
