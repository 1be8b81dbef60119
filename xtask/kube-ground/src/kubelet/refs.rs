//! The ConfigMaps and Secrets a pod refers to (env, envFrom, volumes, projected volumes), read
//! before its containers are created, and taken from the kubelet's watched stores for its
//! volumes while it runs ([`super::sources`]). An absent object is simply not in the map:
//! whether that is an error depends on the `optional` flag where it is used.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::{Api, Client};

/// One object's keys and values.
pub type Data = BTreeMap<String, Vec<u8>>;

#[derive(Default)]
pub struct Refs {
    config_maps: BTreeMap<String, Data>,
    secrets: BTreeMap<String, Data>,
    /// PersistentVolumeClaim name → uid: a claim's volume belongs to that claim object, not to
    /// whichever claim had its name before.
    claims: BTreeMap<String, String>,
}

impl Refs {
    pub async fn fetch(client: &Client, pod: &Pod) -> Result<Refs> {
        let mut refs = Refs::fetch_objects(client, pod).await?;
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let claim_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(claim) = &v.persistent_volume_claim else {
                continue;
            };
            let name = &claim.claim_name;
            let pvc = claim_api
                .get_opt(name)
                .await
                .with_context(|| format!("reading persistentvolumeclaim {ns}/{name}"))?
                .with_context(|| format!("persistentvolumeclaim {ns}/{name} not found"))?;
            let uid = pvc.metadata.uid.unwrap_or_default();
            refs.claims.insert(name.clone(), uid);
        }
        Ok(refs)
    }

    /// The ConfigMaps and Secrets alone (no claims).
    async fn fetch_objects(client: &Client, pod: &Pod) -> Result<Refs> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (cms, secrets) = names(pod);
        let mut refs = Refs::default();
        let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for name in cms {
            if let Some(cm) = cm_api
                .get_opt(&name)
                .await
                .with_context(|| format!("reading configmap {ns}/{name}"))?
            {
                refs.config_maps.insert(name, config_map_data(&cm));
            }
        }
        let secret_api: Api<Secret> = Api::namespaced(client.clone(), ns);
        for name in secrets {
            if let Some(s) = secret_api
                .get_opt(&name)
                .await
                .with_context(|| format!("reading secret {ns}/{name}"))?
            {
                refs.secrets.insert(name, secret_data(&s));
            }
        }
        Ok(refs)
    }

    /// The ConfigMaps and Secrets `pod` refers to as `config_map` and `secret` give them (no
    /// claims): a running pod's volumes, from the kubelet's stores.
    pub fn from_objects<C, S>(
        pod: &Pod,
        config_map: impl Fn(&str) -> Option<C>,
        secret: impl Fn(&str) -> Option<S>,
    ) -> Refs
    where
        C: std::ops::Deref<Target = ConfigMap>,
        S: std::ops::Deref<Target = Secret>,
    {
        let (cms, secrets) = names(pod);
        let mut refs = Refs::default();
        for name in cms {
            if let Some(cm) = config_map(&name) {
                refs.config_maps.insert(name, config_map_data(&cm));
            }
        }
        for name in secrets {
            if let Some(s) = secret(&name) {
                refs.secrets.insert(name, secret_data(&s));
            }
        }
        refs
    }

    #[cfg(test)]
    pub fn with(config_maps: &[(&str, Data)], secrets: &[(&str, Data)]) -> Refs {
        Refs {
            config_maps: config_maps
                .iter()
                .map(|(n, d)| (n.to_string(), d.clone()))
                .collect(),
            secrets: secrets
                .iter()
                .map(|(n, d)| (n.to_string(), d.clone()))
                .collect(),
            claims: BTreeMap::new(),
        }
    }

    #[cfg(test)]
    pub fn with_claim(mut self, name: &str, uid: &str) -> Refs {
        self.claims.insert(name.into(), uid.into());
        self
    }

    /// The uid of claim `name`, read when the pod started.
    pub fn claim_uid(&self, name: &str) -> Option<&str> {
        self.claims.get(name).map(String::as_str)
    }

    pub fn config_map_data(&self, name: &str) -> Option<&Data> {
        self.config_maps.get(name)
    }

    pub fn secret_data(&self, name: &str) -> Option<&Data> {
        self.secrets.get(name)
    }

    /// A ConfigMap's values as text, for the environment.
    pub fn config_map(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.config_maps.get(name).map(text)
    }

    /// A Secret's values as text, for the environment.
    pub fn secret(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.secrets.get(name).map(text)
    }
}

fn config_map_data(cm: &ConfigMap) -> Data {
    let mut data: Data = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    data.extend(
        cm.binary_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone())),
    );
    data
}

fn secret_data(s: &Secret) -> Data {
    let mut data: Data = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    data.extend(
        s.string_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes())),
    );
    data
}

fn text(data: &Data) -> BTreeMap<String, String> {
    data.iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// The names of the ConfigMaps and Secrets `pod` refers to anywhere.
fn names(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let Some(spec) = &pod.spec else {
        return (cms, secrets);
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for from in c.env_from.iter().flatten() {
            if let Some(r) = &from.config_map_ref {
                cms.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_ref {
                secrets.insert(r.name.clone());
            }
        }
        for var in c.env.iter().flatten() {
            if let Some(src) = &var.value_from {
                if let Some(r) = &src.config_map_key_ref {
                    cms.insert(r.name.clone());
                }
                if let Some(r) = &src.secret_key_ref {
                    secrets.insert(r.name.clone());
                }
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            cms.insert(cm.name.clone());
        }
        if let Some(s) = &v.secret
            && let Some(name) = &s.secret_name
        {
            secrets.insert(name.clone());
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                cms.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                secrets.insert(s.name.clone());
            }
        }
    }
    (cms, secrets)
}
