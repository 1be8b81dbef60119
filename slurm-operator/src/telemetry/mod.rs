//! What the operator tells about itself: Prometheus metrics, health endpoints and logs.

pub mod http;
pub mod logs;
pub mod metrics;

pub use metrics::Metrics;
