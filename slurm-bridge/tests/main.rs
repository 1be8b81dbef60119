//! The integration tests, one binary (each file below used to be its own: linking the whole
//! client and kube stack into every one wrote 7 GiB and filled a CI machine's disk).
//! `cargo xtask test` still runs each module in a process of its own.

mod common;

mod bridge;
mod chart;
mod gang;
mod ha;
mod old_slurm;
mod own_jobs;
mod qos;
mod volumes;
mod workloads;
