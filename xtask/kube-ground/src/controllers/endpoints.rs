//! Service → EndpointSlice (`<service>-ground`, labelled with `kubernetes.io/service-name`) and
//! the legacy Endpoints object, listing the selected pods that have an IP, ready or not
//! (`publishNotReadyAddresses` makes every one ready).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client, ResourceExt};

use super::common::{self, Failed};

pub async fn run(client: Client) -> anyhow::Result<()> {
    let services: Api<Service> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    // A pod change wakes the services of its namespace that select it (from the controller's
    // own cache). Waking every service of the namespace made each of thousands of unrelated pod
    // writes (the scale benches) a LIST of the namespace's pods, which kept the API server busy.
    // A pod relabelled out of a service is dropped from it on the service's next resync.
    let controller = Controller::new(services, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(pods, watcher::Config::default(), move |pod: Pod| {
            let ns = pod.namespace();
            store
                .state()
                .into_iter()
                .filter(move |s| s.namespace() == ns && selects(s, &pod))
                .map(|s| reflector::ObjectRef::from_obj(s.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(
            |svc, client: Arc<Client>| async move {
                reconcile(&svc, &client)
                    .await
                    .map(|()| Action::requeue(Duration::from_secs(30)))
                    .map_err(Failed)
            },
            |svc, err, _| {
                tracing::warn!(service = %svc.name_any(), "endpoints: {err}");
                Action::requeue(Duration::from_secs(2))
            },
            Arc::new(client.clone()),
        )
        .for_each(|_| futures::future::ready(()))
        .await;
    Ok(())
}

/// Whether `svc` has a selector and `pod`'s labels match it.
fn selects(svc: &Service, pod: &Pod) -> bool {
    let Some(selector) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    let labels = pod.labels();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

async fn reconcile(svc: &Service, client: &Client) -> anyhow::Result<()> {
    let Some(spec) = &svc.spec else { return Ok(()) };
    let Some(selector) = spec.selector.clone().filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    if svc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels(&labels.join(",")))
        .await?
        .items;
    let all_ready = spec.publish_not_ready_addresses == Some(true);
    let mut endpoints = Vec::new();
    let mut ready_addrs = Vec::new();
    let mut unready_addrs = Vec::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let Some(ip) = p.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let ready = all_ready || common::ready(p);
        let pspec = p.spec.clone().unwrap_or_default();
        let target = serde_json::json!({"kind": "Pod", "name": p.name_any(), "namespace": ns, "uid": p.uid()});
        let mut ep = serde_json::json!({
            "addresses": [ip],
            "conditions": {"ready": ready, "serving": ready, "terminating": false},
            "targetRef": target,
        });
        if let Some(node) = &pspec.node_name {
            ep["nodeName"] = node.clone().into();
        }
        let mut addr = serde_json::json!({"ip": ip, "targetRef": target});
        if let Some(h) = &pspec.hostname {
            ep["hostname"] = h.clone().into();
            addr["hostname"] = h.clone().into();
        }
        endpoints.push(ep);
        if ready {
            ready_addrs.push(addr);
        } else {
            unready_addrs.push(addr);
        }
    }
    let ports: Vec<serde_json::Value> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            let port = match &p.target_port {
                Some(IntOrString::Int(n)) => *n,
                // A named target port: the first selected pod's container port of that name.
                Some(IntOrString::String(pname)) => pods
                    .iter()
                    .flat_map(|pod| pod.spec.iter().flat_map(|s| s.containers.iter()))
                    .flat_map(|c| c.ports.iter().flatten())
                    .find(|cp| cp.name.as_deref() == Some(pname))
                    .map(|cp| cp.container_port)
                    .unwrap_or(p.port),
                None => p.port,
            };
            serde_json::json!({"name": p.name.clone().unwrap_or_default(), "port": port, "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())})
        })
        .collect();
    let owner = serde_json::to_value(common::owner_ref(svc))?;
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{name}-ground"),
            "namespace": ns,
            "labels": {
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
            "ownerReferences": [owner],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    });
    let params = PatchParams::apply(common::MANAGER).force();
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), &ns);
    slices
        .patch(&format!("{name}-ground"), &params, &Patch::Apply(&slice))
        .await?;
    let mut subset = serde_json::json!({"ports": ports});
    if !ready_addrs.is_empty() {
        subset["addresses"] = ready_addrs.into();
    }
    if !unready_addrs.is_empty() {
        subset["notReadyAddresses"] = unready_addrs.into();
    }
    let has_any = subset.get("addresses").is_some() || subset.get("notReadyAddresses").is_some();
    let legacy = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner]},
        "subsets": if has_any { vec![subset] } else { vec![] },
    });
    let eps: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(client.clone(), &ns);
    eps.patch(&name, &params, &Patch::Apply(&legacy)).await?;
    Ok(())
}
