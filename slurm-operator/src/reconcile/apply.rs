//! Writing child objects with server-side apply under one field manager, and only when the
//! desired object changed: a hash of what was last applied rides on the object, so a steady
//! state makes no writes at all (an unchanged server-side apply is still a write request).
//! The live hash is read from the cache, so a steady state makes no reads either; a hash that
//! differs there is read again from the API server before the write (the store may not hold
//! the operator's own apply of a moment ago yet).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fmt::Debug;

use super::cache::Cached;
use super::{Context, Error};

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "slurm-operator";

/// Annotation holding the hash of the desired object last applied (ours, not Slinky's).
pub const DESIRED_HASH: &str = "slurm-rs/desired-hash";

/// What [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The object did not exist and was created.
    Created,
    /// The object existed with another desired state and was patched.
    Updated,
    /// The object already carried this desired state: no request was sent.
    Unchanged,
}

/// The sha256 (hex) of an object's JSON form, without our hash annotation.
pub fn desired_hash<K: Serialize>(obj: &K) -> String {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if let Some(annotations) = value
        .pointer_mut("/metadata/annotations")
        .and_then(|a| a.as_object_mut())
    {
        annotations.remove(DESIRED_HASH);
    }
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}

/// Server-side applies `desired` (namespaced) unless the live object already carries its hash.
pub async fn apply<K>(ctx: &Context, mut desired: K) -> Result<Applied, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Cached
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let namespace = desired.namespace().ok_or(Error::Unnamed)?;
    let name = desired.meta().name.clone().ok_or(Error::Unnamed)?;
    let hash = with_hash(&mut desired);
    let cached = K::live(&ctx.cache, &namespace, &name);
    if carries(cached.as_ref(), &hash) {
        return Ok(Applied::Unchanged);
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    // Direct: the store may lag behind an apply of a moment ago (then nothing is written).
    let live = api.get_metadata_opt(&name).await?;
    if carries(live.as_ref().map(|l| &l.metadata), &hash) {
        return Ok(Applied::Unchanged);
    }
    if let Some(live) = &live {
        take_controller_ref(&api, &name, live, desired.meta()).await?;
    }
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body(&desired)?),
    )
    .await?;
    Ok(if live.is_some() {
        Applied::Updated
    } else {
        Applied::Created
    })
}

/// Creates `desired` (namespaced, with our hash annotation), failing if it exists: for an object
/// whose absence was the condition of writing it (a Token's Secret, see
/// [`super::token_secret`]), where an apply would take over one made in the meantime.
pub async fn create<K>(ctx: &Context, mut desired: K) -> Result<Applied, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let namespace = desired.namespace().ok_or(Error::Unnamed)?;
    with_hash(&mut desired);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..kube::api::PostParams::default()
    };
    api.create(&params, &desired).await?;
    Ok(Applied::Created)
}

/// `desired` with our hash annotation (see [`with_hash`]) as a server-side apply body.
pub(super) fn body<K: Resource<DynamicType = ()> + Serialize>(
    desired: &K,
) -> Result<serde_json::Value, Error> {
    let mut value = serde_json::to_value(desired).map_err(|e| Error::InvalidSpec(e.to_string()))?;
    // Server-side apply needs apiVersion and kind in the body; k8s-openapi types leave them out.
    value["apiVersion"] = K::api_version(&()).into();
    value["kind"] = K::kind(&()).into();
    Ok(value)
}

/// Sets our hash annotation on `desired` and returns the hash.
pub(super) fn with_hash<K: Resource + Serialize>(desired: &mut K) -> String {
    let hash = desired_hash(desired);
    desired
        .annotations_mut()
        .insert(DESIRED_HASH.into(), hash.clone());
    hash
}

/// An object another operator made may name another controller (Slinky makes a Token's Secret
/// the JWT key Secret's). Server-side apply would add ours beside it, and an object with two
/// controller references is invalid: the owner references become ours first.
async fn take_controller_ref<K>(
    api: &Api<K>,
    name: &str,
    live: &kube::api::PartialObjectMeta<K>,
    desired: &kube::api::ObjectMeta,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let controller = |refs: Option<&Vec<OwnerReference>>| {
        refs.into_iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
    };
    let wanted = controller(desired.owner_references.as_ref());
    let current = controller(live.metadata.owner_references.as_ref());
    if wanted.is_none() || current.is_none() || wanted == current {
        return Ok(());
    }
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(serde_json::json!({
            "metadata": { "ownerReferences": desired.owner_references }
        })),
    )
    .await?;
    Ok(())
}

fn carries(live: Option<&kube::api::ObjectMeta>, hash: &str) -> bool {
    live.and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(DESIRED_HASH))
        .is_some_and(|h| h == hash)
}
