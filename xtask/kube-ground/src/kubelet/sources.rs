//! The ConfigMaps and Secrets running pods' volumes show, as a kubelet's watch-based cache
//! keeps them: one watch of each kind (cluster-wide) fills a store the pod workers read, and a
//! change of an object wakes the workers of the pods whose volumes show it, and only those,
//! which then write their volumes again ([`super::volumes::refresh`]). Nothing is read on a
//! timer. A pod's first setup reads its objects directly ([`super::refs::Refs::fetch`]): the
//! store may not have an object made just before the pod yet.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use super::refs::Refs;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ConfigMap,
    Secret,
}

/// The objects a pod's volumes show: its namespace, and the ConfigMaps and Secrets of its
/// configMap, secret and projected volumes (not those of its environment, read once).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    namespace: String,
    config_maps: BTreeSet<String>,
    secrets: BTreeSet<String>,
}

impl Mounts {
    pub fn of(pod: &Pod) -> Mounts {
        let mut m = Mounts {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            ..Mounts::default()
        };
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            if let Some(cm) = &v.config_map {
                m.config_maps.insert(cm.name.clone());
            }
            if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.as_ref()) {
                m.secrets.insert(name.clone());
            }
            for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
                if let Some(cm) = &source.config_map {
                    m.config_maps.insert(cm.name.clone());
                }
                if let Some(s) = &source.secret {
                    m.secrets.insert(s.name.clone());
                }
            }
        }
        m
    }

    fn is_empty(&self) -> bool {
        self.config_maps.is_empty() && self.secrets.is_empty()
    }

    fn shows(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        self.namespace == namespace
            && match kind {
                Kind::ConfigMap => self.config_maps.contains(name),
                Kind::Secret => self.secrets.contains(name),
            }
    }
}

/// The pods (by uid) a change of `kind` `namespace/name` wakes: those whose volumes show it.
pub fn woken<'a>(
    pods: impl IntoIterator<Item = (&'a String, &'a Mounts)>,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Vec<String> {
    let mut uids: Vec<String> = pods
        .into_iter()
        .filter(|(_, m)| m.shows(kind, namespace, name))
        .map(|(uid, _)| uid.clone())
        .collect();
    uids.sort();
    uids
}

type Registry = Arc<Mutex<HashMap<String, (Mounts, Arc<Notify>)>>>;

/// The stores and who to wake.
pub struct Sources {
    config_maps: Store<ConfigMap>,
    secrets: Store<Secret>,
    pods: Registry,
}

/// A pod's place in [`Sources`]: `notify` fires after a change of an object its volumes show
/// (a change before the worker waits is kept for it); dropping it forgets the pod.
pub struct Registration {
    pub notify: Arc<Notify>,
    uid: String,
    pods: Registry,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut pods) = self.pods.lock() {
            pods.remove(&self.uid);
        }
    }
}

impl Sources {
    /// Starts the two watches.
    pub fn start(client: &Client) -> Sources {
        let pods: Registry = Arc::default();
        let config_maps = watch::<ConfigMap>(client.clone(), Kind::ConfigMap, pods.clone());
        let secrets = watch::<Secret>(client.clone(), Kind::Secret, pods.clone());
        Sources {
            config_maps,
            secrets,
            pods,
        }
    }

    /// Registers `pod`, to be woken when an object its volumes show changes.
    pub fn register(&self, pod: &Pod) -> Registration {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let notify = Arc::new(Notify::new());
        let mounts = Mounts::of(pod);
        if !mounts.is_empty()
            && let Ok(mut pods) = self.pods.lock()
        {
            pods.insert(uid.clone(), (mounts, notify.clone()));
        }
        Registration {
            notify,
            uid,
            pods: self.pods.clone(),
        }
    }

    /// The ConfigMaps and Secrets `pod` refers to, as the stores have them (one the store does
    /// not have is missing, as one that cannot be read).
    pub fn refs(&self, pod: &Pod) -> Refs {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        Refs::from_objects(
            pod,
            |name| self.config_maps.get(&ObjectRef::new(name).within(ns)),
            |name| self.secrets.get(&ObjectRef::new(name).within(ns)),
        )
    }
}

/// A store of every `K`, filled by a watch that wakes the pods showing each object applied.
fn watch<K>(client: Client, kind: Kind, pods: Registry) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(Api::<K>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(move |event| {
            match event {
                // Each object again after a relist too: it may have changed meanwhile.
                Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                    let ns = obj.namespace().unwrap_or_default();
                    if let Ok(pods) = pods.lock() {
                        let all = pods.iter().map(|(uid, (m, _))| (uid, m));
                        for uid in woken(all, kind, &ns, &obj.name_any()) {
                            pods[&uid].1.notify_one();
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("watching {kind:?}s: {e}"),
            }
            futures::future::ready(())
        });
    tokio::spawn(stream);
    store
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_wakes_the_pods_whose_volumes_show_the_object() {
        let pod = |ns: &str, uid: &str, volumes: serde_json::Value, env_cm: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": uid, "namespace": ns, "uid": uid},
                "spec": {
                    "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": env_cm}}]}],
                    "volumes": volumes,
                }
            }))
            .unwrap()
        };
        let pods = [
            pod(
                "slurm",
                "ctld",
                serde_json::json!([
                    {"name": "etc", "projected": {"sources": [
                        {"configMap": {"name": "slurm-config"}},
                        {"secret": {"name": "slurm-key"}},
                    ]}},
                ]),
                "env-only",
            ),
            pod(
                "slurm",
                "worker",
                serde_json::json!([
                    {"name": "etc", "configMap": {"name": "slurm-config"}},
                    {"name": "key", "secret": {"secretName": "slurm-key"}},
                ]),
                "none",
            ),
            // The same names in another namespace are other objects.
            pod(
                "other",
                "elsewhere",
                serde_json::json!([{"name": "etc", "configMap": {"name": "slurm-config"}}]),
                "none",
            ),
            pod(
                "slurm",
                "scratch",
                serde_json::json!([{"name": "tmp", "emptyDir": {}}]),
                "slurm-config",
            ),
        ];
        let mounts: Vec<(String, Mounts)> = pods
            .iter()
            .map(|p| (p.metadata.uid.clone().unwrap(), Mounts::of(p)))
            .collect();
        assert!(mounts[3].1.is_empty(), "only an env reference: no volume");
        let wakes =
            |kind, ns: &str, name: &str| woken(mounts.iter().map(|(u, m)| (u, m)), kind, ns, name);
        for (kind, ns, name, expected) in [
            (
                Kind::ConfigMap,
                "slurm",
                "slurm-config",
                &["ctld", "worker"][..],
            ),
            (Kind::ConfigMap, "other", "slurm-config", &["elsewhere"]),
            (Kind::Secret, "slurm", "slurm-key", &["ctld", "worker"]),
            // A Secret of a ConfigMap's name, a ConfigMap only in env, another object: no one.
            (Kind::Secret, "slurm", "slurm-config", &[]),
            (Kind::ConfigMap, "slurm", "env-only", &[]),
            (Kind::ConfigMap, "slurm", "slurm-key", &[]),
            (Kind::ConfigMap, "slurm", "unrelated", &[]),
        ] {
            assert_eq!(wakes(kind, ns, name), expected, "{kind:?} {ns}/{name}");
        }
    }
}
