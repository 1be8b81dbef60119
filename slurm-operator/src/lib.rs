//! A Kubernetes operator that runs Slurm clusters from the custom resources of SchedMD's Slinky
//! `slurm-operator` (group `slinky.slurm.net`, version `v1beta1`): the same manifests work, and
//! the objects it makes look the same to the tools around them.
//!
//! The crate follows one shape: every decision is a pure function of what was observed
//! ([`render`] turns a resource into the child objects it wants, [`nodeset::plan`] decides
//! which worker pods to create, drain and delete), and the code that talks to the API server
//! or to Slurm ([`reconcile`]) only fetches, calls those functions and applies the result.
//!
//! | module | holds |
//! | --- | --- |
//! | [`crd`] | the six custom resources as Rust types; `slurm-operator crds` prints their CRDs |
//! | [`render`] | resource → desired child objects (StatefulSets, Deployments, Services, ConfigMaps, Secrets, pods, the slurm.conf text) |
//! | [`nodeset`] | the NodeSet decisions: scale, victims, drain before delete, cordon, pod conditions, status |
//! | [`reconcile`] | one reconciler per kind, the shared context, server-side apply |

pub mod crd;
pub mod leader;
pub mod nodeset;
pub mod reconcile;
pub mod render;
pub mod slurm;
pub mod telemetry;
pub mod webhook;
