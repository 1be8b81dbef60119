//! The test ground's API server, through a real client (kube-rs) and Debian sid's kubectl.
//!
//! Runs against the ground `cargo xtask kube up` started (kubeconfig and env file in
//! /run/slurm-dev/kube, or under SLURM_DEV_RUN) and fails when it is not running. Every test works
//! in a namespace of its own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{
    Binding, ConfigMap, Container, Namespace, Node, ObjectReference, Pod, PodSpec, Service,
    ServicePort, ServiceSpec,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind, ObjectMeta};
use kube::{Client, Config};
use serde_json::json;

fn run_dir() -> PathBuf {
    std::env::var_os("SLURM_DEV_RUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/slurm-dev"))
        .join("kube")
}

/// The ground's env file as a map: KUBECONFIG, KUBE_GROUND_KUBECTL, KUBE_GROUND_AUDIT_LOG, …
fn ground_env() -> BTreeMap<String, String> {
    let path = run_dir().join("kube.env");
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the Kubernetes test ground is not running ({}: {e}); start it with `cargo xtask kube up`",
            path.display()
        )
    });
    raw.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn client() -> Client {
    let path = run_dir().join("kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| {
        panic!(
            "the Kubernetes test ground is not running ({}: {e}); start it with `cargo xtask kube up`",
            path.display()
        )
    });
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the ground's kubeconfig is usable");
    // see the server's answers as they are (429 from eviction above all), not retried
    config.default_retry = false;
    Client::try_from(config).expect("a client")
}

/// A fresh namespace for one test.
async fn namespace(client: &Client, test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!("{test}-{nanos:x}");
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("creating the test namespace");
    name
}

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn named<K: Default>(name: &str, f: impl FnOnce(&mut K, ObjectMeta)) -> K {
    let mut k = K::default();
    f(
        &mut k,
        ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
    );
    k
}

fn bare_pod(name: &str) -> Pod {
    named(name, |p: &mut Pod, meta| {
        p.metadata = meta;
        p.spec = Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("toolbox".into()),
                ..Default::default()
            }],
            ..Default::default()
        });
    })
}

/// A pod for a scheduler nobody runs: the ground's scheduler and kubelet leave it alone (CI saw
/// the ground's scheduler bind a test's pod before the test did, and the kubelet report
/// ErrImageNeverPull before kubectl listed one).
fn unscheduled_pod(name: &str) -> Pod {
    let mut pod = bare_pod(name);
    pod.spec.as_mut().expect("a spec").scheduler_name = Some("nobody".into());
    pod
}

#[tokio::test]
async fn crd_cel_rule_rejects_a_bad_object_with_the_rules_message() {
    let client = client().await;
    let ns = namespace(&client, "cel").await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "ranges.ground.slurm.dev"},
        "spec": {
            "group": "ground.slurm.dev",
            "scope": "Namespaced",
            "names": {"kind": "Range", "plural": "ranges", "singular": "range"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                        "x-kubernetes-validations": [
                            {"rule": "self.min <= self.max", "message": "min must not exceed max"}
                        ]
                    }}
                }}
            }]
        }
    }))
    .unwrap();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(
        "ranges.ground.slurm.dev",
        &PatchParams::apply("kube-apiserver-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("applying the CRD");
    let gvk = GroupVersionKind::gvk("ground.slurm.dev", "v1", "Range");
    let ranges: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    let object = |name: &str, min: i64, max: i64| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "ground.slurm.dev/v1", "kind": "Range",
            "metadata": {"name": name}, "spec": {"min": min, "max": max}
        }))
        .unwrap()
    };
    // The CRD's endpoint appears once it is Established.
    let mut good = None;
    for _ in 0..50 {
        match ranges
            .create(&PostParams::default(), &object("good", 1, 5))
            .await
        {
            Err(e) if api_code(&e) == Some(404) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            other => {
                good = Some(other);
                break;
            }
        }
    }
    good.expect("the CRD's endpoint appears")
        .expect("an object that satisfies the rule is created");
    let groups = client.list_api_groups().await.expect("GET /apis");
    assert!(
        groups.groups.iter().any(|g| g.name == "ground.slurm.dev"),
        "the CRD's group is listed in /apis"
    );
    let err = ranges
        .create(&PostParams::default(), &object("bad", 5, 1))
        .await
        .expect_err("the rule rejects min > max");
    assert_eq!(api_code(&err), Some(422), "{err}");
    assert!(
        err.to_string().contains("min must not exceed max"),
        "the rule's message is in the error: {err}"
    );
}

#[tokio::test]
async fn server_side_apply_conflict_names_the_other_manager_and_force_resolves_it() {
    let client = client().await;
    let ns = namespace(&client, "ssa").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"key": value}});
    cms.patch(
        "shared",
        &PatchParams::apply("first-manager"),
        &Patch::Apply(cm("one")),
    )
    .await
    .expect("first apply");
    let err = cms
        .patch(
            "shared",
            &PatchParams::apply("second-manager"),
            &Patch::Apply(cm("two")),
        )
        .await
        .expect_err("a second manager setting the same field conflicts");
    assert_eq!(api_code(&err), Some(409), "{err}");
    assert!(
        err.to_string().contains("first-manager"),
        "the conflict names the other manager: {err}"
    );
    let forced = cms
        .patch(
            "shared",
            &PatchParams::apply("second-manager").force(),
            &Patch::Apply(cm("two")),
        )
        .await
        .expect("forced apply");
    assert_eq!(forced.data.unwrap()["key"], "two");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.to_string().contains("f:key"))
        })
        .filter_map(|f| f.manager)
        .collect();
    assert_eq!(
        managers,
        ["second-manager"],
        "the forced manager owns the field alone"
    );
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version_and_too_old_ones_get_410() {
    let client = client().await;
    let ns = namespace(&client, "watch").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let created = cms
        .create(
            &PostParams::default(),
            &named("watched", |c: &mut ConfigMap, m| c.metadata = m),
        )
        .await
        .unwrap();
    let from = created.metadata.resource_version.clone().unwrap();
    for value in ["a", "b"] {
        cms.patch(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": value}})),
        )
        .await
        .unwrap();
    }
    let stream = cms
        .watch(&WatchParams::default().timeout(10), &from)
        .await
        .expect("watch from the creation's resourceVersion");
    let events: Vec<WatchEvent<ConfigMap>> =
        stream.take(2).try_collect().await.expect("watch events");
    let values: Vec<String> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Modified(c) => c.data.clone().unwrap_or_default()["v"].clone(),
            other => panic!("expected the two updates, got {other:?}"),
        })
        .collect();
    assert_eq!(values, ["a", "b"], "the watch replays what followed {from}");

    // The ground's store starts some revisions in, as a cluster that has lived a while: its
    // first resourceVersions are older than any watch cache.
    let gone = match cms.watch(&WatchParams::default().timeout(5), "2").await {
        Err(e) => api_code(&e),
        Ok(stream) => {
            let mut stream = Box::pin(stream);
            match stream.next().await {
                Some(Ok(WatchEvent::Error(status))) => Some(status.code),
                Some(Err(e)) => api_code(&e),
                other => panic!("expected 410 Gone for resourceVersion 2, got {other:?}"),
            }
        }
    };
    assert_eq!(gone, Some(410), "a too old resourceVersion gets 410 Gone");
}

#[tokio::test]
async fn binding_a_pod_twice_is_a_conflict() {
    let client = client().await;
    let ns = namespace(&client, "bind").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &unscheduled_pod("bound"))
        .await
        .unwrap();
    let binding = |node: &str| -> Binding {
        named("bound", |b: &mut Binding, m| {
            b.metadata = m;
            b.target = ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            };
        })
    };
    let _: serde_json::Value = pods
        .create_subresource(
            "binding",
            "bound",
            &PostParams::default(),
            &binding("node-1"),
        )
        .await
        .expect("first binding");
    let pod = pods.get("bound").await.unwrap();
    assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("node-1"));
    let scheduled = pod
        .status
        .unwrap()
        .conditions
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True");
    assert!(scheduled, "binding sets PodScheduled");
    let err = pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "bound",
            &PostParams::default(),
            &binding("node-2"),
        )
        .await
        .expect_err("a bound pod cannot be bound again");
    assert_eq!(api_code(&err), Some(409), "{err}");
    let on_node_1 = pods
        .list(&kube::api::ListParams::default().fields("spec.nodeName=node-1"))
        .await
        .unwrap();
    assert_eq!(on_node_1.items.len(), 1, "field selector spec.nodeName");
}

#[tokio::test]
async fn eviction_honours_the_disruption_budget_and_deletion_is_graceful() {
    let client = client().await;
    let ns = namespace(&client, "evict").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut pod = bare_pod("guarded");
    pod.metadata.labels = Some([("app".to_owned(), "guarded".to_owned())].into());
    // bound to a node that does not exist: once deleted, nothing but the server removes it
    pod.spec.as_mut().unwrap().node_name = Some("no-such-node".into());
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let err = pods
        .evict("guarded", &EvictParams::default())
        .await
        .expect_err("no disruption allowed");
    assert_eq!(api_code(&err), Some(429), "{err}");
    pdbs.patch_status(
        "guard",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})),
    )
    .await
    .unwrap();
    pods.evict("guarded", &EvictParams::default())
        .await
        .expect("one disruption allowed");
    let budget = pdbs.get_status("guard").await.unwrap().status.unwrap();
    assert_eq!(budget.disruptions_allowed, Some(0), "the eviction spent it");
    // the pod is bound: deletion is graceful, and the server's pod GC removes it since its node
    // does not exist
    if let Some(p) = pods.get_opt("guarded").await.unwrap() {
        assert!(p.metadata.deletion_timestamp.is_some());
        assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
    }
    eventually("the evicted pod removed", async || {
        pods.get_opt("guarded").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn a_pod_without_defaults_comes_back_with_them() {
    let client = client().await;
    let ns = namespace(&client, "defaults").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods
        .create(&PostParams::default(), &bare_pod("plain"))
        .await
        .unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    let c = &spec.containers[0];
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(
        c.image_pull_policy.as_deref(),
        Some("Always"),
        "an untagged image means :latest"
    );
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Pending"));

    let svcs: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc = |name: &str, cluster_ip: Option<&str>| -> Service {
        named(name, |s: &mut Service, m| {
            s.metadata = m;
            s.spec = Some(ServiceSpec {
                cluster_ip: cluster_ip.map(str::to_owned),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..Default::default()
                }]),
                ..Default::default()
            });
        })
    };
    let web = svcs
        .create(&PostParams::default(), &svc("web", None))
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(web.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(web.session_affinity.as_deref(), Some("None"));
    let ip = web.cluster_ip.unwrap();
    assert!(
        ip.starts_with("10.96.") && ip != "10.96.0.1",
        "allocated from 10.96.0.0/16: {ip}"
    );
    let port = &web.ports.unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );
    let headless = svcs
        .create(&PostParams::default(), &svc("headless", Some("None")))
        .await
        .unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let err = svcs
        .create(&PostParams::default(), &svc("twin", Some(&ip)))
        .await
        .expect_err("an allocated ClusterIP cannot be taken twice");
    assert_eq!(api_code(&err), Some(422), "{err}");
}

fn owned_by(name: &str, owner: &ConfigMap) -> ConfigMap {
    named(name, |c: &mut ConfigMap, mut m| {
        m.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap(),
            uid: owner.metadata.uid.clone().unwrap(),
            block_owner_deletion: Some(true),
            ..Default::default()
        }]);
        c.metadata = m;
    })
}

/// Polls until `f` is true, for at most 20 s.
async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what} did not happen within 20 s");
}

#[tokio::test]
async fn foreground_deletion_removes_the_dependents_then_the_owner() {
    let client = client().await;
    let ns = namespace(&client, "gc").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();
    let owner = cms
        .create(&pp, &named("owner", |c: &mut ConfigMap, m| c.metadata = m))
        .await
        .unwrap();
    for name in ["dep-1", "dep-2"] {
        cms.create(&pp, &owned_by(name, &owner)).await.unwrap();
    }
    // a finalizer on one dependent keeps it, and so the owner, until the test drops it
    cms.patch(
        "dep-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["ground.slurm.dev/hold"]}})),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::foreground())
        .await
        .expect("foreground delete");
    let owner_now = cms
        .get("owner")
        .await
        .expect("the owner waits for its dependents");
    assert!(owner_now.metadata.deletion_timestamp.is_some());
    assert!(
        owner_now
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_owned())
    );
    eventually("dep-2 deleted", async || {
        cms.get_opt("dep-2").await.unwrap().is_none()
    })
    .await;
    assert!(
        cms.get_opt("owner").await.unwrap().is_some(),
        "the owner stays while a dependent does"
    );
    cms.patch(
        "dep-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the owner deleted after its dependents", async || {
        cms.get_opt("dep-1").await.unwrap().is_none()
            && cms.get_opt("owner").await.unwrap().is_none()
    })
    .await;

    // background: the owner goes at once, the dependents after
    let owner = cms
        .create(
            &pp,
            &named("owner-2", |c: &mut ConfigMap, m| c.metadata = m),
        )
        .await
        .unwrap();
    cms.create(&pp, &owned_by("dep-3", &owner)).await.unwrap();
    cms.delete("owner-2", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the dependent of a deleted owner collected", async || {
        cms.get_opt("dep-3").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects_then_the_namespace() {
    let client = client().await;
    let ns = namespace(&client, "nsdel").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    cms.create(
        &PostParams::default(),
        &named("inside", |c: &mut ConfigMap, m| c.metadata = m),
    )
    .await
    .unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    let created = namespaces.get(&ns).await.unwrap();
    assert_eq!(
        created.metadata.labels.unwrap_or_default()["kubernetes.io/metadata.name"],
        ns
    );
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get(&ns).await.unwrap();
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let err = cms
        .create(
            &PostParams::default(),
            &named("late", |c: &mut ConfigMap, m| c.metadata = m),
        )
        .await
        .expect_err("nothing is created in a terminating namespace");
    assert_eq!(api_code(&err), Some(403), "{err}");
    eventually("the namespace and its objects deleted", async || {
        namespaces.get_opt(&ns).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn a_node_keeps_the_status_it_registers_with_and_prints_as_ready() {
    let client = client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let name = format!(
        "test-node-{:x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
        "status": {
            "capacity": {"cpu": "4", "memory": "4Gi", "pods": "110", "nvidia.com/gpu": "2"},
            "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110", "nvidia.com/gpu": "2"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
            "nodeInfo": {"kubeletVersion": "v1.36.4", "machineID": "", "systemUUID": "", "bootID": "",
                "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"}
        }
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let capacity = created.status.unwrap().capacity.unwrap();
    assert_eq!(capacity["nvidia.com/gpu"].0, "2");
    let env = ground_env();
    let out = std::process::Command::new(&env["KUBE_GROUND_KUBECTL"])
        .env("KUBECONFIG", &env["KUBECONFIG"])
        .args(["get", "node", &name, "--no-headers"])
        .output()
        .expect("running kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(row.get(1..3), Some(&["Ready", "worker"][..]), "{stdout}");
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_token_written_to_the_token_file_authenticates_at_once() {
    const USER: &str = "token-file-test-user";
    let env = ground_env();
    let path = &env["KUBE_GROUND_TOKEN_FILE"];
    let token = format!(
        "t{:x}{:x}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let kept: String = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains(USER))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path, format!("{kept}{token},{USER},uid-1,\"testers\"\n")).unwrap();

    let kubeconfig = Kubeconfig::read_from(run_dir().join("kubeconfig")).unwrap();
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    config.auth_info = Default::default();
    config.auth_info.token = Some(token.clone().into());
    let with_token = Client::try_from(config.clone()).unwrap();
    Api::<Namespace>::all(with_token)
        .get("default")
        .await
        .expect("the token authenticates");
    config.auth_info.token = Some(format!("{token}-wrong").into());
    let err = Api::<Namespace>::all(Client::try_from(config).unwrap())
        .get("default")
        .await
        .expect_err("an unknown token does not");
    assert_eq!(api_code(&err), Some(401), "{err}");
}

#[tokio::test]
async fn kubectl_get_pods_prints_a_table() {
    let client = client().await;
    let ns = namespace(&client, "table").await;
    let pod = unscheduled_pod("listed");
    Api::<Pod>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let env = ground_env();
    let out = std::process::Command::new(&env["KUBE_GROUND_KUBECTL"])
        .env("KUBECONFIG", &env["KUBECONFIG"])
        .args(["get", "pods", "-n", &ns])
        .output()
        .expect("running kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["listed", "0/1", "Pending", "0"], "{stdout}");

    // A started sidecar (init container with restartPolicy Always) is done with the init
    // sequence and counts among the containers, as kube-apiserver prints it.
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "with-sidecar"},
        "spec": {
            "schedulerName": "nobody",
            "initContainers": [{"name": "log", "image": "busybox", "restartPolicy": "Always"}],
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }))
    .unwrap();
    pod.metadata.namespace = Some(ns.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = |name: &str| {
        json!({"name": name, "image": "busybox", "imageID": "", "ready": true, "started": true,
               "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    };
    let status = json!({"status": {
        "phase": "Running",
        "initContainerStatuses": [running("log")],
        "containerStatuses": [running("main")],
    }});
    pods.patch_status(
        "with-sidecar",
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await
    .unwrap();
    let out = std::process::Command::new(&env["KUBE_GROUND_KUBECTL"])
        .env("KUBECONFIG", &env["KUBECONFIG"])
        .args(["get", "pod", "with-sidecar", "-n", &ns, "--no-headers"])
        .output()
        .expect("running kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["with-sidecar", "2/2", "Running", "0"],
        "{stdout}"
    );
}

#[tokio::test]
async fn the_audit_log_records_the_tests_requests() {
    let client = client().await;
    let ns = namespace(&client, "audit").await;
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &named("audited", |c: &mut ConfigMap, m| c.metadata = m),
        )
        .await
        .unwrap();
    let path = ground_env()["KUBE_GROUND_AUDIT_LOG"].clone();
    let mut found = false;
    for _ in 0..50 {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        found = log.lines().any(|line| {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                return false;
            };
            event["verb"] == "create"
                && event["objectRef"]["resource"] == "configmaps"
                && event["objectRef"]["namespace"] == ns.as_str()
                && event["objectRef"]["name"] == "audited"
                && event["user"]["username"] == "kubernetes-admin"
        });
        if found {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found, "{path} has the create of configmaps/audited in {ns}");
    Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}

/// Debian's kubectl on the ground.
fn kubectl(args: &[&str]) -> std::process::Command {
    let env = ground_env();
    let mut cmd = std::process::Command::new(&env["KUBE_GROUND_KUBECTL"]);
    cmd.env("KUBECONFIG", &env["KUBECONFIG"]).args(args);
    cmd
}

/// `kubectl ARGS`: exit code, stdout, stderr.
fn kubectl_run(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = kubectl(args)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kubectl");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes())
            .expect("writing kubectl's stdin");
    }
    let out = child.wait_with_output().expect("waiting for kubectl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates a toolbox pod running `script` (sh -c) and waits until its container runs.
async fn running_pod(client: &Client, ns: &str, name: &str, script: &str) {
    let mut pod = bare_pod(name);
    let container = &mut pod.spec.as_mut().expect("a spec").containers[0];
    container.image = Some("localhost/slurm-dev/toolbox:latest".into());
    container.command = Some(vec!["sh".into(), "-c".into(), script.into()]);
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    for _ in 0..300 {
        let pod = pods.get(name).await.unwrap();
        let running = pod
            .status
            .and_then(|s| s.container_statuses)
            .is_some_and(|cs| {
                cs.iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            });
        if running {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("pod {ns}/{name} did not run within 60 s");
}

#[tokio::test]
async fn kubectl_logs_reads_tails_and_follows_a_container_and_attach_streams_it() {
    let client = client().await;
    let ns = namespace(&client, "logs").await;
    running_pod(
        &client,
        &ns,
        "talker",
        "echo one; sleep 0.1; echo two >&2; sleep 0.1; echo three; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done",
    )
    .await;
    // Running means started: the first tick comes 0.2 s later (a clean clone's CI read the
    // logs before "three").
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let out = loop {
        let (code, out, err) = kubectl_run(&["logs", "-n", &ns, "talker"], None);
        assert_eq!(code, 0, "{err}");
        if out.contains("tick 0\n") || std::time::Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(out.starts_with("one\ntwo\nthree\ntick 0\n"), "{out}");
    let (_, tail, err) = kubectl_run(&["logs", "-n", &ns, "talker", "--tail=1"], None);
    assert_eq!(tail.lines().count(), 1, "{tail}{err}");
    assert!(tail.starts_with("tick "), "{tail}");
    let (_, stamped, _) = kubectl_run(
        &["logs", "-n", &ns, "talker", "-c", "main", "--timestamps"],
        None,
    );
    let first = stamped.lines().next().unwrap_or_default();
    let (time, text) = first.split_once(' ').unwrap_or_default();
    assert_eq!(text, "one", "{stamped}");
    assert!(time.ends_with('Z') && time.contains('T'), "{first}");
    let (code, _, err) = kubectl_run(&["logs", "-n", &ns, "talker", "--previous"], None);
    assert_ne!(code, 0);
    assert!(err.contains("previous terminated container"), "{err}");

    // -f: a line written after kubectl started comes through
    let seen: u64 = out
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .max()
        .expect("a tick");
    let mut follow = kubectl(&["logs", "-n", &ns, "talker", "-f"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running kubectl logs -f");
    let stdout = follow.stdout.take().expect("stdout");
    let later = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("tick ")?.parse::<u64>().ok())
            .find(|n| *n > seen + 1)
    });
    let later = tokio::time::timeout(Duration::from_secs(20), later).await;
    let _ = follow.kill();
    let _ = follow.wait();
    let later = later
        .expect("kubectl logs -f streamed no new line within 20 s")
        .unwrap();
    assert!(later.is_some_and(|n| n > seen + 1));

    // attach: the running process's output, from now on
    let mut attach = kubectl(&["attach", "-n", &ns, "talker"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running kubectl attach");
    let stdout = attach.stdout.take().expect("stdout");
    let tick = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("tick ")?.parse::<u64>().ok())
    });
    let tick = tokio::time::timeout(Duration::from_secs(20), tick).await;
    let _ = attach.kill();
    let _ = attach.wait();
    let tick = tick
        .expect("kubectl attach printed nothing within 20 s")
        .unwrap();
    assert!(tick.is_some_and(|n| n > seen), "{tick:?}");
}

#[tokio::test]
async fn kubectl_exec_gives_the_commands_output_and_exit_code() {
    let client = client().await;
    let ns = namespace(&client, "exec").await;
    running_pod(&client, &ns, "shell", "exec sleep 3600").await;
    let (code, out, err) = kubectl_run(
        &[
            "exec",
            "-n",
            &ns,
            "shell",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        None,
    );
    assert_eq!((code, out.as_str()), (3, "out\n"), "{err}");
    assert!(err.starts_with("err\n"), "{err}");
    let (code, out, err) = kubectl_run(
        &[
            "exec",
            "-i",
            "-n",
            &ns,
            "shell",
            "--",
            "sh",
            "-c",
            "read x; echo got $x; cat",
        ],
        Some("hello\nrest\n"),
    );
    assert_eq!((code, out.as_str()), (0, "got hello\nrest\n"), "{err}");

    // refused by the API server: a container the pod does not have, a pod on no node
    let (code, _, err) = kubectl_run(
        &["exec", "-n", &ns, "shell", "-c", "nope", "--", "true"],
        None,
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("container nope is not valid for pod shell"),
        "{err}"
    );
    Api::<Pod>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &unscheduled_pod("nowhere"))
        .await
        .unwrap();
    let (code, _, err) = kubectl_run(&["exec", "-n", &ns, "nowhere", "--", "true"], None);
    assert_ne!(code, 0);
    assert!(
        err.contains("pod nowhere does not have a host assigned"),
        "{err}"
    );
}

#[tokio::test]
async fn kubectl_port_forward_reaches_a_port_on_the_pods_loopback() {
    use std::io::{BufRead, Read, Write};
    let client = client().await;
    let ns = namespace(&client, "forward").await;
    running_pod(
        &client,
        &ns,
        "web",
        "mkdir -p /tmp/www && echo hello from the pod > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www",
    )
    .await;
    let mut forward = kubectl(&["port-forward", "-n", &ns, "pod/web", ":8080"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kubectl port-forward");
    let stdout = forward.stdout.take().expect("stdout");
    // "Forwarding from 127.0.0.1:PORT -> 8080"
    let port = tokio::task::spawn_blocking(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let line = lines.next()?.ok()?;
        let port = line
            .strip_prefix("Forwarding from 127.0.0.1:")?
            .split(' ')
            .next()?
            .parse::<u16>()
            .ok();
        // keep reading, so kubectl never blocks on a full pipe
        std::thread::spawn(move || lines.for_each(drop));
        port
    });
    let port = tokio::time::timeout(Duration::from_secs(20), port).await;
    let body = match port {
        Ok(Ok(Some(port))) => tokio::task::spawn_blocking(move || {
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))
                .expect("connecting to the forwarded port");
            conn.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            conn.read_to_string(&mut answer).unwrap();
            answer
        })
        .await
        .unwrap(),
        other => {
            let _ = forward.kill();
            let mut err = String::new();
            let _ = forward
                .stderr
                .take()
                .map(|mut e| e.read_to_string(&mut err));
            panic!("kubectl port-forward printed no port ({other:?}): {err}");
        }
    };
    let _ = forward.kill();
    let _ = forward.wait();
    assert!(
        body.starts_with("HTTP/1.") && body.contains(" 200 OK\r\n"),
        "{body}"
    );
    assert!(body.ends_with("hello from the pod\n"), "{body}");
}
