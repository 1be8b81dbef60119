//! The storage objects the volume decisions ([`volumes`](crate::volumes)) read: claims,
//! PersistentVolumes and StorageClasses, kept by watches whose changes wake the unbound pods
//! that may wait on them; and the bridge's one write to them, a claim's selected node.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;

use crate::pods::FIELD_MANAGER;
use crate::scheduler::Wake;
use crate::volumes::{self, Objects, SELECTED_NODE, Volumes};

/// A watch that runs for ever.
pub type Watch = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The stores; clones share them.
#[derive(Clone)]
pub struct Storage {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
}

impl Objects for Storage {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(&ObjectRef::new(name).within(namespace))
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&ObjectRef::new(name))
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&ObjectRef::new(name))
    }
}

impl Storage {
    /// The stores, and the watches that fill them (to be run for ever): a claim's change wakes
    /// the pods of its namespace that use claims, a volume's or class's change those of every
    /// namespace (see [`Wake::Storage`]).
    pub fn watch(client: &Client, wake: UnboundedSender<Wake>) -> (Storage, Vec<Watch>) {
        let (claims, claim_watch) = follow::<PersistentVolumeClaim>(client, wake.clone(), true);
        let (volumes, volume_watch) = follow::<PersistentVolume>(client, wake.clone(), false);
        let (classes, class_watch) = follow::<StorageClass>(client, wake, false);
        let storage = Storage {
            claims,
            volumes,
            classes,
        };
        (storage, vec![claim_watch, volume_watch, class_watch])
    }

    /// Waits until each store holds its first listing.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.claims.wait_until_ready().await?;
        self.volumes.wait_until_ready().await?;
        self.classes.wait_until_ready().await
    }

    /// What `pod`'s claims allow now.
    pub fn assess(&self, pod: &Pod) -> Volumes {
        volumes::assess(pod, self)
    }
}

/// One kind's store and the watch that fills it and wakes the pods.
fn follow<K>(client: &Client, wake: UnboundedSender<Wake>, namespaced: bool) -> (Store<K>, Watch)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: 'static,
{
    let (store, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let events =
        watcher(api, watcher::Config::default()).modify(kube_support::stores::drop_managed_fields);
    let watch = reflector::reflector(writer, events)
        .default_backoff()
        .touched_objects()
        .for_each(move |object| {
            if let Ok(object) = object {
                let namespace = namespaced.then(|| object.namespace()).flatten();
                let _ = wake.send(Wake::Storage(namespace));
            }
            futures::future::ready(())
        });
    (store, Box::pin(watch))
}

/// Gives claim `name` of `namespace` the node its provisioner is to provision it for (a merge
/// patch of the one annotation, safe to repeat). A claim gone meanwhile counts as done: the
/// pod's next pass finds it missing.
pub async fn select_node(
    client: &Client,
    namespace: &str,
    name: &str,
    node: &str,
) -> kube::Result<()> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
