//! The per-cluster worker objects shared by all NodeSets of one Controller: the headless
//! Service `slurm-workers-<controller>` (so `<hostname>.slurm-workers-<controller>` resolves)
//! and the PodDisruptionBudget `slurm-workers-pdb-<controller>` protecting busy nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use serde_json::Map;

use super::common::{self, ServiceParts, service_port};
use super::labels::{self, Component};
use super::slurm_conf::SLURMD_PORT;
use super::{RenderError, child_meta, owner_ref};
use crate::crd::{Controller, NodeSet};

/// `slurm-workers-<controller>`.
pub fn service_name(controller: &str) -> String {
    format!("slurm-workers-{controller}")
}

/// `slurm-workers-pdb-<controller>`.
pub fn pdb_name(controller: &str) -> String {
    format!("slurm-workers-pdb-{controller}")
}

/// The DNS search domain of worker and login pods:
/// `slurm-workers-<controller>.<namespace>.svc.<cluster domain>`.
pub fn search_domain(controller: &str, namespace: &str, cluster_domain: &str) -> String {
    format!(
        "{}.{namespace}.svc.{cluster_domain}",
        service_name(controller)
    )
}

fn shared_labels(controller: &str) -> BTreeMap<String, String> {
    let mut l = labels::cluster_worker_selector(controller);
    l.insert(
        crate::keys::LABEL_COMPONENT.to_owned(),
        Component::Worker.component().to_owned(),
    );
    l
}

/// The cluster's worker Service and PDB. Each is owned (non-controller references, sorted
/// by name) by every live NodeSet in `nodesets` that names `controller`; with none, there is
/// nothing to own them and this is an error.
pub fn render(
    controller: &Controller,
    nodesets: &[NodeSet],
) -> Result<(Service, PodDisruptionBudget), RenderError> {
    let name = controller.name_any();
    let namespace = controller.namespace().unwrap_or_default();
    let mut members: Vec<&NodeSet> = nodesets
        .iter()
        .filter(|n| n.spec.controller_ref.name == name && n.metadata.deletion_timestamp.is_none())
        .collect();
    if members.is_empty() {
        return Err(RenderError::Invalid(format!(
            "no NodeSet of Controller {name:?} to own its worker Service"
        )));
    }
    members.sort_by_key(|n| n.name_any());
    let owners = members
        .into_iter()
        .map(owner_ref)
        .collect::<Result<Vec<_>, _>>()?;

    let service = common::service(ServiceParts {
        name: service_name(&name),
        namespace: &namespace,
        labels: shared_labels(&name),
        annotations: BTreeMap::new(),
        user_spec: &Map::new(),
        selector: labels::cluster_worker_selector(&name),
        port: service_port(Component::Worker.app(), SLURMD_PORT, None),
        headless: true,
        owners: owners.clone(),
    })?;

    let pdb = PodDisruptionBudget {
        metadata: child_meta(
            pdb_name(&name),
            &namespace,
            shared_labels(&name),
            BTreeMap::new(),
            owners,
        ),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (crate::keys::LABEL_POD_PROTECT.to_owned(), "true".to_owned()),
                    (crate::keys::LABEL_CLUSTER.to_owned(), name.clone()),
                ])),
                ..Default::default()
            }),
            max_unavailable: Some(IntOrString::Int(0)),
            ..Default::default()
        }),
        status: None,
    };
    Ok((service, pdb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;
    use serde_json::json;

    #[test]
    fn shared_service_and_pdb() {
        let ctrl: Controller = with_meta("slurm", json!({}));
        let nodesets: Vec<NodeSet> = vec![
            with_meta("gpu", json!({"controllerRef": {"name": "slurm"}})),
            with_meta("cpu", json!({"controllerRef": {"name": "slurm"}})),
            with_meta("x", json!({"controllerRef": {"name": "other"}})),
        ];
        let (svc, pdb) = render(&ctrl, &nodesets).unwrap();
        assert_eq!(svc.metadata.name.as_deref(), Some("slurm-workers-slurm"));
        let owners = svc.metadata.owner_references.as_ref().unwrap();
        let names: Vec<_> = owners
            .iter()
            .map(|o| (o.name.as_str(), o.controller))
            .collect();
        assert_eq!(names, [("cpu", None), ("gpu", None)]);
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("slurmd"), 6818));
        let sel = spec.selector.unwrap();
        assert_eq!(sel["app.kubernetes.io/name"], "slurmd");
        assert_eq!(sel["slinky.slurm.net/cluster"], "slurm");

        assert_eq!(
            pdb.metadata.name.as_deref(),
            Some("slurm-workers-pdb-slurm")
        );
        assert_eq!(pdb.metadata.owner_references.unwrap().len(), 2);
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(0)));
        let sel = spec.selector.unwrap().match_labels.unwrap();
        assert_eq!(sel["nodeset.slinky.slurm.net/pod-protect"], "true");
        assert_eq!(sel["slinky.slurm.net/cluster"], "slurm");

        assert!(render(&ctrl, &nodesets[2..]).is_err());
        assert_eq!(
            search_domain("slurm", "ns", "cluster.local"),
            "slurm-workers-slurm.ns.svc.cluster.local"
        );
    }
}
