//! The version-neutral operations: methods on [`Client`](crate::Client) that work the same
//! whichever REST version was negotiated.
//!
//! # The pattern (follow it when adding a domain, e.g. accounting under `/slurmdb/`)
//!
//! One file per domain (`jobs.rs`, `nodes.rs`, …), each in four parts:
//!
//! 1. **Methods on `Client`** (`impl Client { pub async fn list_jobs(…) }`): build the
//!    [`Request`](crate::Request) (paths and query parameters are the same in every
//!    version; `client.version().await?` gives the `v0.0.4x` segment), then hand it to the
//!    negotiated version with [`dispatch!`]:
//!    `dispatch!(self, "job listing", list(self, request))` calls `v0_0_42::list(…)` when
//!    v0.0.42 was negotiated, and returns [`Error::Unsupported`](crate::Error::Unsupported)
//!    when that version is not compiled in.
//! 2. **One conversion body for every version**, a `macro_rules!` (e.g. `jobs_version!`)
//!    that defines the per-version functions in terms of a few type *aliases* (`JobsResp`,
//!    `JobItem`, …). The generated types of the versions have the same field names, so the
//!    body is written once: it decodes with `client.request::<JobsResp>(request)` and
//!    converts field by field. Nested values are reached through fields only (never named),
//!    so v0.0.41 — whose spec inlines its schemas, giving every nested object its own type
//!    name — works with the same body. Helpers for the recurring shapes: [`noval!`] for
//!    `{set, infinite, number}`, [`strings`] for string lists (plain or newtype),
//!    [`wire`] to fill a request field of any `{set, infinite, number}` type.
//! 3. **One small module per version**, behind its cargo feature, holding only the type
//!    aliases (the generated names: `crate::v0_0_42::types::V0042OpenapiJobInfoResp`, …) and
//!    the body macro's invocation, plus any piece that really differs in that version.
//!    Operations a version lacks get stubs returning `Error::Unsupported` via
//!    [`unsupported!`].
//! 4. Model types live in [`crate::model`] (one file per domain), plain `serde::Serialize`
//!    data with no trace of the REST version.
//!
//! Errors Slurm reports with status 200 in a response-specific place (e.g. `status[]` of a
//! job kill) are turned into [`Error`](crate::Error)s here, so callers see one error type.

use serde::de::DeserializeOwned;

use crate::model::{Limit, Wire};

/// Calls `vX::$function(args…)` for the negotiated version `vX` (a module of that name must
/// exist next to the call), or returns `Error::Unsupported` for `$operation` when the
/// version is not compiled in.
macro_rules! dispatch {
    ($client:expr, $operation:expr, $function:ident ( $($arg:expr),* $(,)? )) => {{
        let negotiated = $client.negotiate().await?;
        #[allow(unreachable_patterns)]
        let result = match negotiated.version {
            #[cfg(feature = "v0_0_40")]
            $crate::ApiVersion::V0_0_40 => v0_0_40::$function($($arg),*).await,
            #[cfg(feature = "v0_0_41")]
            $crate::ApiVersion::V0_0_41 => v0_0_41::$function($($arg),*).await,
            #[cfg(feature = "v0_0_42")]
            $crate::ApiVersion::V0_0_42 => v0_0_42::$function($($arg),*).await,
            #[cfg(feature = "v0_0_43")]
            $crate::ApiVersion::V0_0_43 => v0_0_43::$function($($arg),*).await,
            #[cfg(feature = "v0_0_44")]
            $crate::ApiVersion::V0_0_44 => v0_0_44::$function($($arg),*).await,
            #[cfg(feature = "v0_0_45")]
            $crate::ApiVersion::V0_0_45 => v0_0_45::$function($($arg),*).await,
            version => Err($crate::Error::unsupported(
                $operation,
                version,
                negotiated.release.clone(),
            )),
        };
        result
    }};
}

/// Defines per-version stubs for operations a version does not have: each returns
/// `Error::Unsupported` naming the operation, the version and the release.
///
/// `unsupported! { create(spec: &ReservationSpec) -> Reservation = "reservation create"; }`
macro_rules! unsupported {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $out:ty = $operation:literal; )+) => {
        $(
            pub(super) async fn $name(
                client: &$crate::Client,
                $($arg: $ty),*
            ) -> Result<$out, $crate::Error> {
                $( let _ = $arg; )*
                Err(client.unsupported($operation).await)
            }
        )+
    };
}

/// Reads a generated `{set, infinite, number}` value (any version's type, `Option` or not)
/// as a [`Limit`](crate::Limit) of its number type.
macro_rules! noval {
    ($value:expr) => {
        $crate::ops::limit($value.map(|n| {
            (
                $crate::ops::Field::get(n.set),
                $crate::ops::Field::get(n.infinite),
                $crate::ops::Field::get(n.number),
            )
        }))
    };
}

mod accounting;
mod diag;
mod job_states;
mod jobs;
mod layout;
mod licenses;
mod nodes;
mod partitions;
mod reservations;
mod shares;

pub(crate) use jobs::listing_from_body;
pub(crate) use nodes::listing_from_body as nodes_from_body;

/// A generated field that may or may not be an `Option` (v0.0.40 has some plain ones).
pub(crate) trait Field<T> {
    fn get(self) -> Option<T>;
}

impl<T> Field<T> for Option<T> {
    fn get(self) -> Option<T> {
        self
    }
}

macro_rules! plain_field {
    ($($t:ty),*) => { $( impl Field<$t> for $t { fn get(self) -> Option<$t> { Some(self) } } )* };
}
plain_field!(bool, i64, f64, String);

/// The one item of a listing that `wanted` accepts, or [`Error::NotFound`] for `path`.
pub(crate) fn single<L, T>(
    response: crate::Response<L>,
    path: String,
    items: impl FnOnce(L) -> Vec<T>,
    wanted: impl Fn(&T) -> bool,
) -> Result<crate::Response<T>, crate::Error> {
    let status = response.status;
    let mut found = None;
    let response = response.map(|list| {
        let mut all = items(list);
        if let Some(i) = all.iter().position(&wanted) {
            found = Some(all.swap_remove(i));
        }
    });
    match found {
        Some(item) => Ok(response.map(|()| item)),
        None => Err(crate::Error::NotFound {
            method: crate::Method::GET,
            path,
            status,
            errors: Vec::new(),
        }),
    }
}

/// Turns a `Rejected` error that really means "no such object" into `NotFound`: slurmrestd
/// reports some unknown names through `errors[]` rather than with 404 (Slurm 24.11 answers
/// an unknown partition with 422 and error 9000 "Unable to find partition …"; every
/// release answers an unknown reservation or node with error 0, "No error").
pub(crate) fn rejected_as_not_found(
    err: crate::Error,
    means_missing: impl Fn(&crate::SlurmError) -> bool,
) -> crate::Error {
    match err {
        crate::Error::Rejected {
            method,
            path,
            status,
            errors,
        } if !errors.is_empty() && errors.iter().all(&means_missing) => crate::Error::NotFound {
            method,
            path,
            status,
            errors,
        },
        other => other,
    }
}

/// See [`noval!`].
pub(crate) fn limit<N>(parts: Option<(Option<bool>, Option<bool>, Option<N>)>) -> Limit<N> {
    match parts {
        Some((set, infinite, number)) => Limit::from_parts(set, infinite, number),
        None => Limit::Unset,
    }
}

/// A string list from a generated field: `Vec<String>` or a newtype around it.
pub(crate) fn strings<L: Into<Vec<String>>>(list: Option<L>) -> Vec<String> {
    list.map(Into::into).unwrap_or_default()
}

/// A generated id (`i64` on the wire) as `u32`; out-of-range values give `None`.
pub(crate) fn id32(value: Option<i64>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok())
}

/// Fills a request field of any generated `{set, infinite, number}` type from a
/// [`Limit`]. The generated types differ per version (and per field in v0.0.41) but all
/// accept the same JSON, so the value goes through JSON.
pub(crate) fn wire<T: DeserializeOwned, N: serde::Serialize + Default>(
    value: Limit<N>,
) -> Option<T> {
    let json = serde_json::to_value(Wire::from(value)).ok()?;
    serde_json::from_value(json).ok()
}

/// Re-reads a generated value as another shape through JSON. For the few places where
/// versions disagree on a field's type (a plain number in one, `{set, infinite, number}` in
/// another) or lack fields: the target is a private lenient struct (every field defaulted,
/// numbers as [`Flex`]) — used for small answers (diag, ping), never for job or node lists.
pub(crate) fn reshape<T: serde::Serialize, U: DeserializeOwned + Default>(value: &T) -> U {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .unwrap_or_default()
}

/// A number that is either plain or `{set, infinite, number}`, read as a [`Limit`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Flex(pub Limit<f64>);

impl<'de> serde::Deserialize<'de> for Flex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flex, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Plain(f64),
            NoVal {
                set: Option<bool>,
                infinite: Option<bool>,
                number: Option<f64>,
            },
            Other(serde::de::IgnoredAny),
        }
        Ok(Flex(match Raw::deserialize(d)? {
            Raw::Plain(n) => Limit::Value(n),
            Raw::NoVal {
                set,
                infinite,
                number,
            } => Limit::from_parts(set, infinite, number),
            Raw::Other(_) => Limit::Unset,
        }))
    }
}

impl Flex {
    /// As a whole non-negative number (0 when unset, infinite or negative).
    pub(crate) fn u64(self) -> u64 {
        self.0.value().filter(|n| *n >= 0.0).map_or(0, |n| n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noval_reads_option_and_plain_fields() {
        struct Plain {
            set: bool,
            infinite: bool,
            number: Option<i64>,
        }
        struct Optional {
            set: Option<bool>,
            infinite: Option<bool>,
            number: Option<i64>,
        }
        let plain = Some(Plain {
            set: true,
            infinite: false,
            number: Some(3),
        });
        assert_eq!(noval!(plain), Limit::Value(3));
        let optional = Some(Optional {
            set: Some(false),
            infinite: Some(true),
            number: None,
        });
        assert_eq!(noval!(optional), Limit::Infinite);
        let missing: Option<Optional> = None;
        assert_eq!(noval!(missing), Limit::Unset);
    }

    #[test]
    fn flex_reads_plain_and_noval_numbers() {
        let v: Vec<Flex> = serde_json::from_str(
            r#"[3, 2.5, {"set": true, "infinite": false, "number": 7}, {"set": false, "infinite": true}, "x"]"#,
        )
        .unwrap();
        assert_eq!(v[0].0, Limit::Value(3.0));
        assert_eq!(v[1].0, Limit::Value(2.5));
        assert_eq!(v[2].u64(), 7);
        assert_eq!(v[3].0, Limit::Infinite);
        assert_eq!(v[4].0, Limit::Unset);
    }

    #[test]
    fn wire_fills_any_noval_type() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct AnyNoVal {
            set: Option<bool>,
            infinite: Option<bool>,
            number: Option<i64>,
        }
        let v: Option<AnyNoVal> = wire(Limit::Value(30u32));
        assert_eq!(
            v,
            Some(AnyNoVal {
                set: Some(true),
                infinite: Some(false),
                number: Some(30)
            })
        );
    }
}
