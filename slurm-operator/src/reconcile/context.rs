//! What every reconciler of one scope shares: the clients, and the scope's [`Cache`].

use std::sync::Arc;

use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, Resource};

use super::cache::Cache;
use crate::slurm::SlurmClusters;
use crate::telemetry::Metrics;

/// The reconcilers' shared state, one per scope (the clients inside are shared by all).
#[derive(Clone)]
pub struct Context {
    /// The API server.
    pub client: Client,
    /// Publishes events on the objects the operator acts on.
    pub recorder: Recorder,
    /// The operator's own metrics.
    pub metrics: Arc<Metrics>,
    /// One Slurm REST client per cluster.
    pub slurm: SlurmClusters,
    /// The cluster's DNS domain, e.g. `cluster.local`.
    pub cluster_domain: String,
    /// Kubernetes node condition types whose `True` conditions become the drain reason of a
    /// cordoned node's Slurm nodes (`--propagated-node-conditions`).
    pub propagated_node_conditions: Vec<String>,
    /// What the scope's watches hold; read instead of the API server (see [`super::cache`]).
    pub cache: Cache,
    /// The Controllers' ServiceMonitors as last applied or found absent.
    pub service_monitors: super::service_monitor::Known,
}

impl Context {
    /// A context for `client` and `cache`, reporting events as `slurm-operator`.
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        slurm: SlurmClusters,
        cluster_domain: String,
        cache: Cache,
    ) -> Context {
        let reporter = Reporter {
            controller: "slurm-operator".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            slurm,
            cluster_domain,
            propagated_node_conditions: Vec::new(),
            cache,
            service_monitors: Default::default(),
        }
    }

    /// Publishes an event on `obj`; a failure to publish is logged, never fatal.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        kube_support::events::publish(&self.recorder, obj, warning, reason, action, note).await
    }
}
