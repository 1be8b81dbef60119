//! The Helm chart (`charts/slurm-bridge`) rendered by real Helm (no cluster): lint, the
//! Deployment's image, flags (accepted by the binary itself), env, mounts and security context,
//! the config file (parsed by the bridge's own parser), the webhook pieces (the same webhooks
//! `src/webhook/config.rs` builds, pointing at the Service and certificate the chart makes), the
//! RBAC rules, Slinky's values and the schema.

use std::collections::BTreeSet;
use std::process::Command;

use kube_support::webhook::Endpoint;
use serde_json::{Value, json};
use slurm_bridge::config::Config;
use slurm_bridge::webhook::{MUTATE_PATH, VALIDATE_PATH, config as hook_config};
use test_support::helm::objects::{all, args, container, flag, mount, named, one, volume};

const CHART: &str = "slurm-bridge/charts/slurm-bridge";
const NS: &str = "slurm";
const SLINKY_VALUES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/slinky-values.yaml"
);

fn render_as(release: &str, namespace: &str, extra: &[&str]) -> Result<Vec<Value>, String> {
    let text = test_support::helm::template(CHART, release, namespace, extra)?;
    Ok(serde_json::from_str(&text).expect("helm template --json prints a JSON array"))
}

fn render(extra: &[&str]) -> Vec<Value> {
    render_as("slurm-bridge", NS, extra).unwrap_or_else(|e| panic!("{e}"))
}

fn env(objects: &[Value], name: &str) -> Value {
    container(objects)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no env {name}"))
        .clone()
}

fn port(objects: &[Value], name: &str) -> i64 {
    container(objects)["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no container port {name}"))["containerPort"]
        .as_i64()
        .unwrap()
}

/// The config file, through the bridge's own parser (unknown keys are an error there).
fn config(objects: &[Value]) -> Config {
    let text = one(objects, "ConfigMap")["data"]["config.yaml"]
        .as_str()
        .expect("config.yaml in the ConfigMap");
    Config::parse(text)
        .unwrap_or_else(|e| panic!("the rendered config does not parse: {e}\n{text}"))
}

/// The binary's own flag parser accepts the rendered args (`--help` last: clap checks every
/// argument before it, then prints the help and exits 0).
fn binary_accepts(args: &[String]) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurm-bridge"))
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "slurm-bridge refuses the chart's args {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (group, resource, verb, resourceNames) of every rule of a role.
fn rules(role: &Value) -> BTreeSet<(String, String, String, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let names = strings(&rule["resourceNames"]);
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        ![&group, &resource, &verb].contains(&&"*".to_string()),
                        "wildcard in {rule}"
                    );
                    out.insert((group.clone(), resource.clone(), verb, names.clone()));
                }
            }
        }
    }
    out
}

fn grants(
    list: &[(&str, &str, &[&str], &[&str])],
) -> BTreeSet<(String, String, String, Vec<String>)> {
    let mut out = BTreeSet::new();
    for (group, resource, verbs, names) in list {
        for verb in *verbs {
            out.insert((
                group.to_string(),
                resource.to_string(),
                verb.to_string(),
                names.iter().map(|n| n.to_string()).collect(),
            ));
        }
    }
    out
}

/// What the bridge always calls (see templates/rbac.yaml for the code behind each).
fn base_grants() -> Vec<(
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
)> {
    vec![
        (
            "",
            "pods",
            &["get", "list", "watch", "patch", "delete"],
            &[],
        ),
        ("", "pods/binding", &["create"], &[]),
        ("", "pods/status", &["patch"], &[]),
        ("", "nodes", &["list", "watch", "patch"], &[]),
        (
            "",
            "persistentvolumeclaims",
            &["list", "watch", "patch"],
            &[],
        ),
        ("", "persistentvolumes", &["list", "watch"], &[]),
        ("storage.k8s.io", "storageclasses", &["list", "watch"], &[]),
        ("events.k8s.io", "events", &["create", "patch"], &[]),
        ("apps", "replicasets", &["get"], &[]),
        ("apps", "deployments", &["get"], &[]),
        ("apps", "statefulsets", &["get"], &[]),
        ("batch", "jobs", &["get"], &[]),
        ("scheduling.x-k8s.io", "podgroups", &["get"], &[]),
        ("scheduling.x-k8s.io", "podgroups/status", &["patch"], &[]),
        ("jobset.x-k8s.io", "jobsets", &["get"], &[]),
        (
            "leaderworkerset.x-k8s.io",
            "leaderworkersets",
            &["get"],
            &[],
        ),
    ]
}

/// The webhooks the chart rendered, next to those the bridge's code builds for the same
/// config, Service and CA.
fn assert_webhooks_match_the_code(objects: &[Value], ca: Option<&[u8]>) {
    let config = config(objects);
    let service = all(objects, "Service")
        .into_iter()
        .find(|s| s["spec"]["ports"][0]["name"] == "webhook")
        .expect("the webhook Service");
    let service_port = &service["spec"]["ports"][0];
    assert_eq!(service_port["port"], 443);
    assert_eq!(service_port["targetPort"], "webhook");
    let endpoint = Endpoint::Service {
        namespace: service["metadata"]["namespace"].as_str().unwrap().into(),
        name: service["metadata"]["name"].as_str().unwrap().into(),
        port: 443,
    };
    let mutating = one(objects, "MutatingWebhookConfiguration");
    let validating = one(objects, "ValidatingWebhookConfiguration");
    let expected_m = serde_json::to_value(hook_config::mutating(&config, &endpoint, ca)).unwrap();
    let expected_v = serde_json::to_value(hook_config::validating(&config, &endpoint, ca)).unwrap();
    assert_eq!(mutating["webhooks"], expected_m["webhooks"]);
    assert_eq!(validating["webhooks"], expected_v["webhooks"]);
    assert_eq!(
        mutating["webhooks"][0]["clientConfig"]["service"]["path"],
        MUTATE_PATH
    );
    assert_eq!(
        validating["webhooks"][0]["clientConfig"]["service"]["path"],
        VALIDATE_PATH
    );
    // The Service reaches the container's webhook port, which the server listens on.
    let listen = flag(objects, "webhook-addr").unwrap();
    assert_eq!(
        listen.rsplit_once(':').unwrap().1,
        port(objects, "webhook").to_string()
    );
    let selector = &service["spec"]["selector"];
    let pod_labels = &one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"];
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service selects the bridge's pods");
    }
}

#[test]
fn lint_is_clean() {
    let chart = test_support::helm::workspace().join(CHART);
    test_support::helm::helm(&["lint", "--strict", chart.to_str().unwrap()], None)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn default_render_runs_the_binary_as_documented() {
    let objects = render(&[]);
    let deployment = one(&objects, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let c = container(&objects);
    assert_eq!(
        c["image"],
        format!(
            "ghcr.io/slurm-rs/slurm-bridge:{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(deployment["spec"]["replicas"], 1);
    // One replica, no leader election: never two schedulers at once, even during a rollout.
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    assert!(!args(&objects).contains(&"--leader-elect".to_string()));
    assert!(all(&objects, "Role").is_empty() && all(&objects, "PodDisruptionBudget").is_empty());

    // The config file, mounted where --config points.
    let config_path = flag(&objects, "config").unwrap();
    assert_eq!(
        config_path,
        format!("{}/config.yaml", mount(&objects, "config"))
    );
    assert_eq!(
        volume(&objects, "config")["configMap"]["name"],
        one(&objects, "ConfigMap")["metadata"]["name"]
    );
    // The token: the Secret's key as the file SLURM_JWT_FILE names.
    let token_file = env(&objects, "SLURM_JWT_FILE")["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token_file, "/var/run/secrets/slurm/auth-token");
    let secret = &volume(&objects, "slurm-token")["secret"];
    assert_eq!(secret["secretName"], "slurm-bridge-token");
    assert_eq!(
        secret["items"],
        json!([{"key": "auth-token", "path": "auth-token"}])
    );
    assert_eq!(
        format!("{}/auth-token", mount(&objects, "slurm-token")),
        token_file
    );
    assert_eq!(
        env(&objects, "POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert_eq!(
        env(&objects, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );

    // Probes and Services on the ports the binary listens on.
    let health = flag(&objects, "health-addr").unwrap();
    assert_eq!(health, format!("0.0.0.0:{}", port(&objects, "health")));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "health");
    let metrics = flag(&objects, "metrics-addr").unwrap();
    assert_eq!(metrics, format!("0.0.0.0:{}", port(&objects, "metrics")));
    let metrics_service = named(&objects, "Service", "slurm-bridge-metrics");
    assert_eq!(metrics_service["spec"]["ports"][0]["targetPort"], "metrics");
    assert!(all(&objects, "ServiceMonitor").is_empty());

    // Pod security.
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
               "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        c["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
               "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
               "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        pod["serviceAccountName"],
        one(&objects, "ServiceAccount")["metadata"]["name"]
    );

    binary_accepts(&args(&objects));
    // The config roll: the pod template carries the ConfigMap's checksum.
    let before = &deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"];
    let changed = render(&["--set", "config.partition=other"]);
    let after = &one(&changed, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"];
    assert!(before.is_string() && before != after);
}

#[test]
fn the_config_file_is_what_the_bridge_parses() {
    assert_eq!(config(&render(&[])), Config::default());
    let objects = render(&[
        "--set",
        "config.schedulerName=slurm",
        "--set",
        "config.slurmRestApi=https://rest.hpc.example:6820",
        "--set",
        "config.managedNamespaces={ml,batch}",
        "--set",
        "config.mcsLabel=east",
        "--set",
        "config.partition=k8s",
        "--set",
        "config.exclusive=false",
    ]);
    let c = config(&objects);
    assert_eq!(c.scheduler_name, "slurm");
    assert_eq!(c.slurm_rest_api, "https://rest.hpc.example:6820");
    assert_eq!(c.managed_namespaces, ["ml", "batch"]);
    assert_eq!(c.mcs_label, "east");
    assert_eq!(c.partition, "k8s");
    assert!(!c.exclusive);
    assert!(c.managed_namespace_selector.is_none());

    let objects = render(&[
        "--set-json",
        r#"config.managedNamespaceSelector={"matchLabels":{"team":"ml"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["prod"]},{"key":"bridge","operator":"Exists"}]}"#,
    ]);
    let selector = config(&objects).managed_namespace_selector.unwrap();
    assert_eq!(selector.match_labels["team"], "ml");
    assert_eq!(selector.match_expressions.len(), 2);
}

#[test]
fn an_identity_policy_in_the_values_reaches_the_bridge() {
    use slurm_bridge::identity_policy::{IdRange, PriorityLimit};
    let objects = render(&[
        "--set-json",
        r#"config.identityPolicy={"default":{"userIds":[],"maxPriority":"forbidden"},"namespaces":{"ml":{"userIds":[1000,"2000-2999"],"groupIds":[4294967294],"accounts":["ml"],"partitions":["slurm-bridge","gpu"],"maxPriority":1000}}}"#,
    ]);
    let policy = config(&objects).identity_policy;
    let default = policy.default.unwrap();
    assert_eq!(default.user_ids.as_deref(), Some(&[][..]));
    assert_eq!(default.max_priority, Some(PriorityLimit::Forbidden));
    let ml = &policy.namespaces["ml"];
    assert_eq!(
        ml.user_ids.as_deref().unwrap(),
        [
            IdRange {
                first: 1000,
                last: 1000
            },
            IdRange {
                first: 2000,
                last: 2999
            }
        ]
    );
    // Helm reads numbers as floats: the largest ids must still come through whole.
    assert_eq!(ml.group_ids.as_deref().unwrap()[0].first, 4294967294);
    assert_eq!(ml.max_priority, Some(PriorityLimit::Max(1000)));
    assert_eq!(ml.accounts.as_deref().unwrap(), ["ml"]);

    // The schema names a typo or a malformed rule.
    for (set, named) in [
        (
            r#"config.identityPolicy={"namespaces":{"ml":{"userIdz":[]}}}"#,
            "userIdz",
        ),
        (
            r#"config.identityPolicy={"default":{"maxPriority":"high"}}"#,
            "maxPriority",
        ),
        (
            r#"config.identityPolicy={"default":{"userIds":["root"]}}"#,
            "userIds",
        ),
    ] {
        let err = render_as("slurm-bridge", NS, &["--set-json", set]).unwrap_err();
        assert!(err.contains(named), "{set}: {err}");
    }
}

#[test]
fn the_memory_limit_is_set() {
    // The figures behind them are in values.yaml (peak RSS 137 MB at 5,000 pods).
    assert_eq!(
        container(&render(&[]))["resources"],
        json!({"requests": {"cpu": "100m", "memory": "192Mi"}, "limits": {"memory": "512Mi"}})
    );
}

#[test]
fn webhook_with_cert_manager() {
    let objects = render(&[]);
    assert_webhooks_match_the_code(&objects, None);
    let certificate = one(&objects, "Certificate");
    let cert_name = certificate["metadata"]["name"].as_str().unwrap();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let o = one(&objects, kind);
        assert_eq!(
            o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{NS}/{cert_name}")
        );
        assert!(o["webhooks"][0]["clientConfig"]["caBundle"].is_null());
    }
    // The certificate names the Service as the API server calls it, lands in the Secret
    // mounted where --webhook-cert-dir points, and comes from the chart's Issuer.
    let service = named(&objects, "Service", "slurm-bridge-webhook");
    let endpoint = Endpoint::Service {
        namespace: NS.into(),
        name: service["metadata"]["name"].as_str().unwrap().into(),
        port: 443,
    };
    let dns: Vec<&str> = certificate["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    for name in endpoint.certificate_names().unwrap() {
        assert!(dns.contains(&name.as_str()), "{name} not in {dns:?}");
    }
    assert_eq!(
        volume(&objects, "webhook-cert")["secret"]["secretName"],
        certificate["spec"]["secretName"]
    );
    assert_eq!(
        flag(&objects, "webhook-cert-dir").unwrap(),
        mount(&objects, "webhook-cert")
    );
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        one(&objects, "Issuer")["metadata"]["name"]
    );
    assert!(!args(&objects).contains(&"--webhook-self-signed".to_string()));
    // Every pod answers reviews, the standby and one still waiting for slurmrestd too.
    assert_eq!(service["spec"]["publishNotReadyAddresses"], true);
    // The chart writes the configurations: the bridge needs no rights on them.
    let role = rules(one(&objects, "ClusterRole"));
    assert!(
        role.iter()
            .all(|(group, ..)| group != "admissionregistration.k8s.io")
    );

    // An issuer of the cluster's instead of the chart's.
    let objects = render(&[
        "--set",
        "webhook.certManager.issuerRef.kind=ClusterIssuer",
        "--set",
        "webhook.certManager.issuerRef.name=corp-ca",
    ]);
    assert!(all(&objects, "Issuer").is_empty());
    assert_eq!(
        one(&objects, "Certificate")["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp-ca"})
    );
}

#[test]
fn webhook_with_a_namespace_selector() {
    let objects = render(&[
        "--set-json",
        r#"config.managedNamespaceSelector={"matchLabels":{"team":"ml"},"matchExpressions":[{"key":"tier","operator":"In","values":["gpu"]},{"key":"bridge","operator":"Exists"}]}"#,
    ]);
    assert_webhooks_match_the_code(&objects, None);
    // The webhook then reads namespaces' labels.
    assert!(rules(one(&objects, "ClusterRole")).contains(&(
        String::new(),
        "namespaces".into(),
        "get".into(),
        vec![]
    )));
}

#[test]
fn webhook_with_an_existing_certificate() {
    let pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
    let objects = render(&[
        "--set",
        "webhook.certManager.enabled=false",
        "--set",
        "webhook.tls.existingSecret=bridge-tls",
        "--set",
        &format!("webhook.tls.caBundle={b64}"),
    ]);
    assert_webhooks_match_the_code(&objects, Some(pem));
    assert!(all(&objects, "Certificate").is_empty() && all(&objects, "Issuer").is_empty());
    assert_eq!(
        volume(&objects, "webhook-cert")["secret"]["secretName"],
        "bridge-tls"
    );
    let err = render_as(
        "slurm-bridge",
        NS,
        &[
            "--set",
            "webhook.certManager.enabled=false",
            "--set",
            "webhook.tls.existingSecret=bridge-tls",
        ],
    )
    .unwrap_err();
    assert!(err.contains("webhook.tls.caBundle"), "{err}");
}

#[test]
fn webhook_made_by_the_binary() {
    let objects = render(&["--set", "webhook.certManager.enabled=false"]);
    // Helm owns the configurations (so an uninstall removes them); the binary writes its CA into
    // them. No certificate.
    assert_webhooks_match_the_code(&objects, None);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let o = one(&objects, kind);
        assert!(o["metadata"]["annotations"].is_null(), "{kind}: {o}");
    }
    for kind in ["Certificate", "Issuer"] {
        assert!(all(&objects, kind).is_empty(), "{kind} rendered");
    }
    let a = args(&objects);
    assert!(a.contains(&"--webhook-self-signed".to_string()), "{a:?}");
    binary_accepts(&a);
    // --webhook-service names the chart's Service, on its port.
    let endpoint = Endpoint::parse_service(&flag(&objects, "webhook-service").unwrap()).unwrap();
    let service = named(&objects, "Service", "slurm-bridge-webhook");
    assert_eq!(
        endpoint,
        Endpoint::Service {
            namespace: NS.into(),
            name: "slurm-bridge-webhook".into(),
            port: service["spec"]["ports"][0]["port"].as_i64().unwrap() as i32,
        }
    );
    assert!(
        container(&objects)["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["name"] != "webhook-cert")
    );
    // Rights to read and update exactly the two configurations, not to create any.
    const NAME: &[&str] = &[hook_config::CONFIGURATION_NAME];
    let mut expected = base_grants();
    expected.push((
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &["get", "update"],
        NAME,
    ));
    expected.push((
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &["get", "update"],
        NAME,
    ));
    assert_eq!(rules(one(&objects, "ClusterRole")), grants(&expected));

    // One CA per pod: more than one replica is refused with a message saying why.
    let err = render_as(
        "slurm-bridge",
        NS,
        &[
            "--set",
            "webhook.certManager.enabled=false",
            "--set",
            "replicas=2",
        ],
    )
    .unwrap_err();
    assert!(err.contains("replicas: 1"), "{err}");
}

#[test]
fn webhook_off() {
    let objects = render(&["--set", "webhook.enabled=false"]);
    assert_eq!(flag(&objects, "webhook-addr").unwrap(), "0");
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Certificate",
    ] {
        assert!(all(&objects, kind).is_empty(), "{kind} rendered");
    }
    assert_eq!(
        all(&objects, "Service").len(),
        1,
        "only the metrics Service"
    );
    binary_accepts(&args(&objects));
}

#[test]
fn rbac_is_what_the_code_calls() {
    let objects = render(&[]);
    let role = one(&objects, "ClusterRole");
    assert_eq!(rules(role), grants(&base_grants()));
    let binding = one(&objects, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "slurm-bridge", "namespace": NS}])
    );

    // Leader election: the Lease slurm-bridge in the pod's namespace (POD_NAMESPACE).
    let objects = render(&["--set", "replicas=3"]);
    assert!(args(&objects).contains(&"--leader-elect".to_string()));
    let role = one(&objects, "Role");
    assert_eq!(role["metadata"]["namespace"], NS);
    assert_eq!(
        rules(role),
        grants(&[
            (
                "coordination.k8s.io",
                "leases",
                &["get", "patch"],
                &["slurm-bridge"]
            ),
            ("coordination.k8s.io", "leases", &["create"], &[]),
        ])
    );
    let binding = one(&objects, "RoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["metadata"]["namespace"], NS);
    assert_eq!(binding["subjects"][0]["name"], "slurm-bridge");

    let objects = render(&["--set", "rbac.create=false"]);
    assert!(
        all(&objects, "ClusterRole").is_empty() && all(&objects, "ClusterRoleBinding").is_empty()
    );
}

#[test]
fn several_replicas_elect_a_leader() {
    let objects = render(&["--set", "replicas=2"]);
    let deployment = one(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );
    // A standby is healthy, not ready (/readyz waits for the Lease), so readiness is /healthz.
    assert_eq!(
        container(&objects)["readinessProbe"]["httpGet"]["path"],
        "/healthz"
    );
    let pdb = one(&objects, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    binary_accepts(&args(&objects));
}

#[test]
fn a_slinky_values_file_renders() {
    let objects = render(&["-f", SLINKY_VALUES]);
    // One Deployment of our binary, not Slinky's three images.
    assert_eq!(all(&objects, "Deployment").len(), 1);
    assert!(
        container(&objects)["image"]
            .as_str()
            .unwrap()
            .starts_with("ghcr.io/slurm-rs/slurm-bridge:")
    );
    let deployment = one(&objects, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert!(args(&objects).contains(&"--leader-elect".to_string()));
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    // Slinky's tolerations come after the one of the bridge's own taint.
    assert_eq!(
        pod["tolerations"][0]["key"],
        "slinky.slurm.net/managed-node"
    );
    assert_eq!(pod["tolerations"][0]["value"], "slurm-bridge-scheduler");
    assert_eq!(
        pod["tolerations"][1]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    assert_eq!(
        container(&objects)["resources"],
        json!({"requests": {"cpu": "250m", "memory": "256Mi"}})
    );
    assert_eq!(
        one(&objects, "PodDisruptionBudget")["spec"]["minAvailable"],
        1
    );

    let c = config(&objects);
    assert_eq!(c.scheduler_name, "slurm-bridge-scheduler");
    assert_eq!(c.mcs_label, "k8s-east");
    assert_eq!(c.partition, "kubernetes");
    assert_eq!(c.slurm_rest_api, "http://slurm-restapi.hpc:6820");
    assert_eq!(c.managed_namespaces, ["ml-team", "batch"]);
    assert!(
        c.managed_namespace_selector.is_none(),
        "Slinky's {{}} means unset"
    );

    let secret = &volume(&objects, "slurm-token")["secret"];
    assert_eq!(secret["secretName"], "bridge-jwt");
    assert_eq!(
        secret["items"],
        json!([{"key": "SLURM_JWT", "path": "auth-token"}])
    );
    assert_eq!(
        one(&objects, "Certificate")["spec"]["duration"],
        "2160h0m0s"
    );
    assert_webhooks_match_the_code(&objects, None);
    binary_accepts(&args(&objects));

    // Slinky's older form: the Secret's name alone.
    let objects = render(&[
        "-f",
        SLINKY_VALUES,
        "--set",
        "sharedConfig.slurmJwtSecret=old-jwt",
    ]);
    let secret = &volume(&objects, "slurm-token")["secret"];
    assert_eq!(secret["secretName"], "old-jwt");
    assert_eq!(secret["items"][0]["key"], "auth-token");

    // admission.enabled false turns the webhook off, certManager false the binary's own CA.
    let objects = render(&["-f", SLINKY_VALUES, "--set", "admission.enabled=false"]);
    assert_eq!(flag(&objects, "webhook-addr").unwrap(), "0");
    let objects = render(&[
        "-f",
        SLINKY_VALUES,
        "--set",
        "scheduler.replicaCount=1",
        "--set",
        "scheduler.leaderElect=false",
        "--set",
        "admission.certManager.enabled=false",
    ]);
    assert!(args(&objects).contains(&"--webhook-self-signed".to_string()));
}

#[test]
fn typos_are_refused_by_the_schema() {
    for (set, key) in [
        ("config.schedulerNmae=x", "schedulerNmae"),
        ("schedulerConfig.partiton=x", "partiton"),
        ("webhook.certManger.enabled=false", "certManger"),
        ("replica=2", "replica"),
    ] {
        let err = render_as("slurm-bridge", NS, &["--set", set]).unwrap_err();
        assert!(err.contains(key), "{set}: {err}");
    }
    let err = render_as(
        "slurm-bridge",
        NS,
        &["--set", "config.slurmRestApi=slurm:6820"],
    )
    .unwrap_err();
    assert!(err.contains("slurmRestApi"), "{err}");
    let err = render_as("slurm-bridge", NS, &["--set", "jobPoll=often"]).unwrap_err();
    assert!(err.contains("jobPoll"), "{err}");
}

#[test]
fn the_bridge_never_manages_its_own_namespace() {
    let err = render_as("slurm-bridge", "slurm-bridge", &[]).unwrap_err();
    assert!(err.contains("own namespace"), "{err}");
}

#[test]
fn a_token_from_the_operator() {
    let objects = render(&[
        "--set",
        "token.create=true",
        "--set",
        "token.jwtKeyRef.name=hpc-auth-jwt",
    ]);
    let token = one(&objects, "Token");
    assert_eq!(token["apiVersion"], "slinky.slurm.net/v1beta1");
    assert_eq!(token["metadata"]["namespace"], NS);
    assert_eq!(
        token["spec"],
        json!({"username": "slurm", "lifetime": "24h", "refresh": true,
               "jwtKeyRef": {"name": "hpc-auth-jwt", "key": "jwt.key"},
               "secretRef": {"name": "slurm-bridge-token", "key": "auth-token"}})
    );
    let secret = &volume(&objects, "slurm-token")["secret"];
    assert_eq!(secret["secretName"], token["spec"]["secretRef"]["name"]);
    assert_eq!(secret["items"][0]["key"], token["spec"]["secretRef"]["key"]);
    assert!(all(&render(&[]), "Token").is_empty());
}

#[test]
fn service_monitor() {
    let objects = render(&[
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prom",
    ]);
    let monitor = one(&objects, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    let service = named(&objects, "Service", "slurm-bridge-metrics");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "selects the metrics Service"
        );
    }
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
}
