//! The Services that name what netd serves, made when absent so that tools looking for them find
//! them: `kube-system/kube-dns` (10.96.0.10, 53/UDP and 53/TCP) and `default/kubernetes`
//! (10.96.0.1:443), neither with a selector. Both also keep the API server from giving their
//! fixed ClusterIPs to another Service.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

pub const MANAGER: &str = "kube-ground-netd";

fn wanted() -> [(&'static str, &'static str, serde_json::Value); 2] {
    [
        (
            "kube-system",
            "kube-dns",
            json!({
                "metadata": {"labels": {"k8s-app": "kube-dns"}},
                "spec": {"clusterIP": "10.96.0.10", "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                ]},
            }),
        ),
        (
            "default",
            "kubernetes",
            json!({
                "metadata": {"labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"clusterIP": "10.96.0.1", "ports": [
                    {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443},
                ]},
            }),
        ),
    ]
}

/// Makes the Services (and their namespaces) that are absent; retries until the API server has
/// answered for each. A refusal of the fixed ClusterIP (422) is logged, not retried.
pub async fn ensure(client: Client) {
    for (ns, name, body) in wanted() {
        loop {
            match ensure_one(&client, ns, name, body.clone()).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!("service {ns}/{name}: {e:#}; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
    }
}

async fn ensure_one(
    client: &Client,
    ns: &str,
    name: &str,
    mut body: serde_json::Value,
) -> anyhow::Result<()> {
    let params = PatchParams::apply(MANAGER);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await?.is_none() {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        namespaces
            .patch(ns, &params, &Patch::Apply(&object))
            .await?;
        tracing::info!("created namespace {ns}");
    }
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    if services.get_opt(name).await?.is_some() {
        return Ok(());
    }
    body["apiVersion"] = "v1".into();
    body["kind"] = "Service".into();
    body["metadata"]["name"] = name.into();
    body["metadata"]["namespace"] = ns.into();
    match services.patch(name, &params, &Patch::Apply(&body)).await {
        Ok(_) => tracing::info!("created service {ns}/{name}"),
        Err(kube::Error::Api(s)) if s.code == 422 => {
            tracing::warn!(
                "service {ns}/{name}: the API server refused it ({}); left absent",
                s.message
            );
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
