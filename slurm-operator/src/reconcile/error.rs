//! The reconcilers' one error type. Each variant has a metric label, so that
//! `slurm_operator_reconcile_errors_total{kind=…}` tells failures apart without parsing text.

use std::time::Duration;

/// Why a reconcile did not finish. Messages name the object or reference that was wrong and
/// never carry secret material.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// slurmrestd refused or failed a request.
    #[error("Slurm REST API: {0}")]
    Slurm(#[from] slurm_client::Error),
    /// An object the resource refers to does not exist (yet).
    #[error("{kind} {namespace}/{name} (referenced as {field}) not found")]
    MissingReference {
        /// The kind looked for, e.g. `Secret`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Where the reference is, e.g. `spec.jwtKeyRef`.
        field: &'static str,
    },
    /// A referenced object exists but cannot be used as it is.
    #[error("{0}")]
    InvalidReference(String),
    /// The resource itself cannot be turned into child objects.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The resource cannot be turned into child objects.
    #[error("{0}")]
    Render(#[from] crate::render::RenderError),
    /// The object has no namespace or no name (never for objects read from the API server).
    #[error("object without namespace or name")]
    Unnamed,
}

impl Error {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Slurm(_) => "slurm",
            Error::MissingReference { .. } => "missing_reference",
            Error::InvalidReference(_) => "invalid_reference",
            Error::InvalidSpec(_) => "invalid_spec",
            Error::Render(_) => "render",
            Error::Unnamed => "unnamed",
        }
    }

    /// How long to wait before trying again: missing references and bad specs change only when
    /// a user acts (and a watch then wakes the reconciler), so they wait longer than transient
    /// API failures.
    pub fn retry_after(&self) -> Duration {
        match self {
            Error::Kube(_) | Error::Slurm(_) => Duration::from_secs(5),
            Error::MissingReference { .. } | Error::InvalidReference(_) => Duration::from_secs(30),
            Error::InvalidSpec(_) | Error::Render(_) | Error::Unnamed => Duration::from_secs(120),
        }
    }

    /// The event reason that reports this error on the object.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Error::MissingReference { .. } | Error::InvalidReference(_) => "ReferenceFailed",
            Error::InvalidSpec(_) | Error::Render(_) => "InvalidSpec",
            Error::Slurm(_) => "SlurmFailed",
            Error::Kube(_) | Error::Unnamed => "SyncFailed",
        }
    }
}
