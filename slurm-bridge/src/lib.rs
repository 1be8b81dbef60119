//! `slurm-bridge`: a Kubernetes scheduler that lets Slurm place pods. Each workload (a pod, or a
//! gang of pods) becomes one placeholder Slurm job; when Slurm allocates nodes to it, the bridge
//! binds the pods there and the kubelets run them. Compatible with SchedMD's Slinky
//! slurm-bridge (scheduler name, annotations, labels, config file); see the crate README.
//!
//! Layout: pure decisions ([`workload`], [`annotations`], [`identity_policy`], [`translate`],
//! [`feasible`], [`identify`], [`decide`], [`taint`], [`pod_group`], [`node_size`]) and the loops that feed and
//! apply them ([`scheduler`], [`members`], [`jobs`], [`nodes`], [`webhook`]).

pub mod annotations;
pub mod assumed;
pub mod config;
pub mod decide;
pub mod feasible;
pub mod identify;
pub mod identity_policy;
pub mod jobs;
pub mod keys;
pub mod members;
pub mod metrics;
pub mod node_selector;
pub mod node_size;
pub mod nodes;
pub mod pod_group;
pub mod pods;
pub mod queue;
pub mod resources;
pub mod roots;
pub mod scheduler;
pub mod slurm_nodes;
pub mod storage;
pub mod stored;
pub mod taint;
pub mod translate;
pub mod usage;
pub mod volumes;
pub mod webhook;
pub mod workload;
