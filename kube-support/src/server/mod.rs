//! An HTTP/1.1 server for axum routers that slow, greedy or hostile clients cannot starve, and
//! that stops gracefully: every listener of the workspace (the admission webhooks, the
//! health/metrics endpoints, the exporter) serves through [`serve`] with [`Limits`].
//!
//! The exporter reaches it through this crate too: it runs on Kubernetes as well, and the linker
//! drops the Kubernetes code it does not call.
//!
//! | module | holds |
//! | --- | --- |
//! | [`limits`] | the limits of one listener, and the webhook and probe presets with their reasons |
//! | `accept` | the accept loop: connection cap, TLS handshake deadline, header read timeout, drain |
//! | `stack` | the per-request layers: concurrency cap, request deadline, body pause, body cap |
//! | `budget` | the request-body bytes all requests of a listener may hold together |
//! | `shed` | answering 503 at once over the concurrency cap |
//! | [`fd_limit`] | the open-files limit raised, and the connection cap kept inside it |

mod accept;
mod budget;
pub mod fd_limit;
pub mod limits;
mod shed;
mod stack;
#[cfg(test)]
mod tests;

pub use accept::serve;
pub use limits::Limits;
