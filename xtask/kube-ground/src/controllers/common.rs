//! What the stand-in controllers share: owner references, template hashes, pod predicates, the
//! field manager, and the loop that runs one reconcile function per object of a kind.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

pub const MANAGER: &str = "kube-ground-controllers";

/// Runs `reconcile` for every object of `K` when it or a pod or ReplicaSet it owns changes, and
/// every 10 s.
pub async fn run<K, F, Fut>(client: Client, name: &'static str, reconcile: F) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
    F: Fn(Arc<K>, Client) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    Controller::new(Api::<K>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .owns(
            Api::<ReplicaSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .run(
            move |obj, client: Arc<Client>| {
                let reconcile = reconcile.clone();
                async move {
                    reconcile(obj, (*client).clone())
                        .await
                        .map(|()| Action::requeue(Duration::from_secs(10)))
                        .map_err(Failed)
                }
            },
            move |obj, err, _| {
                tracing::warn!(controller = name, object = %obj.name_any(), "{:#}", err.0);
                Action::requeue(Duration::from_secs(2))
            },
            Arc::new(client),
        )
        .for_each(|_| futures::future::ready(()))
        .await;
    Ok(())
}

/// A reconcile error, as the Controller wants a std error.
#[derive(Debug)]
pub struct Failed(pub anyhow::Error);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Failed {}

/// A controller owner reference to `owner`.
pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    owner
        .controller_owner_ref(&())
        .map(|mut r| {
            r.block_owner_deletion = Some(true);
            r
        })
        .expect("objects read from the API server have a name and uid")
}

/// Whether `pod` is controlled by the object with `uid`.
pub fn owned_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// Pods that count as existing: not being deleted, not finished.
pub fn active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

pub fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A short stable hash of a pod template, as the `pod-template-hash` and revision labels carry.
pub fn template_hash(t: &PodTemplateSpec) -> String {
    let raw = serde_json::to_vec(t).unwrap_or_default();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in raw {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    for _ in 0..10 {
        out.push(alphabet[(h % alphabet.len() as u64) as usize] as char);
        h /= alphabet.len() as u64;
    }
    out
}

/// Pods in `ns` that `owner_uid` controls, among those its `selector` matches.
pub async fn owned_pods(
    client: &Client,
    ns: &str,
    owner_uid: &str,
    selector: Option<&LabelSelector>,
) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&selected(selector))
        .await?
        .items
        .into_iter()
        .filter(|p| owned_by(p, owner_uid))
        .collect())
}

/// A LIST of the pods `selector`'s `matchLabels` match (an owner's pods carry its selector's
/// labels), not of the whole namespace: a namespace of thousands of pods listed whole on every
/// resync kept the API server busy under the scale benches.
fn selected(selector: Option<&LabelSelector>) -> ListParams {
    let labels: Vec<String> = selector
        .and_then(|s| s.match_labels.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if labels.is_empty() {
        ListParams::default()
    } else {
        ListParams::default().labels(&labels.join(","))
    }
}

/// [`owned_pods`] of `owner`, after taking over the pods its `selector` matches that have no
/// controller (as kube-controller-manager's ControllerRefManager does: a workload deleted with
/// `propagationPolicy: Orphan` and made again finds its pods). Only `matchLabels` is read.
pub async fn owned_or_adopted_pods<K: Resource<DynamicType = ()>>(
    client: &Client,
    owner: &K,
    selector: Option<&LabelSelector>,
) -> anyhow::Result<Vec<Pod>> {
    let ns = owner.meta().namespace.clone().unwrap_or_default();
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let wanted = selector
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    let mut pods = Vec::new();
    for pod in api.list(&selected(selector)).await?.items {
        let orphan = !pod
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true));
        let matches =
            !wanted.is_empty() && wanted.iter().all(|(k, v)| pod.labels().get(k) == Some(v));
        if orphan && matches && pod.metadata.deletion_timestamp.is_none() {
            let mut refs = pod.owner_references().to_vec();
            refs.push(owner_ref(owner));
            let patch = serde_json::json!({"metadata": {
                "ownerReferences": refs,
                "resourceVersion": pod.metadata.resource_version,
            }});
            let adopted = api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
            match adopted {
                Ok(p) => pods.push(p),
                // Another writer changed it first: the next pass looks again.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        } else if owned_by(&pod, &uid) {
            pods.push(pod);
        }
    }
    Ok(pods)
}

/// A pod from a template, controlled by `owner`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner: OwnerReference,
    name: Option<String>,
    generate_name: Option<String>,
    extra_labels: BTreeMap<String, String>,
) -> Pod {
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.name = name;
    meta.generate_name = generate_name;
    meta.namespace = None;
    meta.owner_references = Some(vec![owner]);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(extra_labels);
    Pod {
        metadata: meta,
        spec: template.spec.clone(),
        status: None,
    }
}

/// Ignores "already exists" and "not found": another round already did it.
pub fn benign<T>(r: Result<T, kube::Error>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
