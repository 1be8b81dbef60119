//! The integration tests, one binary (each file below used to be its own: linking the whole
//! client and kube stack into every one wrote 7 GiB and filled a CI machine's disk).
//! `cargo xtask test` still runs each module in a process of its own.

mod common;

mod accounting;
mod adoption;
mod chart;
mod chart_slurm;
mod claims;
mod cluster;
mod daemonset;
mod harness;
mod leader;
mod lifecycle;
mod loginset;
mod pinning;
mod scheduled_update;
mod token_secret;
mod topology;
mod webhook;
