//! An external node's size in Slurm follows its Kubernetes node: CPUs and memory.
//!
//! Slurm cannot change a registered node's CPUs or memory, so a node whose Kubernetes
//! allocatable CPUs or memory changed is drained with [`reason`], deleted once no job runs
//! there, and registered again with its new size (and its GPUs as they are then), as Slinky's
//! bridge does. GPUs alone do not make a node registered again: a Slurm without
//! `GresTypes=gpu` or a gres.conf line accepts a node line's GPU count and drops it, which no
//! listing tells apart from a count that changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kube_support::quantity;

use crate::keys;
use crate::resources::GPU_RESOURCES;

/// What an external node offers: whole CPUs, MiB of memory, GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size {
    pub cpus: u64,
    pub memory_mb: u64,
    pub gpus: u64,
}

impl Size {
    /// The size Slurm has for `node`.
    pub fn registered(node: &slurm_client::model::Node) -> Size {
        Size {
            cpus: u64::from(node.cpus),
            memory_mb: node.memory_mb,
            gpus: node.gpus(),
        }
    }

    /// What differs from `other`, as `cpus 4 → 8, gpus 0 → 2`; empty when nothing does.
    pub fn changes(&self, other: &Size) -> String {
        [
            ("cpus", other.cpus, self.cpus),
            ("memory MiB", other.memory_mb, self.memory_mb),
            ("gpus", other.gpus, self.gpus),
        ]
        .into_iter()
        .filter(|(_, was, now)| was != now)
        .map(|(what, was, now)| format!("{what} {was} → {now}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// The drain reason of a node being registered again with a new size.
pub fn reason(node: &str) -> String {
    format!("{}Node ({node}) changed size", keys::DRAIN_REASON_PREFIX)
}

/// What to do about an external node's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resize {
    /// In line (CPUs and memory): nothing.
    Keep,
    /// Drain it with [`reason`] before it is deleted.
    Drain,
    /// Drained by us and idle: delete it (the next round registers it again).
    Delete,
    /// Drained by us, and its size is right again (or the drain was for nothing): resume it.
    Resume,
    /// Drained by us, jobs still run: wait.
    Wait,
}

/// The Slurm side of the decision.
#[derive(Debug, Clone, Copy)]
pub struct Registered<'a> {
    pub size: Size,
    pub drain: bool,
    pub reason: Option<&'a str>,
    pub busy: bool,
}

/// Decides for the external node `name` that should be `wanted` and is `slurm`.
pub fn decide(name: &str, wanted: Size, slurm: Registered<'_>) -> Resize {
    // GPUs alone never make a node registered again: a Slurm without `GresTypes=gpu` or a
    // gres.conf line may accept a node's GPU count and drop it, which no listing tells apart
    // from a count that changed, so following them would re-register the node forever. They go
    // to Slurm with the node's other changes (and at its first registration).
    let same = wanted.cpus == slurm.size.cpus && wanted.memory_mb == slurm.size.memory_mb;
    let ours = slurm.reason == Some(reason(name).as_str());
    match (same, slurm.drain, ours) {
        (true, true, true) => Resize::Resume,
        (true, _, _) => Resize::Keep,
        (false, false, _) => Resize::Drain,
        (false, true, true) if slurm.busy => Resize::Wait,
        (false, true, true) => Resize::Delete,
        // Someone else's drain: theirs to lift; the size waits for it.
        (false, true, false) => Resize::Keep,
    }
}

/// The size an external node for `node` is registered with: its allocatable (else capacity)
/// CPUs rounded down, memory in MiB (1 when it lists none), and device plugins' GPUs.
pub fn wanted(node: &Node) -> Result<Size, String> {
    let cpus = offered(node, "cpu")?
        .map(|c| c.floor() as u64)
        .filter(|c| *c > 0)
        .ok_or_else(|| {
            format!(
                "node {}: status.allocatable.cpu is missing",
                node.name_any()
            )
        })?;
    let memory_mb = offered(node, "memory")?
        .map(|m| (m / 1048576.0).floor() as u64)
        .unwrap_or(1);
    let mut gpus = 0u64;
    for resource in GPU_RESOURCES {
        gpus += offered(node, resource)?.map_or(0, |g| g.floor() as u64);
    }
    Ok(Size {
        cpus,
        memory_mb,
        gpus,
    })
}

/// What the node offers pods of `resource`: its allocatable (capacity less what the kubelet
/// keeps for the system), else its capacity; `None` when it lists neither.
fn offered(node: &Node, resource: &str) -> Result<Option<f64>, String> {
    fn listed<'a>(map: Option<&'a BTreeMap<String, Quantity>>, key: &str) -> Option<&'a Quantity> {
        map.and_then(|m| m.get(key))
    }
    let status = node.status.as_ref();
    listed(status.and_then(|s| s.allocatable.as_ref()), resource)
        .or_else(|| listed(status.and_then(|s| s.capacity.as_ref()), resource))
        .map(|q| {
            quantity::parse(&q.0)
                .map_err(|e| format!("node {}: {resource} {:?}: {e}", node.name_any(), q.0))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: Size = Size {
        cpus: 4,
        memory_mb: 8192,
        gpus: 2,
    };

    fn slurm(size: Size, drain: bool, reason: Option<&str>, busy: bool) -> Registered<'_> {
        Registered {
            size,
            drain,
            reason,
            busy,
        }
    }

    #[test]
    fn a_node_whose_size_changed_is_drained_deleted_when_idle_and_resumed_if_it_changes_back() {
        let ours = reason("k1");
        let before = Size {
            cpus: 2,
            gpus: 0,
            ..SIZE
        };
        assert_eq!(
            decide("k1", SIZE, slurm(SIZE, false, None, true)),
            Resize::Keep
        );
        assert_eq!(
            decide("k1", SIZE, slurm(before, false, None, true)),
            Resize::Drain
        );
        assert_eq!(
            decide("k1", SIZE, slurm(before, true, Some(&ours), true)),
            Resize::Wait
        );
        assert_eq!(
            decide("k1", SIZE, slurm(before, true, Some(&ours), false)),
            Resize::Delete
        );
        // The Kubernetes node went back to what Slurm has: the drain is lifted.
        assert_eq!(
            decide("k1", before, slurm(before, true, Some(&ours), true)),
            Resize::Resume
        );
        // An admin's drain is theirs: neither deleted nor resumed.
        for size in [SIZE, before] {
            assert_eq!(
                decide("k1", size, slurm(before, true, Some("bad DIMM"), false)),
                Resize::Keep
            );
        }
        assert_eq!(
            SIZE.changes(&before),
            "cpus 2 → 4, gpus 0 → 2",
            "the log says what changed"
        );
        // GPUs alone: left as they are (a Slurm may accept a count and drop it).
        let no_gpus = Size { gpus: 0, ..SIZE };
        assert_eq!(
            decide("k1", SIZE, slurm(no_gpus, false, None, false)),
            Resize::Keep
        );
    }

    #[test]
    fn gpus_alone_never_register_a_node_again() {
        let without = Size { gpus: 0, ..SIZE };
        assert_eq!(
            decide("k1", SIZE, slurm(without, false, None, false)),
            Resize::Keep
        );
        // More GPUs alone: left as they are; another change registers the node again.
        let more = Size { gpus: 4, ..SIZE };
        assert_eq!(
            decide("k1", more, slurm(without, false, None, false)),
            Resize::Keep
        );
        let bigger = Size { cpus: 8, ..SIZE };
        assert_eq!(
            decide("k1", bigger, slurm(without, false, None, false)),
            Resize::Drain
        );
    }

    #[test]
    fn the_wanted_size_is_the_allocatable() {
        let node: Node = serde_yaml::from_str(
            "metadata: {name: k2}\nstatus: {capacity: {cpu: '8', memory: 16Gi, nvidia.com/gpu: '4'}, allocatable: {cpu: 7500m, memory: 15Gi, nvidia.com/gpu: '2', amd.com/gpu: '1'}}\n",
        )
        .unwrap();
        assert_eq!(
            wanted(&node),
            Ok(Size {
                cpus: 7,
                memory_mb: 15360,
                gpus: 3
            })
        );
        let none: Node = serde_yaml::from_str("metadata: {name: k3}\n").unwrap();
        assert!(wanted(&none).unwrap_err().contains("allocatable.cpu"));
    }
}
