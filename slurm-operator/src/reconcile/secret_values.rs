//! The values of the Secrets the operator reads, and only those. The scope's Secrets are
//! watched by metadata alone ([`super::cache::Cache::secrets`]): that wakes the reconcilers on
//! any change, names the owners and carries each Secret's `resourceVersion`, and holds no value
//! (a cluster-wide watch of whole Secrets would keep every Secret of the cluster in memory:
//! service-account tokens, TLS keys, Helm releases). A Secret a reconciler reads (a key it
//! refers to, the Token's own, the LoginSet's host keys) is fetched by name once and kept here
//! under its `resourceVersion`; it is fetched again only when the watch shows it changed, so a
//! steady state still reads nothing from the API server. Secrets need no label for this: the
//! user's and those Slinky made are read like the operator's own.
//!
//! Kept values go when their Secret is deleted or changes (found on the next read of any
//! Secret); a Secret no longer referred to is dropped once it changes or goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::api::PartialObjectMeta;
use kube::{Api, Client, Resource};

use super::cache::Informer;

/// The annotation `kubectl apply` leaves on an object: for a Secret, its whole data.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Read Secrets by namespace and name (each carries the `resourceVersion` it was read at).
type Read = HashMap<(String, String), Arc<Secret>>;

/// The Secrets read, shared by the reconcilers of a scope.
#[derive(Clone, Default)]
pub struct SecretValues {
    read: Arc<Mutex<Read>>,
}

impl SecretValues {
    /// The Secret `namespace`/`name` if the watch knows it: the kept value when the watch
    /// shows the version it was read at, else a fresh read (kept for the next time).
    pub async fn get(
        &self,
        client: &Client,
        watched: &Informer<PartialObjectMeta<Secret>>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Secret>>, kube::Error> {
        let key = (namespace.to_string(), name.to_string());
        let Some(meta) = watched.get(namespace, name) else {
            self.lock().remove(&key);
            return Ok(None);
        };
        if let Some(kept) = self.lock().get(&key)
            && kept.meta().resource_version == meta.metadata.resource_version
        {
            return Ok(Some(kept.clone()));
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let fresh = api.get_opt(name).await?.map(|s| Arc::new(strip(s)));
        let mut read = self.lock();
        // Whatever the watch shows deleted or changed since it was read goes now.
        read.retain(|(ns, n), kept| {
            watched
                .get(ns, n)
                .is_some_and(|m| m.metadata.resource_version == kept.meta().resource_version)
        });
        match &fresh {
            Some(secret) => read.insert(key, secret.clone()),
            None => read.remove(&key),
        };
        Ok(fresh)
    }

    /// How many Secrets' values are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Read> {
        // A panic while holding this lock leaves a consistent map (each step is one call).
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What is kept of a Secret: no managed fields, no copy of its data in an annotation.
fn strip(mut secret: Secret) -> Secret {
    secret.metadata.managed_fields = None;
    if let Some(a) = secret.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    secret
}
