//! The Helm charts `charts/slurm-operator` and `charts/slurm-operator-crds`, rendered by real
//! Helm (`test_support::helm`, `cargo xtask helm setup`) and held against what the binary does:
//! its flags, its webhook server and configuration, the API calls behind the RBAC rules. No
//! cluster is needed.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};
use slurm_operator::webhook::{self, Endpoint};

const CHART: &str = "slurm-operator/charts/slurm-operator";
const CRD_CHART: &str = "slurm-operator/charts/slurm-operator-crds";
const NS: &str = "slinky";

/// `helm template slurm-operator CHART -n slinky ARGS`, as objects.
fn render(args: &[&str]) -> Vec<Value> {
    let json = test_support::helm::template(CHART, "slurm-operator", NS, args)
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&json).expect("helm's JSON")
}

fn objects<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

fn object<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {} objects", objs.len()))
}

fn container(objs: &[Value]) -> &Value {
    &object(objs, "Deployment", "slurm-operator")["spec"]["template"]["spec"]["containers"][0]
}

fn args(objs: &[Value]) -> Vec<&str> {
    let args = container(objs)["args"].as_array().expect("args");
    args.iter().map(|a| a.as_str().expect("a string")).collect()
}

/// `group/resource` → verbs (sorted) of a Role's or ClusterRole's rules (`name` rules apart).
fn rules(role: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().expect("rules") {
        let names = rule.get("resourceNames").map(|n| format!("{n}"));
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let mut key = format!("{}/{}", group.as_str().unwrap(), resource.as_str().unwrap());
                if let Some(n) = &names {
                    key.push_str(&format!(" {n}"));
                }
                let verbs = out.entry(key).or_default();
                verbs.extend(
                    rule["verbs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_owned()),
                );
                verbs.sort();
                verbs.dedup();
            }
        }
    }
    out
}

fn table(rows: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    rows.iter()
        .map(|(k, verbs)| {
            let mut v: Vec<String> = verbs.iter().map(|s| (*s).to_owned()).collect();
            v.sort();
            (k.to_string(), v)
        })
        .collect()
}

/// What the reconcilers and the webhook call on namespaced resources (README, RBAC).
fn namespaced_rules() -> BTreeMap<String, Vec<String>> {
    const READ: &[&str] = &["list", "watch"];
    const CHILD: &[&str] = &["get", "list", "watch", "create", "patch"];
    table(&[
        ("slinky.slurm.net/controllers", &["get", "list", "watch"]),
        ("slinky.slurm.net/accountings", &["get", "list", "watch"]),
        ("slinky.slurm.net/nodesets", &["list", "watch", "patch"]),
        ("slinky.slurm.net/loginsets", READ),
        ("slinky.slurm.net/restapis", READ),
        ("slinky.slurm.net/tokens", READ),
        ("slinky.slurm.net/controllers/status", &["patch"]),
        ("slinky.slurm.net/nodesets/status", &["patch"]),
        ("slinky.slurm.net/loginsets/status", &["patch"]),
        ("slinky.slurm.net/restapis/status", &["patch"]),
        ("slinky.slurm.net/accountings/status", &["patch"]),
        ("slinky.slurm.net/tokens/status", &["patch"]),
        ("slinky.slurm.net/controllers/finalizers", &["update"]),
        ("slinky.slurm.net/nodesets/finalizers", &["update"]),
        ("slinky.slurm.net/loginsets/finalizers", &["update"]),
        ("slinky.slurm.net/restapis/finalizers", &["update"]),
        ("slinky.slurm.net/accountings/finalizers", &["update"]),
        ("slinky.slurm.net/tokens/finalizers", &["update"]),
        ("/configmaps", CHILD),
        ("/secrets", CHILD),
        ("/services", CHILD),
        ("apps/statefulsets", CHILD),
        ("apps/deployments", CHILD),
        (
            "apps/controllerrevisions",
            &["list", "watch", "create", "patch", "delete"],
        ),
        (
            "policy/poddisruptionbudgets",
            &["get", "list", "watch", "create", "patch"],
        ),
        ("/pods", &["list", "watch", "create", "patch", "delete"]),
        ("/pods/status", &["patch"]),
        (
            "/persistentvolumeclaims",
            &["get", "list", "create", "patch"],
        ),
        ("events.k8s.io/events", &["create", "patch"]),
        (
            "monitoring.coreos.com/servicemonitors",
            &["get", "create", "patch", "delete"],
        ),
    ])
}

fn cluster_rules() -> BTreeMap<String, Vec<String>> {
    table(&[("/nodes", &["list", "watch"])])
}

#[test]
fn the_deployment_runs_the_operator_image_with_its_flags() {
    let objs = render(&[]);
    let c = container(&objs);
    assert_eq!(
        c["image"],
        concat!(
            "ghcr.io/slurm-rs/slurm-operator:",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    let cert_dir = format!("--webhook-cert-dir={}", webhook::DEFAULT_CERT_DIR);
    assert_eq!(
        args(&objs),
        [
            "run",
            "--leader-elect",
            "--leader-elect-namespace=slinky",
            "--health-addr=:8081",
            "--metrics-addr=:8080",
            "--log-format=text",
            "--webhook-addr=:9443",
            "--webhook-timeout-seconds=10",
            cert_dir.as_str(),
        ]
    );
    let mount = &c["volumeMounts"][0];
    assert_eq!(mount["mountPath"], webhook::DEFAULT_CERT_DIR);
    let pod = &object(&objs, "Deployment", "slurm-operator")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "slurm-operator-webhook-ca"
    );
    assert_eq!(
        object(&objs, "Deployment", "slurm-operator")["spec"]["replicas"],
        1
    );
}

#[test]
fn probes_hit_the_health_endpoints() {
    let objs = render(&[]);
    let c = container(&objs);
    let port = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no port {name}"))["containerPort"]
            .clone()
    };
    assert_eq!(port("health"), 8081);
    assert_eq!(port("metrics"), 8080);
    assert_eq!(port("webhook"), 9443);
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "health"})
    );
    // The webhook server's own /healthz: every replica serves it, leader or not.
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "webhook", "scheme": "HTTPS"})
    );
    let off = render(&["--set", "webhook.enabled=false"]);
    let c = container(&off);
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "health"})
    );
    assert!(args(&off).contains(&"--webhook-addr=0"));
    assert!(objects(&off, "ValidatingWebhookConfiguration").is_empty());
}

#[test]
fn pod_and_container_are_locked_down() {
    let objs = render(&[]);
    let pod = &object(&objs, "Deployment", "slurm-operator")["spec"]["template"]["spec"];
    let p = &pod["securityContext"];
    assert_eq!(p["runAsNonRoot"], true);
    assert_eq!(
        (&p["runAsUser"], &p["runAsGroup"]),
        (&json!(65532), &json!(65532))
    );
    assert_eq!(p["seccompProfile"]["type"], "RuntimeDefault");
    let c = &container(&objs)["securityContext"];
    assert_eq!(c["readOnlyRootFilesystem"], true);
    assert_eq!(c["allowPrivilegeEscalation"], false);
    assert_eq!(c["capabilities"]["drop"], json!(["ALL"]));
    let requests = &container(&objs)["resources"]["requests"];
    assert!(requests["cpu"].is_string() && requests["memory"].is_string());
    // A memory limit (the values justify it by the measured peak), and no CPU limit.
    let limits = &container(&objs)["resources"]["limits"];
    assert_eq!(limits["memory"], "512Mi");
    assert!(limits.get("cpu").is_none());
}

/// The chart's arguments get through the binary's own parser: it fails only at the API server.
#[test]
fn the_binary_accepts_the_charts_arguments() {
    let objs = render(&[
        "--set",
        "operator.namespaces={slurm,other}",
        "--set",
        "operator.slurmPoll=10s",
        "--set",
        "operator.clusterDomain=example.org",
        "--set",
        "operator.logFormat=json",
        "--set",
        "propagatedNodeConditions={GpuUnhealthy,KernelDeadlock}",
    ]);
    let args = args(&objs);
    assert!(args.contains(&"--namespaces=slurm,other"), "{args:?}");
    assert!(
        args.contains(&"--propagated-node-conditions=GpuUnhealthy,KernelDeadlock"),
        "{args:?}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_slurm-operator"))
        .args(&args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("running slurm-operator");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot reach the Kubernetes API server"),
        "{stderr}"
    );
}

#[test]
fn the_service_account_is_bound_to_the_roles() {
    let objs = render(&[]);
    let pod = &object(&objs, "Deployment", "slurm-operator")["spec"]["template"]["spec"];
    let sa = pod["serviceAccountName"].as_str().unwrap();
    object(&objs, "ServiceAccount", sa);
    let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": NS}]);
    let binding = object(&objs, "ClusterRoleBinding", "slurm-operator");
    assert_eq!(binding["subjects"], subject);
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    let role = object(
        &objs,
        "ClusterRole",
        binding["roleRef"]["name"].as_str().unwrap(),
    );
    let mut want = namespaced_rules();
    want.extend(cluster_rules());
    assert_eq!(rules(role), want);
    // Leader election: the Lease in the release namespace, by name where RBAC allows it.
    let binding = object(&objs, "RoleBinding", "slurm-operator-leader-election");
    assert_eq!(binding["metadata"]["namespace"], NS);
    assert_eq!(binding["subjects"], subject);
    let role = object(&objs, "Role", "slurm-operator-leader-election");
    assert_eq!(role["metadata"]["namespace"], NS);
    let lease = format!(
        "coordination.k8s.io/leases [\"{}\"]",
        slurm_operator::leader::LEASE_NAME
    );
    assert_eq!(
        rules(role),
        table(&[
            ("coordination.k8s.io/leases", &["create"]),
            (lease.as_str(), &["get", "patch"]),
        ])
    );
    assert!(objects(&objs, "Role").len() == 1 && objects(&objs, "RoleBinding").len() == 1);
}

#[test]
fn namespaces_get_roles_and_only_nodes_are_cluster_wide() {
    let objs = render(&["--set", "operator.namespaces=slurm\\,other"]);
    assert!(args(&objs).contains(&"--namespaces=slurm,other"));
    assert_eq!(
        rules(object(&objs, "ClusterRole", "slurm-operator")),
        cluster_rules()
    );
    for ns in ["slurm", "other"] {
        let role = objects(&objs, "Role")
            .into_iter()
            .find(|r| r["metadata"]["namespace"] == ns && r["metadata"]["name"] == "slurm-operator")
            .unwrap_or_else(|| panic!("no Role in {ns}"));
        assert_eq!(rules(role), namespaced_rules());
        let binding = objects(&objs, "RoleBinding")
            .into_iter()
            .find(|b| b["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("no RoleBinding in {ns}"));
        assert_eq!(binding["roleRef"]["name"], "slurm-operator");
        assert_eq!(binding["subjects"][0]["namespace"], NS);
    }
    // The webhook validates (and looks things up) only where the operator may read.
    let vwc = object(
        &objs,
        "ValidatingWebhookConfiguration",
        "slurm-operator-webhook",
    );
    for hook in vwc["webhooks"].as_array().unwrap() {
        assert_eq!(
            hook["namespaceSelector"]["matchExpressions"][0],
            json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["slurm", "other"]})
        );
    }
}

/// The chart's configuration is the binary's own (`webhook::configuration`) but for the
/// caBundle, and its Service leads to the port the binary listens on.
#[test]
fn the_webhook_configuration_is_the_binarys() {
    let objs = render(&[]);
    let vwc = object(
        &objs,
        "ValidatingWebhookConfiguration",
        webhook::CONFIGURATION_NAME,
    );
    let service = vwc["webhooks"][0]["clientConfig"]["service"]["name"]
        .as_str()
        .unwrap();
    let ours = webhook::configuration(
        &Endpoint::parse_service(&format!("{service}.{NS}")).unwrap(),
        None,
    );
    let mut rendered = vwc["webhooks"].clone();
    for hook in rendered.as_array_mut().unwrap() {
        hook["clientConfig"]
            .as_object_mut()
            .unwrap()
            .remove("caBundle");
    }
    assert_eq!(rendered, serde_json::to_value(&ours.webhooks).unwrap());

    let svc = object(&objs, "Service", service);
    assert_eq!(svc["metadata"]["namespace"], NS);
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}])
    );
    let deployment = object(&objs, "Deployment", "slurm-operator");
    assert_eq!(
        svc["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert!(args(&objs).contains(&"--webhook-addr=:9443"));
}

/// The Helm-made certificate: its key fits, it names the Service the API server calls, and it
/// chains to the caBundle of every webhook. Checked by serving the binary's webhook router with
/// it and calling the readiness path as the API server would (TLS to `<svc>.<ns>.svc`).
#[tokio::test]
async fn the_helm_certificate_serves_the_webhook_under_the_ca_bundle() {
    let objs = render(&[]);
    let secret = object(&objs, "Secret", "slurm-operator-webhook-ca");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let vwc = object(
        &objs,
        "ValidatingWebhookConfiguration",
        "slurm-operator-webhook",
    );
    for hook in vwc["webhooks"].as_array().unwrap() {
        assert_eq!(hook["clientConfig"]["caBundle"], secret["data"]["ca.crt"]);
    }
    let data = |key: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap()
    };
    kube_support::tls::install_crypto_provider();
    let key = kube_support::tls::certified_key(&data("tls.crt"), &data("tls.key"))
        .expect("the key fits the certificate");

    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let unused =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let router = webhook::server::router(unused);
    tokio::spawn(kube_support::webhook::serve(
        addr,
        kube_support::tls::ServingCert::new(key),
        router,
    ));
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.root_cert = Some(vec![pem_der(&data("ca.crt"))]);
    config.tls_server_name = Some(format!("slurm-operator-webhook.{NS}.svc"));
    let client = kube::Client::try_from(config).unwrap();
    let request = axum::http::Request::get("/healthz")
        .body(Vec::new())
        .unwrap();
    assert_eq!(
        client
            .request_text(request)
            .await
            .expect("TLS to the Service name"),
        "ok"
    );
}

/// The DER of a one-certificate PEM.
fn pem_der(pem: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(pem.to_vec()).unwrap();
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

#[test]
fn cert_manager_issues_the_mounted_secret_and_injects_its_ca() {
    let objs = render(&["--set", "certManager.enabled=true"]);
    assert!(objects(&objs, "Secret").is_empty(), "cert-manager makes it");
    let cert = object(&objs, "Certificate", "slurm-operator-webhook-ca");
    assert_eq!(cert["spec"]["secretName"], "slurm-operator-webhook-ca");
    assert_eq!(
        cert["spec"]["dnsNames"],
        json!([
            "slurm-operator-webhook",
            "slurm-operator-webhook.slinky",
            "slurm-operator-webhook.slinky.svc"
        ])
    );
    let issuer = object(
        &objs,
        "Issuer",
        cert["spec"]["issuerRef"]["name"].as_str().unwrap(),
    );
    let ca = object(
        &objs,
        "Certificate",
        issuer["spec"]["ca"]["secretName"].as_str().unwrap(),
    );
    assert_eq!(ca["spec"]["isCA"], true);
    let vwc = object(
        &objs,
        "ValidatingWebhookConfiguration",
        "slurm-operator-webhook",
    );
    assert_eq!(
        vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "slinky/slurm-operator-webhook-ca"
    );
    assert!(vwc["webhooks"][0]["clientConfig"].get("caBundle").is_none());
    let pod = &object(&objs, "Deployment", "slurm-operator")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        cert["spec"]["secretName"]
    );
}

#[test]
fn metrics_service_monitor_and_pdb() {
    let objs = render(&[]);
    let svc = object(&objs, "Service", "slurm-operator");
    assert_eq!(svc["spec"]["ports"][0]["name"], "metrics");
    assert!(objects(&objs, "ServiceMonitor").is_empty());
    assert!(objects(&objs, "PodDisruptionBudget").is_empty());
    let objs = render(&[
        "--set",
        "operator.serviceMonitor.enabled=true",
        "--set",
        "operator.replicas=2",
    ]);
    let monitor = object(&objs, "ServiceMonitor", "slurm-operator");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let labels = svc["metadata"]["labels"].as_object().unwrap();
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(labels.get(k), Some(v), "{k}");
    }
    let pdb = object(&objs, "PodDisruptionBudget", "slurm-operator");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

/// A values file written for Slinky's chart installs: Slinky's image is replaced, its keys for
/// the second Deployment are ignored, the rest is used.
#[test]
fn a_slinky_values_file_renders() {
    let file = format!(
        "{}/tests/fixtures/slinky-operator-values.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let objs = render(&["-f", &file]);
    let c = container(&objs);
    assert_eq!(
        c["image"],
        concat!(
            "ghcr.io/slurm-rs/slurm-operator:",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(args(&objs).contains(&"--namespaces=slurm,slurm-dev"));
    let env = &c["env"][0];
    assert_eq!(
        (&env["name"], &env["value"]),
        (&json!("RUST_LOG"), &json!("debug"))
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    let deployment = object(&objs, "Deployment", "slurm-operator");
    assert_eq!(deployment["spec"]["replicas"], 2);
    object(&objs, "PodDisruptionBudget", "slurm-operator");
    object(&objs, "Certificate", "slurm-operator-webhook-ca");
    object(&objs, "ConfigMap", "extra-config");
    assert_eq!(
        objects(&objs, "Deployment").len(),
        1,
        "no second (webhook) Deployment"
    );
}

#[test]
fn a_typo_of_our_keys_is_refused() {
    let err = test_support::helm::template(
        CHART,
        "slurm-operator",
        NS,
        &["--set", "operator.replcas=2"],
    )
    .expect_err("the schema refuses operator.replcas");
    assert!(err.contains("replcas"), "{err}");
}

/// The CRD chart renders the committed CRDs byte for byte (the one copy: the tests apply the
/// same files); `crds.enabled` brings the same six into the operator's release.
#[test]
fn the_crd_chart_renders_exactly_the_committed_crds() {
    let chart = test_support::helm::workspace().join(CRD_CHART);
    let text = test_support::helm::helm(
        &["template", "slurm-operator-crds", chart.to_str().unwrap()],
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rendered: Vec<(&str, &str)> = text
        .split("---\n# Source: ")
        .filter(|d| !d.is_empty())
        .map(|d| d.split_once('\n').expect("a path line"))
        .collect();
    let files = common::crd_files();
    assert_eq!(files.len(), 6);
    assert_eq!(rendered.len(), files.len());
    for ((source, body), file) in rendered.iter().zip(&files) {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(*source, format!("slurm-operator-crds/templates/{name}"));
        let committed = std::fs::read_to_string(file).unwrap();
        assert!(
            body.trim_end() == committed.trim_end(),
            "{name} renders differently"
        );
    }

    let names = |objs: &[Value]| -> Vec<String> {
        let mut n: Vec<String> = objects(objs, "CustomResourceDefinition")
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        n.sort();
        n
    };
    let with_crds = names(&render(&["--set", "crds.enabled=true"]));
    let plurals: Vec<String> = files
        .iter()
        .map(|f| {
            let name = f.file_stem().unwrap().to_str().unwrap();
            let (group, plural) = name.split_once('_').unwrap();
            format!("{plural}.{group}")
        })
        .collect();
    assert_eq!(with_crds, plurals);
    assert!(names(&render(&[])).is_empty());
}
