//! What the operator tells about itself: its Prometheus metrics. The health and metrics
//! endpoints and the logs are [`kube_support::http`] and [`kube_support::logs`].

pub mod metrics;
mod objects;

pub use metrics::Metrics;
