//! Pure rendering: a custom resource, plus the objects it references (fetched by the
//! reconciler), becomes the child objects it wants, named and labelled exactly as Slinky does.
//!
//! Nothing here talks to the API server. Every builder returns `k8s_openapi` objects with
//! namespace, labels and a controller owner reference to their custom resource set.
//!
//! Images: a user's container wrapper image always wins. When a manifest gives none we fall
//! back to the images of Slinky's `slurm` Helm chart (our decision; Slinky itself has no
//! default and relies on Helm): [`SLURMCTLD_IMAGE`] etc., and [`SIDECAR_IMAGE`] for the
//! logfile sidecar. The reconfigure sidecar runs `scontrol`, so it defaults to the slurmctld
//! image, as in the chart.

pub mod accounting;
pub mod controller;
pub mod hash;
pub mod labels;
pub mod loginset;
pub mod merge;
pub mod nodeset_pod;
pub mod restapi;
pub mod service_monitor;
pub mod slurm_conf;
pub mod token;
pub mod workers;

mod common;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

pub const SLURMCTLD_IMAGE: &str = "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04";
pub const SLURMD_IMAGE: &str = "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04";
pub const SLURMRESTD_IMAGE: &str = "ghcr.io/slinkyproject/slurmrestd:26.05-ubuntu26.04";
pub const SLURMDBD_IMAGE: &str = "ghcr.io/slinkyproject/slurmdbd:26.05-ubuntu26.04";
pub const LOGIN_IMAGE: &str = "ghcr.io/slinkyproject/login:26.05-ubuntu26.04";
pub const SIDECAR_IMAGE: &str = "docker.io/library/alpine:latest";

/// Why a custom resource could not be rendered. Never carries secret material.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Owner references need the UID the API server assigned.
    #[error("{kind} {name:?} has no metadata.uid/name yet")]
    NoOwnerRef { kind: String, name: String },
    /// A user-supplied wrapper did not fit the Kubernetes type after merging.
    #[error("invalid {what}: {source}")]
    Merge {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The resource lacks something the object needs (e.g. a key reference).
    #[error("{0}")]
    Invalid(String),
}

/// A controller owner reference (`controller: true`, `blockOwnerDeletion: true`) to `owner`.
pub fn controller_ref<K: Resource<DynamicType = ()>>(
    owner: &K,
) -> Result<OwnerReference, RenderError> {
    let mut r = owner
        .controller_owner_ref(&())
        .ok_or_else(|| no_owner_ref(owner))?;
    r.block_owner_deletion = Some(true);
    Ok(r)
}

/// A plain (non-controller) owner reference to `owner`.
pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Result<OwnerReference, RenderError> {
    owner.owner_ref(&()).ok_or_else(|| no_owner_ref(owner))
}

fn no_owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> RenderError {
    RenderError::NoOwnerRef {
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
    }
}

/// `maps` merged left to right (later wins).
pub(crate) fn merge_maps<'a>(
    maps: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in maps {
        out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    out
}

/// The custom resource's own annotations, minus kubectl's last-applied copy of it.
pub(crate) fn cr_annotations(meta: &ObjectMeta) -> BTreeMap<String, String> {
    let mut a = meta.annotations.clone().unwrap_or_default();
    a.remove(crate::keys::ANNOTATION_LAST_APPLIED);
    a
}

pub(crate) fn cr_labels(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// Object metadata of a child: name, namespace, labels, annotations and owner references.
/// Empty maps are left out so the applied object has no empty fields.
pub(crate) fn child_meta(
    name: impl Into<String>,
    namespace: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owners: Vec<OwnerReference>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.to_owned()),
        labels: non_empty(labels),
        annotations: non_empty(annotations),
        owner_references: (!owners.is_empty()).then_some(owners),
        ..Default::default()
    }
}

pub(crate) fn non_empty<K, V>(m: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!m.is_empty()).then_some(m)
}

#[cfg(test)]
pub(crate) mod test_support {
    use kube::Resource;
    use serde::de::DeserializeOwned;

    /// A custom resource in namespace `slurm` as read from the API server (with a UID).
    pub fn with_meta<K: Resource<DynamicType = ()> + DeserializeOwned>(
        name: &str,
        spec: serde_json::Value,
    ) -> K {
        serde_json::from_value(serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {
                "name": name,
                "namespace": "slurm",
                "uid": format!("uid-{name}"),
                "labels": {"team": "hpc"},
                "annotations": {
                    "note": "x",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                },
            },
            "spec": spec,
        }))
        .expect("test resource")
    }
}
