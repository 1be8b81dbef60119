//! The Node objects this kubelet serves: labels, capacity, addresses and a Ready condition,
//! written with server-side apply under the kubelet's own field manager (so an admin's cordon,
//! taints and labels stay untouched), and a Lease per node renewed every 10 s.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
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
const STATUS_EVERY: Duration = Duration::from_secs(60);

/// What each node reports.
#[derive(Clone, Debug)]
pub struct Shape {
    pub address: String,
    /// Where the API server finds this node's kubelet API (0: nowhere).
    pub kubelet_port: u16,
    /// Extended resources such as `nvidia.com/gpu` → `2`.
    pub extended: BTreeMap<String, String>,
}

pub async fn register(client: &Client, names: &[String], shape: &Shape) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let params = PatchParams::apply(MANAGER).force();
    for name in names {
        let node = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                },
            },
        });
        api.patch(name, &params, &Patch::Apply(&node))
            .await
            .with_context(|| format!("registering node {name}"))?;
        write_status(&api, name, shape).await?;
    }
    Ok(())
}

async fn write_status(api: &Api<Node>, name: &str, shape: &Shape) -> Result<()> {
    let now = serde_json::to_value(Time(Timestamp::now()))?;
    let mut capacity = serde_json::json!({
        "cpu": NODE_CPU.to_string(),
        "memory": format!("{}Ki", NODE_MEMORY / 1024),
        "pods": "110",
        "ephemeral-storage": "100Gi",
    });
    for (k, v) in &shape.extended {
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
                "osImage": "kube-ground test node",
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

/// Renews each node's Lease every 10 s and its status every minute, until the process ends.
pub async fn heartbeat(client: Client, names: Vec<String>, shape: Shape) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let mut last_status = tokio::time::Instant::now();
    loop {
        for name in &names {
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
        if last_status.elapsed() >= STATUS_EVERY {
            last_status = tokio::time::Instant::now();
            for name in &names {
                if let Err(e) = write_status(&nodes, name, &shape).await {
                    tracing::warn!("{e:#}");
                }
            }
        }
        tokio::time::sleep(RENEW).await;
    }
}
