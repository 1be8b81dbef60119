//! The Node objects this kubelet serves: labels, capacity, addresses and a Ready condition,
//! written with server-side apply under the kubelet's own field manager (so an admin's cordon,
//! taints and labels stay untouched), and a Lease per node renewed every 10 s. The renewals of
//! many nodes (hollow ones: [`crate::hollow`]) are spread over those 10 s, a few at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use super::resources::{NODE_CPU, NODE_MEMORY};

const MANAGER: &str = "kube-ground-kubelet";
const LEASE_SECONDS: i32 = 40;
const RENEW: Duration = Duration::from_secs(10);
/// The real kubelet's status period: it writes a node's status every minute.
pub const STATUS_EVERY: Duration = Duration::from_secs(60);
/// Renewals are spread over the period in this many slots.
const SLOTS: u32 = 100;
/// Nodes registered at once.
const REGISTER_AT_ONCE: usize = 8;

/// What each node reports.
#[derive(Clone, Debug)]
pub struct Shape {
    pub address: String,
    /// Where the API server finds this node's kubelet API (0: nowhere).
    pub kubelet_port: u16,
    /// Resources offered beyond the defaults (`nvidia.com/gpu` → `2`) or instead of them
    /// (`cpu`, `memory`, `pods`): capacity and allocatable alike.
    pub resources: BTreeMap<String, String>,
    /// Labels beyond the standard ones.
    pub labels: BTreeMap<String, String>,
    /// Taints the node registers with (`key`, `value`, `effect`).
    pub taints: Vec<(String, String, String)>,
    /// `status.nodeInfo.osImage`.
    pub os_image: String,
}

pub async fn register(client: &Client, names: &[String], shape: &Shape) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(names)
        .map(|name| register_one(&api, name, shape))
        .buffer_unordered(REGISTER_AT_ONCE)
        .try_collect::<()>()
        .await
}

async fn register_one(api: &Api<Node>, name: &str, shape: &Shape) -> Result<()> {
    let mut labels = serde_json::json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
    for (k, v) in &shape.labels {
        labels[k] = serde_json::Value::String(v.clone());
    }
    let mut node = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
    });
    if !shape.taints.is_empty() {
        let taints: Vec<_> = shape
            .taints
            .iter()
            .map(|(key, value, effect)| {
                serde_json::json!({"key": key, "value": value, "effect": effect})
            })
            .collect();
        node["spec"] = serde_json::json!({ "taints": taints });
    }
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&node),
    )
    .await
    .with_context(|| format!("registering node {name}"))?;
    write_status(api, name, shape).await
}

async fn write_status(api: &Api<Node>, name: &str, shape: &Shape) -> Result<()> {
    let now = serde_json::to_value(Time(Timestamp::now()))?;
    let mut capacity = serde_json::json!({
        "cpu": NODE_CPU.to_string(),
        "memory": format!("{}Ki", NODE_MEMORY / 1024),
        "pods": "110",
        "ephemeral-storage": "100Gi",
    });
    for (k, v) in &shape.resources {
        capacity[k] = serde_json::Value::String(v.clone());
    }
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        serde_json::json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    let status = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kube-ground kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": shape.address},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": shape.kubelet_port}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "",
                "kernelVersion": kernel(),
                "osImage": shape.os_image,
                "containerRuntimeVersion": "podman://4.3",
                "kubeletVersion": "v1.36.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    });
    api.patch_status(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&status),
    )
    .await
    .with_context(|| format!("writing the status of node {name}"))?;
    Ok(())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Renews each node's Lease every 10 s and writes its status every `status_every`, until the
/// process ends; each node has its slot in the period, the same every round.
pub async fn heartbeat(client: Client, names: Vec<String>, shape: Shape, status_every: Duration) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let mut last_status = tokio::time::Instant::now();
    let slots = slots(names.len());
    loop {
        let round = tokio::time::Instant::now();
        let status_due = last_status.elapsed() >= status_every;
        if status_due {
            last_status = round;
        }
        for (slot, range) in slots.iter().enumerate() {
            tokio::time::sleep_until(round + RENEW * slot as u32 / SLOTS).await;
            let beats = names[range.clone()].iter().map(|name| async {
                renew(&leases, name).await;
                if status_due && let Err(e) = write_status(&nodes, name, &shape).await {
                    tracing::warn!("{e:#}");
                }
            });
            futures::future::join_all(beats).await;
        }
        tokio::time::sleep_until(round + RENEW).await;
    }
}

/// Which nodes (a range of indices) each of the [`SLOTS`] slots of a period renews; the first
/// node in the first slot.
fn slots(nodes: usize) -> Vec<std::ops::Range<usize>> {
    let n = SLOTS as usize;
    let start = |s: usize| (s * nodes).div_ceil(n);
    (0..n).map(|s| start(s)..start(s + 1)).collect()
}

async fn renew(leases: &Api<Lease>, name: &str) {
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": MicroTime(Timestamp::now()),
        },
    });
    if let Err(e) = leases
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&lease),
        )
        .await
    {
        tracing::warn!(node = %name, "renewing the node lease: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_node_once() {
        for nodes in [1, 3, 99, 100, 101, 1000, 5000] {
            let all = slots(nodes);
            assert_eq!(all.len(), SLOTS as usize);
            let covered: Vec<usize> = all.into_iter().flatten().collect();
            assert_eq!(covered, (0..nodes).collect::<Vec<_>>(), "{nodes} nodes");
            assert_eq!(slots(nodes)[0].start, 0);
            assert!(!slots(nodes)[0].is_empty());
        }
    }
}
