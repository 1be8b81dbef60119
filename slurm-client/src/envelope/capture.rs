//! Reading `errors[]`, `warnings[]` and `meta` in the same pass as the body's own type.
//!
//! [`capture`] wraps the top-level deserializer. When the body's type asks for a map (a
//! struct, `serde_json::Value`, `IgnoredAny`, …), the wrapper hands it the map's entries as
//! usual, except that the value of each envelope key is first read into a small
//! `serde_json::Value`, kept in a [`RawEnvelope`], and then given to the type from that copy.
//! Everything below the top level goes straight to the real deserializer, untouched.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use super::RawEnvelope;

/// Wraps `inner` so that the envelope keys of the top-level object land in `raw` while the
/// body's type deserializes from it.
pub(crate) fn capture<D>(inner: D, raw: &mut RawEnvelope) -> Capture<'_, D> {
    Capture { inner, raw }
}

pub(crate) struct Capture<'r, D> {
    inner: D,
    raw: &'r mut RawEnvelope,
}

/// Which envelope key a map value belongs to.
#[derive(Clone, Copy)]
enum Slot {
    Errors,
    Warnings,
    Meta,
}

impl Slot {
    fn of(key: &str) -> Option<Slot> {
        match key {
            "errors" => Some(Slot::Errors),
            "warnings" => Some(Slot::Warnings),
            "meta" => Some(Slot::Meta),
            _ => None,
        }
    }
}

/// Methods passed on unchanged: the body's type is not a map, so there is no envelope.
macro_rules! forward {
    ($($method:ident ( $($arg:ident : $ty:ty),* );)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* visitor)
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Capture<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let raw = self.raw;
        self.inner.deserialize_any(Wrap { visitor, raw })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let raw = self.raw;
        self.inner.deserialize_map(Wrap { visitor, raw })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let raw = self.raw;
        self.inner
            .deserialize_struct(name, fields, Wrap { visitor, raw })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let raw = self.raw;
        self.inner.deserialize_option(Wrap { visitor, raw })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let raw = self.raw;
        self.inner
            .deserialize_newtype_struct(name, Wrap { visitor, raw })
    }

    // `IgnoredAny` (e.g. a ping read only for its `meta`) must still see the envelope.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.deserialize_any(visitor)
    }

    forward! {
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The body type's visitor, given a capturing view of the top-level map.
struct Wrap<'r, V> {
    visitor: V,
    raw: &'r mut RawEnvelope,
}

/// Visits passed on unchanged.
macro_rules! pass {
    ($($method:ident ( $ty:ty );)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.visitor.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(Entries {
            map,
            raw: self.raw,
            pending: None,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Capture {
            inner: d,
            raw: self.raw,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Capture {
            inner: d,
            raw: self.raw,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(seq)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.visitor.visit_borrowed_bytes(v)
    }

    pass! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_byte_buf(Vec<u8>);
    }
}

/// The top-level map's entries, with envelope values copied aside on the way.
struct Entries<'r, A> {
    map: A,
    raw: &'r mut RawEnvelope,
    pending: Option<Slot>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Entries<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        // The few top-level keys are read as text to see whether they are envelope keys.
        let Some(key) = self.map.next_key::<String>()? else {
            return Ok(None);
        };
        self.pending = Slot::of(&key);
        seed.deserialize(key.into_deserializer()).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        let Some(slot) = self.pending.take() else {
            return self.map.next_value_seed(seed);
        };
        let value: serde_json::Value = self.map.next_value()?;
        let kept = match slot {
            Slot::Errors => &mut self.raw.errors,
            Slot::Warnings => &mut self.raw.warnings,
            Slot::Meta => &mut self.raw.meta,
        };
        *kept = value.clone();
        seed.deserialize(value).map_err(de::Error::custom)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde::de::IgnoredAny;

    use super::*;
    use crate::envelope::Envelope;

    const BODY: &str = r#"{
        "meta": {"slurm": {"release": "26.05.0", "cluster": "dev"}},
        "jobs": [{"job_id": 1}, {"job_id": 2}],
        "warnings": [{"description": "w", "source": "s"}],
        "errors": []
    }"#;

    fn read<T: serde::de::DeserializeOwned>(body: &str) -> (T, Envelope) {
        let mut raw = RawEnvelope::default();
        let mut de = serde_json::Deserializer::from_str(body);
        let value = T::deserialize(capture(&mut de, &mut raw)).unwrap();
        de.end().unwrap();
        (value, Envelope::from_raw(raw))
    }

    fn check(env: &Envelope) {
        assert_eq!(env.meta.release.as_deref(), Some("26.05.0"));
        assert_eq!(env.warnings[0].description.as_deref(), Some("w"));
        assert!(env.errors.is_empty());
    }

    #[test]
    fn a_struct_gets_its_fields_and_the_envelope_is_kept() {
        #[derive(Deserialize)]
        struct Jobs {
            jobs: Vec<Job>,
            meta: Option<serde_json::Value>,
            warnings: Option<Vec<serde_json::Value>>,
        }
        #[derive(Deserialize)]
        struct Job {
            job_id: u32,
        }
        let (jobs, env) = read::<Jobs>(BODY);
        assert_eq!(jobs.jobs[1].job_id, 2);
        assert_eq!(jobs.meta.unwrap()["slurm"]["cluster"], "dev");
        assert_eq!(jobs.warnings.unwrap().len(), 1);
        check(&env);
    }

    #[test]
    fn value_option_and_ignored_any_see_the_envelope() {
        let (value, env) = read::<serde_json::Value>(BODY);
        assert_eq!(value["warnings"][0]["source"], "s");
        assert_eq!(value["jobs"][0]["job_id"], 1);
        check(&env);
        let (_, env) = read::<IgnoredAny>(BODY);
        check(&env);
        let (value, env) = read::<Option<serde_json::Value>>(BODY);
        assert!(value.is_some());
        check(&env);
    }

    #[test]
    fn same_as_a_separate_parse() {
        let odd = r#"{"errors": ["plain text", {"error_number": 5}], "warnings": 3, "meta": 5}"#;
        let (_, captured) = read::<serde_json::Value>(odd);
        let parsed = Envelope::parse(odd.as_bytes());
        assert_eq!(captured.errors, parsed.errors);
        assert_eq!(captured.warnings, parsed.warnings);
        assert_eq!(captured.meta, parsed.meta);
    }

    #[test]
    fn non_objects_pass_through() {
        let (n, env) = read::<u32>("7");
        assert_eq!(n, 7);
        assert!(env.errors.is_empty());
        let (list, _) = read::<Vec<u8>>("[1, 2]");
        assert_eq!(list, [1, 2]);
        read::<()>("null");
    }
}
