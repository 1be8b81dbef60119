//! Which resources refer to which: the mappers that turn a change of a referenced object (a
//! NodeSet, an Accounting, a Secret, a ConfigMap) into reconciles of the resources using it.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::crd::{Controller, NodeSet, RestApi};

/// The Controller a NodeSet belongs to.
pub fn nodeset_controller(ns: &NodeSet) -> Option<ObjectRef<Controller>> {
    let name = &ns.spec.controller_ref.name;
    let namespace = ns.namespace()?;
    (!name.is_empty()).then(|| ObjectRef::new(name).within(&namespace))
}

/// The Controller a RestApi belongs to.
pub fn restapi_controller(r: &RestApi) -> Option<ObjectRef<Controller>> {
    let name = &r.spec.controller_ref.name;
    let namespace = r.namespace()?;
    (!name.is_empty()).then(|| ObjectRef::new(name).within(&namespace))
}

/// Names of the Secrets a Controller reads.
pub fn controller_secrets(c: &Controller) -> Vec<&str> {
    [c.spec.slurm_key_ref.as_ref(), c.spec.jwt_key_ref()]
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect()
}

/// Names of the ConfigMaps a Controller mounts.
pub fn controller_config_maps(c: &Controller) -> Vec<&str> {
    let s = &c.spec;
    s.config_file_refs
        .iter()
        .chain(&s.prolog_script_refs)
        .chain(&s.epilog_script_refs)
        .chain(&s.prolog_slurmctld_script_refs)
        .chain(&s.epilog_slurmctld_script_refs)
        .map(|r| r.name.as_str())
        .chain(s.jwks_key_ref.as_ref().map(|r| r.name.as_str()))
        .collect()
}

/// The Controllers in `store` that read `secret`.
pub fn controllers_reading_secret(
    store: &Store<Controller>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<Controller>> {
    let (ns, name) = (secret.namespace(), secret.name_any());
    store
        .state()
        .iter()
        .filter(|c| c.namespace() == ns && controller_secrets(c).contains(&name.as_str()))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// The Controllers in `store` that mount `cm`.
pub fn controllers_mounting(
    store: &Store<Controller>,
    cm: &ConfigMap,
) -> Vec<ObjectRef<Controller>> {
    let (ns, name) = (cm.namespace(), cm.name_any());
    store
        .state()
        .iter()
        .filter(|c| c.namespace() == ns && controller_config_maps(c).contains(&name.as_str()))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}
