//! Null means absent, at every depth of a spec or status.
//!
//! Slinky's Go types read a YAML null as the zero value, and Slinky's own `slurm` chart writes
//! empty lists as nulls (`configFileRefs:`). The API server prunes a null only where the CRD
//! does not mark the field `nullable`; where it does (as Slinky's CRDs do for those lists) the
//! null is stored, and every object can also come through an older CRD or straight to the
//! webhook. serde, however, refuses a null where it expects a list, map, struct, string or bool.
//!
//! Rather than a `deserialize_with` on each of a hundred fields (and the next one forgotten),
//! each spec and status type deserialises through [`null_means_absent!`]: the JSON is read as a
//! value, every `null` member of every object in it is dropped, and the derived deserialiser
//! runs on what is left. That covers the open objects too (`template.spec`, the container
//! wrappers): a null there means "not set" to Slinky's Go merge, and must not reach the pod we
//! build, where a null in a merge would delete what the operator set.

use serde_json::Value;

/// Drops every `null` member of every object in `value`, at every depth. Nulls inside lists
/// stay: they are list items, not absent fields.
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Reads `value` with `read` after [`drop_nulls`]; a null as a whole reads as `{}`.
pub fn read_without_nulls<T, E: serde::de::Error>(
    mut value: Value,
    read: impl FnOnce(Value) -> Result<T, serde_json::Error>,
) -> Result<T, E> {
    if value.is_null() {
        value = Value::Object(Default::default());
    }
    drop_nulls(&mut value);
    read(value).map_err(E::custom)
}

/// Implements `Serialize` and `Deserialize` for types whose derives carry
/// `#[serde(remote = "Self")]` (which turns the derived code into inherent `serialize` and
/// `deserialize` functions): serialising is the derived one, deserialising drops the nulls
/// first (see the module doc).
macro_rules! null_means_absent {
    ($($ty:ty),* $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let value = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
                $crate::crd::null::read_without_nulls(value, <$ty>::deserialize)
            }
        }
    )*};
}

pub(crate) use null_means_absent;

#[cfg(test)]
mod tests;
