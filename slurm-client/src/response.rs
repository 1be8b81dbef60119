//! A decoded answer together with the warnings and meta that came with it.

use crate::envelope::{Meta, SlurmWarning};

/// A successful answer: the decoded value plus everything else slurmrestd said.
///
/// Warnings are never dropped; callers decide whether to log or show them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Response<T> {
    /// The decoded body.
    pub value: T,
    /// The answer's `warnings[]`.
    pub warnings: Vec<SlurmWarning>,
    /// What the answer's `meta` says about the server.
    pub meta: Meta,
    /// The HTTP status (2xx).
    pub status: u16,
}

impl<T> Response<T> {
    /// The decoded body, dropping warnings and meta.
    pub fn into_value(self) -> T {
        self.value
    }

    /// Transforms the value, keeping warnings, meta and status.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Response<U> {
        Response {
            value: f(self.value),
            warnings: self.warnings,
            meta: self.meta,
            status: self.status,
        }
    }
}
