//! The integration tests, one binary (each file below used to be its own: linking the whole
//! client and kube stack into every one wrote 7 GiB and filled a CI machine's disk).
//! `cargo xtask test` still runs each module in a process of its own.

mod common;
mod decoders;
mod support;

mod api_accounting;
mod api_cluster;
mod api_job_stream;
mod api_jobs;
mod api_nodes;
mod api_reconfigure;
mod api_tracking;
#[cfg(feature = "cli")]
mod cli;
#[cfg(any(feature = "v0_0_42", feature = "v0_0_43"))]
mod generated_decode;
mod golden;
mod job_stream_failures;
mod limits;
mod mutations;
mod secrets;
mod tls;
mod transport_cluster;
mod transport_failures;
