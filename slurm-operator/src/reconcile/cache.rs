//! The operator's cache, as controller-runtime's cached client is Slinky's: one watch per kind
//! and scope, its objects kept in a reflector store, and its events fanned out to every
//! reconciler that is woken by that kind. Reconcilers read these stores instead of the API
//! server, so a pass that finds nothing to change sends no request at all.
//!
//! Two rules keep the stores safe to decide on:
//! - **Synced before used.** [`Cache::ready`] waits for every store's initial listing, and the
//!   reconcilers start only after it: an empty store at startup is never taken for "no pods".
//!   A relist after a watch error swaps the new listing in whole, so a store never empties again.
//! - **A store change wakes after it lands.** An event reaches the subscribers only after the
//!   reflector applied it to the store (the objects of a listing once the whole listing is in),
//!   so a reconcile woken by a change reads a store that holds it.
//!
//! Secrets are the exception to "whole objects": their watch holds metadata only, and the
//! values of the few Secrets the operator reads are fetched by name
//! ([`super::secret_values`]), so that no Secret's value stays in memory unless it is read.
//!
//! What a store cannot give is the operator's own writes of a moment ago: a watch event may
//! still be on its way. Where a decision depends on those (which pods exist before creating,
//! draining or deleting one; a child's applied hash before a write; the Token's Secret before
//! a new token is minted; the LoginSet's host keys before they are generated), the store only
//! says whether there is work, and the work is decided again from a direct read.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt, reflector as reflect};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use super::Scope;
use super::secret_values::{LAST_APPLIED, SecretValues};
use crate::crd::{Accounting, Controller, LoginSet, NodeSet, RestApi, Token};
use crate::keys::LABEL_APP;
use crate::render::labels::Component;

/// One kind's store and the reconcilers woken by its changes.
pub struct Informer<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    subscribers: Arc<Mutex<Vec<mpsc::UnboundedSender<K>>>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            store: self.store.clone(),
            subscribers: self.subscribers.clone(),
        }
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// Follows `events` (a watcher stream) into a store, on a task of its own.
    fn start<S>(events: S) -> Informer<K>
    where
        S: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        let (store, writer) = reflector::store();
        let informer = Informer {
            store,
            subscribers: Arc::default(),
        };
        let subscribers = informer.subscribers.clone();
        tokio::spawn(async move {
            let mut listing = Vec::new();
            let mut events = std::pin::pin!(reflect(writer, events.default_backoff()));
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Apply(obj) | Event::Delete(obj)) => send(&subscribers, [obj]),
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(obj)) => listing.push(obj),
                    // The store swaps the listing in at InitDone: only then are they readable.
                    Ok(Event::InitDone) => send(&subscribers, listing.drain(..)),
                    Err(e) => tracing::warn!(
                        kind = %K::kind(&()),
                        error = %e,
                        "watch failed; retrying with backoff (the store keeps its last listing)"
                    ),
                }
            }
        });
        informer
    }

    /// The store.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// The object `namespace`/`name`, if the store has it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&ObjectRef::new(name).within(namespace))
    }

    /// The objects of `namespace` that `keep` accepts.
    pub fn list(&self, namespace: &str, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        self.store
            .state_filter(|o| o.meta().namespace.as_deref() == Some(namespace) && keep(o))
    }

    /// Every object in the store now, then every change: a Controller's trigger stream. The
    /// current objects come first, so a reconciler started after the listing still sees them.
    pub fn subscribe(&self) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut subscribers = self.subscribers.lock().expect("informer subscribers");
            for obj in self.store.state() {
                let _ = tx.send((*obj).clone());
            }
            subscribers.push(tx);
        }
        futures::stream::unfold(rx, |mut rx| async move {
            let obj = rx.recv().await?;
            Some((Ok(obj), rx))
        })
    }

    async fn ready(&self) {
        // The writer lives as long as the watch task, which never ends.
        let _ = self.store.wait_until_ready().await;
    }
}

fn send<K: Clone>(
    subscribers: &Mutex<Vec<mpsc::UnboundedSender<K>>>,
    objs: impl IntoIterator<Item = K>,
) {
    let mut subscribers = subscribers.lock().expect("informer subscribers");
    for obj in objs {
        subscribers.retain(|tx| tx.send(obj.clone()).is_ok());
    }
}

/// The stores of one [`Scope`], and the Kubernetes nodes (cluster-scoped, one watch for all).
#[derive(Clone)]
pub struct Cache {
    pub controllers: Informer<Controller>,
    pub nodesets: Informer<NodeSet>,
    pub restapis: Informer<RestApi>,
    pub accountings: Informer<Accounting>,
    pub loginsets: Informer<LoginSet>,
    pub tokens: Informer<Token>,
    /// Every Secret of the scope, by metadata only (never a value): what wakes the reconcilers
    /// on a change of a key they read or a Secret they own, and each one's version.
    pub secrets: Informer<PartialObjectMeta<Secret>>,
    /// The values of the Secrets the reconcilers read, and only those (see
    /// [`super::secret_values`]).
    pub secret_values: SecretValues,
    /// Every ConfigMap of the scope: mounted references, and the ConfigMaps the operator makes.
    pub config_maps: Informer<ConfigMap>,
    /// Full objects: the LoginSet's status reads its Deployment's replicas.
    pub deployments: Informer<Deployment>,
    /// Children only applied by the operator: their metadata is enough (the applied hash).
    pub services: Informer<PartialObjectMeta<Service>>,
    pub stateful_sets: Informer<PartialObjectMeta<StatefulSet>>,
    pub pdbs: Informer<PartialObjectMeta<PodDisruptionBudget>>,
    /// NodeSet worker pods only (`app.kubernetes.io/name=slurmd`).
    pub pods: Informer<Pod>,
    /// NodeSet ControllerRevisions only (the same label).
    pub revisions: Informer<ControllerRevision>,
    pub nodes: Informer<Node>,
}

impl Cache {
    /// Starts the watches of `scope`; `nodes` is shared by every scope (see [`Cache::nodes`]).
    pub fn start(client: &Client, scope: &Scope, nodes: Informer<Node>) -> Cache {
        fn full<K>(api: Api<K>, config: watcher::Config) -> Informer<K>
        where
            K: Resource<DynamicType = ()>
                + Clone
                + Debug
                + DeserializeOwned
                + Send
                + Sync
                + 'static,
        {
            Informer::start(watcher(api, config).modify(kube_support::stores::drop_managed_fields))
        }
        let all = watcher::Config::default;
        let workers = || {
            watcher::Config::default().labels(&format!("{LABEL_APP}={}", Component::Worker.app()))
        };
        Cache {
            controllers: full(scope.api(client), all()),
            nodesets: full(scope.api(client), all()),
            restapis: full(scope.api(client), all()),
            accountings: full(scope.api(client), all()),
            loginsets: full(scope.api(client), all()),
            tokens: full(scope.api(client), all()),
            // Metadata only, and without the copy of the data `kubectl apply` leaves on it.
            secrets: Informer::start(
                watcher(scope.api::<PartialObjectMeta<Secret>>(client), all())
                    .modify(kube_support::stores::drop_managed_fields)
                    .modify(|s| {
                        if let Some(a) = s.metadata.annotations.as_mut() {
                            a.remove(LAST_APPLIED);
                        }
                    }),
            ),
            secret_values: SecretValues::default(),
            config_maps: full(scope.api(client), all()),
            deployments: full(scope.api(client), all()),
            // `Api<PartialObjectMeta<K>>` watches metadata only.
            services: full(scope.api::<PartialObjectMeta<Service>>(client), all()),
            stateful_sets: full(scope.api::<PartialObjectMeta<StatefulSet>>(client), all()),
            pdbs: full(
                scope.api::<PartialObjectMeta<PodDisruptionBudget>>(client),
                all(),
            ),
            pods: full(scope.api(client), workers()),
            revisions: full(scope.api(client), workers()),
            nodes,
        }
    }

    /// The one watch of the Kubernetes nodes, for [`Cache::start`].
    pub fn nodes(client: &Client) -> Informer<Node> {
        Informer::start(
            watcher(Api::all(client.clone()), watcher::Config::default())
                .modify(kube_support::stores::drop_managed_fields),
        )
    }

    /// Waits until every store holds its initial listing.
    pub async fn ready(&self) {
        futures::join!(
            self.controllers.ready(),
            self.nodesets.ready(),
            self.restapis.ready(),
            self.accountings.ready(),
            self.loginsets.ready(),
            self.tokens.ready(),
            self.secrets.ready(),
            self.config_maps.ready(),
            self.deployments.ready(),
            self.services.ready(),
            self.stateful_sets.ready(),
            self.pdbs.ready(),
            self.pods.ready(),
            self.revisions.ready(),
            self.nodes.ready(),
        );
    }
}

/// A child kind whose live metadata [`super::apply::apply`] finds in the cache.
pub trait Cached: Resource<DynamicType = ()> + Sized {
    /// The live object's metadata as the store has it.
    fn live(cache: &Cache, namespace: &str, name: &str) -> Option<ObjectMeta>;
}

macro_rules! cached {
    ($($kind:ty => $field:ident),* $(,)?) => {$(
        impl Cached for $kind {
            fn live(cache: &Cache, namespace: &str, name: &str) -> Option<ObjectMeta> {
                cache.$field.get(namespace, name).map(|o| o.meta().clone())
            }
        }
    )*};
}

cached! {
    Secret => secrets,
    ConfigMap => config_maps,
    Deployment => deployments,
    Service => services,
    StatefulSet => stateful_sets,
    PodDisruptionBudget => pdbs,
}
