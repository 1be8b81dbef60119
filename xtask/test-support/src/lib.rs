//! What the workspace's integration tests and benchmarks share (a dev-dependency only):
//! the local Slurm clusters, read from the env files `cargo xtask slurm up` writes, and the
//! Kubernetes test ground that `cargo xtask kube up` starts ([`ground`]), real Helm for the
//! charts ([`helm`]), and a real Prometheus on the ground ([`prometheus`]).

mod cluster;
mod env_file;
pub mod ground;
pub mod helm;
pub mod http;
pub mod prometheus;
pub mod rbac;

pub use cluster::{Cluster, clusters};
pub use env_file::read_env_file;

/// The project's one version (crates, images and charts carry it; `cargo xtask release` sets it).
pub const PROJECT_VERSION: &str = env!("CARGO_PKG_VERSION");
