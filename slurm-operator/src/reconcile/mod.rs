//! The reconcilers: one file per kind, each `fetch → render/plan → apply → status`, sharing a
//! [`Context`], one [`Error`] type, server-side [`apply`] and the run loop below.
//!
//! They fetch from the scope's [`cache`] (one watch per kind, shared by all reconcilers), not
//! from the API server: a pass over a resource whose children are as they should be sends no
//! request at all, and every write is skipped when the object already says what it would write
//! (children by their applied hash, status and conditions by comparison). Reads that stay
//! direct, each because a store may not hold the operator's own write of a moment ago:
//! - a child's metadata when the cached hash differs, right before the apply ([`apply`]);
//! - a NodeSet's pods and ControllerRevisions when the cached ones call for any change: the
//!   changes (creates, drains, deletes, status) are planned from the direct listing;
//! - the Token's Secret when the cached token would be replaced;
//! - the LoginSet's host-key Secret when the store has none, before keys are generated;
//! - Slurm node reads right before a drain, an undrain, a delete or a record prune (Slurm's
//!   side, [`crate::slurm`], is polled on its own).

pub mod accounting;
pub mod adopt;
pub mod apply;
pub mod cache;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod controller;
pub mod error;
pub mod loginset;
pub mod nodeset;
pub mod refs;
pub mod restapi;
pub mod secret_values;
pub mod secrets;
pub mod service_monitor;
pub mod token;
pub mod token_secret;

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

pub use context::Context;
pub use error::Error;

/// Which namespaces the operator watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    All,
    /// One namespace (`--namespaces` lists several: one scope each).
    Namespace(String),
}

impl Scope {
    /// The scopes for `--namespaces` (empty: all namespaces).
    pub fn from_list(namespaces: &[String]) -> Vec<Scope> {
        let listed: Vec<Scope> = namespaces
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(|n| Scope::Namespace(n.to_owned()))
            .collect();
        if listed.is_empty() {
            vec![Scope::All]
        } else {
            listed
        }
    }

    /// The namespaced API of `K` in this scope.
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self {
            Scope::All => Api::all(client.clone()),
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }
}

/// Runs `controller` with `reconcile`, counting each reconcile in the metrics under `name`,
/// reporting failures as Warning events on the object and retrying them after
/// [`Error::retry_after`].
pub async fn run<K, F, Fut>(
    name: &'static str,
    controller: Controller<K>,
    ctx: Arc<Context>,
    reconcile: F,
) where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    controller
        .run(
            move |obj: Arc<K>, ctx: Arc<Context>| {
                let reconcile = reconcile.clone();
                async move {
                    let started = Instant::now();
                    let result = reconcile(obj.clone(), ctx.clone()).await;
                    let label = match &result {
                        Ok(_) => "ok",
                        Err(e) => e.metric_label(),
                    };
                    ctx.metrics.reconciled(name, label, started.elapsed());
                    if let Err(e) = &result {
                        tracing::warn!(
                            controller = name,
                            namespace = obj.namespace().unwrap_or_default(),
                            name = obj.name_any(),
                            error = %e,
                            "reconcile failed"
                        );
                        ctx.event(&*obj, true, e.event_reason(), "Reconcile", e.to_string())
                            .await;
                    }
                    result
                }
            },
            |_obj: Arc<K>, error: &Error, _ctx: Arc<Context>| Action::requeue(error.retry_after()),
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}
