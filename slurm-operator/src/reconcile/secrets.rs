//! Reading the keys the resources refer to (Secrets, ConfigMaps in the same namespace), with
//! errors that name the reference and never the value. ConfigMaps come from the cache; a
//! Secret's value is read by name, once per version ([`super::secret_values`]). A reference
//! that appears later wakes its resource through the watch of the Secrets' (or ConfigMaps')
//! metadata.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, SecretKeySelector};
use secrecy::SecretSlice;

use super::{Context, Error};

/// The bytes under `selector` in a Secret of `namespace`.
pub async fn key(
    ctx: &Context,
    namespace: &str,
    selector: &SecretKeySelector,
    field: &'static str,
) -> Result<SecretSlice<u8>, Error> {
    let secret = secret(ctx, namespace, &selector.name, field).await?;
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&selector.key))
        .map(|v| v.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&selector.key))
                .map(|v| v.clone().into_bytes())
        })
        .ok_or_else(|| {
            Error::InvalidReference(format!(
                "Secret {namespace}/{} (referenced as {field}) has no key {:?}",
                selector.name, selector.key
            ))
        })?;
    if value.is_empty() {
        return Err(Error::InvalidReference(format!(
            "key {:?} of Secret {namespace}/{} (referenced as {field}) is empty",
            selector.key, selector.name
        )));
    }
    Ok(SecretSlice::from(value))
}

/// The Secret `name` of `namespace`, or [`Error::MissingReference`].
pub async fn secret(
    ctx: &Context,
    namespace: &str,
    name: &str,
    field: &'static str,
) -> Result<Secret, Error> {
    read(ctx, namespace, name)
        .await?
        .map(|s| (*s).clone())
        .ok_or_else(|| Error::MissingReference {
            kind: "Secret",
            namespace: namespace.into(),
            name: name.into(),
            field,
        })
}

/// The Secret `name` of `namespace` if the watch knows it (its value read once per version).
pub async fn read(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<Secret>>, Error> {
    let cache = &ctx.cache;
    Ok(cache
        .secret_values
        .get(&ctx.client, &cache.secrets, namespace, name)
        .await?)
}

/// The ConfigMap `name` of `namespace`, or [`Error::MissingReference`].
pub fn config_map(
    ctx: &Context,
    namespace: &str,
    name: &str,
    field: &'static str,
) -> Result<ConfigMap, Error> {
    ctx.cache
        .config_maps
        .get(namespace, name)
        .map(|c| (*c).clone())
        .ok_or_else(|| Error::MissingReference {
            kind: "ConfigMap",
            namespace: namespace.into(),
            name: name.into(),
            field,
        })
}
