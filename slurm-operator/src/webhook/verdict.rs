//! What a validation decides ([`Verdict`]) and what it may look up in the cluster ([`Lookups`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The answer to one admission request: allowed or not, the reasons (each naming the field,
/// joined by `; `), and warnings shown to the client either way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub message: String,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn allow() -> Verdict {
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    }
}

/// Collects the errors and warnings of one validation.
#[derive(Default)]
pub(crate) struct Findings {
    errors: Vec<String>,
    warnings: Vec<String>,
}

impl Findings {
    /// `field: msg`, which denies the request.
    pub fn error(&mut self, field: impl Display, msg: impl Display) {
        self.errors.push(format!("{field}: {msg}"));
    }

    pub fn warn(&mut self, field: impl Display, msg: impl Display) {
        self.warnings.push(format!("{field}: {msg}"));
    }

    /// `field: field is immutable` when `old` is given and differs from `new`.
    pub fn immutable<T: PartialEq>(&mut self, field: &str, new: T, old: Option<T>) {
        if old.is_some_and(|old| old != new) {
            self.error(field, "field is immutable");
        }
    }

    pub fn non_empty(&mut self, field: &str, value: &str) {
        if value.is_empty() {
            self.error(field, "must not be empty");
        }
    }

    pub fn verdict(self) -> Verdict {
        Verdict {
            allowed: self.errors.is_empty(),
            message: self.errors.join("; "),
            warnings: self.warnings,
        }
    }
}

/// The result of looking one object up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<T> {
    Found(T),
    NotFound,
    /// The API server could not be asked or answered with an error; the text says why.
    Failed(String),
}

/// Objects of the namespace of the object under review that a validation needs, fetched by the
/// server before the (pure) validation runs (see [`super::lookup`]). A name missing from a map
/// was not looked up, which counts as a failed lookup: nothing passes unchecked without a word
/// (a rule that gates denies, one whose check the operator repeats warns).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lookups {
    /// ConfigMaps by name: their keys (`data` and `binaryData`).
    pub config_maps: BTreeMap<String, Lookup<BTreeSet<String>>>,
    /// Controllers by name (a NodeSet's: one found missing only warns).
    pub controllers: BTreeMap<String, Lookup<()>>,
    /// PersistentVolumeClaims by name: their `spec.accessModes`.
    pub claims: BTreeMap<String, Lookup<Vec<String>>>,
    /// Secrets by name: their metadata only (a Token's Secret: whose it is).
    pub secrets: BTreeMap<String, Lookup<ObjectMeta>>,
}

impl Lookups {
    pub(crate) fn get<'a, T>(
        map: &'a BTreeMap<String, Lookup<T>>,
        name: &str,
    ) -> std::borrow::Cow<'a, Lookup<T>>
    where
        T: Clone,
    {
        match map.get(name) {
            Some(l) => std::borrow::Cow::Borrowed(l),
            None => std::borrow::Cow::Owned(Lookup::Failed("it was not looked up".into())),
        }
    }
}
