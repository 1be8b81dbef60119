//! A Kubernetes operator that runs Slurm clusters from the custom resources of SchedMD's Slinky
//! `slurm-operator` (group `slinky.slurm.net`, version `v1beta1`): the same manifests work, and
//! the objects it makes look the same to the tools around them.
//!
//! The crate follows one shape: every decision is a pure function of what was observed
//! ([`render`] turns a resource into the child objects it wants, [`planner::plan`] decides
//! which worker pods to create, drain and delete), and the code that talks to the API server
//! or to Slurm ([`reconcile`]) only fetches, calls those functions and applies the result.
//!
//! | module | holds |
//! | --- | --- |
//! | [`crd`] | the six custom resources as Rust types; `slurm-operator crds` prints their CRDs |
//! | [`render`] | resource → desired child objects (StatefulSets, Deployments, Services, ConfigMaps, Secrets, pods, the slurm.conf text) |
//! | [`planner`] | the NodeSet decisions, pure: scale, victims, drain before delete, cordon, pod conditions, status |
//! | [`reconcile`] | the I/O: one reconciler per kind (the NodeSet's in `reconcile::nodeset` feeds [`planner`] and applies its plan), the watch cache they read, the shared context, server-side apply |
//! | [`keys`] | every label, annotation, finalizer and taint key |

pub mod crd;
pub mod keys;
pub mod leader;
pub mod planner;
pub mod reconcile;
pub mod render;
pub mod slurm;
pub mod telemetry;
pub mod webhook;
