//! Process plumbing that the workspace's Kubernetes binaries (`slurm-operator`, `slurm-bridge`;
//! `slurm-exporter` for its [`server`]) share; nothing in it knows about Slurm or about a
//! particular custom resource.
//!
//! | module | holds |
//! | --- | --- |
//! | [`client`] | the Kubernetes client, with a `User-Agent` naming the program |
//! | [`leader`] | leader election on a coordination.k8s.io Lease; losing it is meant to end the process |
//! | [`http`] | `/healthz`, `/readyz` and `/metrics` on one or two listeners, with the probe limits, draining on shutdown |
//! | [`logs`] | the global `tracing` subscriber: text or JSON on stderr, `RUST_LOG` |
//! | [`tls`] | a serving certificate from a cert dir (re-read when it changes) or made at start, and a TLS listener for axum |
//! | [`stores`] | what the reflector stores keep of an object (no `managedFields`) |
//! | [`shutdown`] | SIGTERM or SIGINT, how a pod or a terminal stops the process, and the [`shutdown::Shutdown`] trigger servers and leader election wait on |
//! | [`quantity`] | Kubernetes resource quantities (`500m`, `4Gi`) in their base unit |
//! | [`events`] | publishing an event on an object, never failing the caller |
//! | [`server`] | the hardened HTTP/1.1 server of every listener (webhooks, probes, the exporter): read timeouts, a request deadline, caps on connections, concurrency and body bytes, graceful drain |
//! | [`webhook`] | an admission webhook's HTTPS server (the hardened [`server`] with webhook limits), how the API server reaches it, and the `caBundle` of its configuration |

#![warn(missing_docs)]

pub mod client;
pub mod events;
pub mod http;
pub mod leader;
pub mod logs;
pub mod quantity;
pub mod server;
pub mod shutdown;
pub mod stores;
pub mod tls;
pub mod webhook;
