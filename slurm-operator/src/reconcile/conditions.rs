//! Status conditions on the operator's own resources, written only when they change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use super::apply::FIELD_MANAGER;
use super::{Context, Error};

/// The condition every kind carries: did the last reconcile get through?
pub const SYNCED: &str = "Synced";

/// A condition to set: type, status, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// e.g. `Synced`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Human message.
    pub message: String,
}

impl Wanted {
    /// `Synced` from the outcome of a reconcile.
    pub fn synced(result: Result<(), &Error>) -> Wanted {
        match result {
            Ok(()) => Wanted {
                type_: SYNCED.into(),
                status: "True",
                reason: "Reconciled".into(),
                message: "all child objects are as specified".into(),
            },
            Err(e) => Wanted {
                type_: SYNCED.into(),
                status: "False",
                reason: e.event_reason().into(),
                message: e.to_string(),
            },
        }
    }
}

/// The conditions of `current` with `wanted` merged in (others kept); `None` when nothing changes.
pub fn merged(
    current: &[Condition],
    wanted: &[Wanted],
    generation: Option<i64>,
) -> Option<Vec<Condition>> {
    let mut out = current.to_vec();
    let mut changed = false;
    for w in wanted {
        let fresh = Condition {
            type_: w.type_.clone(),
            status: w.status.into(),
            reason: w.reason.clone(),
            message: w.message.clone(),
            observed_generation: generation,
            last_transition_time: Time(jiff::Timestamp::now()),
        };
        match out.iter_mut().find(|c| c.type_ == w.type_) {
            Some(c)
                if c.status == fresh.status
                    && c.reason == fresh.reason
                    && c.message == fresh.message
                    && c.observed_generation == generation => {}
            Some(c) => {
                let keep_time = c.status == fresh.status;
                let time = c.last_transition_time.clone();
                *c = fresh;
                if keep_time {
                    c.last_transition_time = time;
                }
                changed = true;
            }
            None => {
                out.push(fresh);
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// Sets `wanted` on `obj`'s `status.conditions` (a status-subresource merge patch), unless they
/// are already so.
pub async fn set<K>(ctx: &Context, obj: &K, wanted: &[Wanted]) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let value = serde_json::to_value(obj).unwrap_or_default();
    let current: Vec<Condition> = value
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let Some(conditions) = merged(&current, wanted, obj.meta().generation) else {
        return Ok(());
    };
    let namespace = obj.namespace().ok_or(Error::Unnamed)?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &obj.name_any(),
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(serde_json::json!({ "status": { "conditions": conditions } })),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_condition_is_not_rewritten_and_change_keeps_others() {
        let ok = Wanted::synced(Ok(()));
        let first = merged(&[], std::slice::from_ref(&ok), Some(1)).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(merged(&first, std::slice::from_ref(&ok), Some(1)), None);
        let other = Wanted {
            type_: "Other".into(),
            status: "True",
            reason: "R".into(),
            message: String::new(),
        };
        let two = merged(&first, &[other], Some(1)).unwrap();
        let failed = Wanted::synced(Err(&Error::InvalidSpec("bad".into())));
        let after = merged(&two, &[failed], Some(1)).unwrap();
        assert_eq!(after.len(), 2);
        assert_eq!(after[0].status, "False");
        assert_eq!(after[0].message, "invalid spec: bad");
    }
}
