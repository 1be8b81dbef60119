//! Prometheus exporter for Slurm through slurmrestd.
//!
//! One collection loop reads slurmrestd once per interval ([`collector`]); every scrape is
//! served from the last complete snapshot ([`snapshot`]), pre-rendered in the Prometheus
//! text format and in OpenMetrics ([`render`]).

pub mod auth;
pub mod catalogue;
pub mod collector;
pub mod config;
pub mod encoding;
pub mod family;
pub mod gzip;
pub mod http;
pub mod logging;
pub mod render;
pub mod serve;
pub mod slurm;
pub mod snapshot;
pub mod sources;
pub mod status;
