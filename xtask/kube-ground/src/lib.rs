//! The Kubernetes test ground's own parts, used by the `kube-ground` binary and its tests.
//! Test-only: the project's operator and bridge never depend on this crate.

pub mod net;
pub mod runtime;
