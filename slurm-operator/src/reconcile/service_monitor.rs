//! A Controller's ServiceMonitor (see [`crate::render::service_monitor`]): applied while
//! `metrics.enabled` and `metrics.serviceMonitor.enabled` ask for it, deleted when they stop
//! asking. ServiceMonitors are not watched (their kind may not be installed, and a watch of a
//! missing kind fails for ever), so what was last applied or found absent is remembered for
//! [`RECHECK`]; after that the API server is asked again, which also restores one deleted by
//! hand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::apply::{DESIRED_HASH, FIELD_MANAGER, desired_hash};
use super::{Context, Error};
use crate::crd::Controller;
use crate::render::service_monitor::{api_resource, render};

/// How long a ServiceMonitor known to be as wanted is not asked for again.
pub const RECHECK: Duration = Duration::from_secs(600);

/// What the API server last showed or took for each Controller's ServiceMonitor: the hash
/// applied (`None`: absent), and when.
#[derive(Debug, Default, Clone)]
pub struct Known(Arc<Mutex<Seen>>);

/// (namespace, Controller) → (hash applied, or `None` for absent; when it was seen).
type Seen = HashMap<(String, String), (Option<String>, Instant)>;

impl Known {
    fn fresh(&self, key: &(String, String), hash: Option<&str>) -> bool {
        self.lock()
            .get(key)
            .is_some_and(|(h, at)| h.as_deref() == hash && at.elapsed() < RECHECK)
    }

    fn set(&self, key: (String, String), hash: Option<String>) {
        self.lock().insert(key, (hash, Instant::now()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Applies or deletes the ServiceMonitor of `controller`.
pub async fn sync(ctx: &Context, controller: &Controller) -> Result<(), Error> {
    let namespace = controller.namespace().ok_or(Error::Unnamed)?;
    let key = (namespace.clone(), controller.name_any());
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &api_resource());
    let Some(mut desired) = render(controller)? else {
        if ctx.service_monitors.fresh(&key, None) {
            return Ok(());
        }
        return delete(ctx, &api, controller, key).await;
    };
    let hash = desired_hash(&desired);
    if ctx.service_monitors.fresh(&key, Some(&hash)) {
        return Ok(());
    }
    let live = api.get_metadata_opt(&key.1).await.map_err(not_installed)?;
    // Another's ServiceMonitor of that name is not taken over: a user who may write Controllers
    // but not ServiceMonitors must not get to rewrite (and, with the Controller, delete) it.
    if live
        .as_ref()
        .is_some_and(|l| !owned_by(&l.metadata, controller))
    {
        return Err(Error::InvalidReference(format!(
            "ServiceMonitor {}/{} exists and is not this Controller's: rename or remove it, or turn \
             spec.metrics.serviceMonitor off",
            key.0, key.1
        )));
    }
    let carries = live
        .as_ref()
        .and_then(|l| l.metadata.annotations.as_ref())
        .and_then(|a| a.get(DESIRED_HASH))
        == Some(&hash);
    if !carries {
        desired
            .annotations_mut()
            .insert(DESIRED_HASH.into(), hash.clone());
        api.patch(
            &key.1,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await
        .map_err(not_installed)?;
    }
    ctx.service_monitors.set(key, Some(hash));
    Ok(())
}

/// Deletes the ServiceMonitor `N` if it is this Controller's (another's of that name stays).
async fn delete(
    ctx: &Context,
    api: &Api<DynamicObject>,
    controller: &Controller,
    key: (String, String),
) -> Result<(), Error> {
    let live = match api.get_metadata_opt(&key.1).await {
        Ok(live) => live,
        // Not installed: there is nothing to delete.
        Err(e) if is_not_found(&e) => None,
        Err(e) => return Err(e.into()),
    };
    if live
        .as_ref()
        .is_some_and(|l| owned_by(&l.metadata, controller))
    {
        match api.delete(&key.1, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    ctx.service_monitors.set(key, None);
    Ok(())
}

/// Whether `live` names `controller` as its controller owner.
fn owned_by(live: &ObjectMeta, controller: &Controller) -> bool {
    live.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == controller.uid().as_ref())
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A 404 on the kind's path means prometheus-operator's CRDs are not installed: said so, as a
/// spec the cluster cannot honour, rather than as an API failure.
fn not_installed(e: kube::Error) -> Error {
    if is_not_found(&e) {
        Error::InvalidSpec(
            "spec.metrics.serviceMonitor.enabled: the ServiceMonitor kind (monitoring.coreos.com/v1) \
             is not installed in this cluster; install prometheus-operator's CRDs, or turn it off"
                .into(),
        )
    } else {
        e.into()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn live(owner: Option<(&str, bool)>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|(uid, controller)| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(controller),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_a_monitor_this_controller_owns_is_its_own() {
        let mut c = Controller::new("slurm", Default::default());
        c.metadata.uid = Some("u1".into());
        assert!(owned_by(&live(Some(("u1", true))), &c));
        assert!(!owned_by(&live(Some(("u1", false))), &c));
        assert!(!owned_by(&live(Some(("u2", true))), &c));
        assert!(!owned_by(&live(None), &c));
    }
}
