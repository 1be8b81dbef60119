//! The Helm chart (`charts/slurm-exporter`) rendered by real Helm (no cluster, no Slurm): lint,
//! the Deployment's image, flags and env (accepted by the binary itself), token mounts, security
//! context, Service, ServiceMonitor, the PrometheusRule (the rules file, which promtool checks and
//! unit-tests), the dashboard ConfigMap (the very file the dashboard test checks) and the schema.

use std::process::Command;

use serde_json::{Value, json};
use test_support::helm::objects::{all, args, container, flag, mount, one, pod, volume};

const CHART: &str = "slurm-exporter/charts/slurm-exporter";
const NS: &str = "monitoring";
const DASHBOARD: &str = include_str!("../charts/slurm-exporter/dashboards/slurm.json");

fn try_render(extra: &[&str]) -> Result<Vec<Value>, String> {
    let text = test_support::helm::template(CHART, "slurm-exporter", NS, extra)?;
    Ok(serde_json::from_str(&text).expect("helm template --json prints a JSON array"))
}

fn render(extra: &[&str]) -> Vec<Value> {
    try_render(extra).unwrap_or_else(|e| panic!("{e}"))
}

/// The plain (`value:`) environment variables.
fn env(objects: &[Value]) -> Vec<(String, String)> {
    container(objects)["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect()
}

fn env_var(objects: &[Value], name: &str) -> Option<String> {
    env(objects)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

/// The file (mount path + item path) that the one item of Secret volume `name` becomes.
fn secret_file(objects: &[Value], name: &str) -> (String, String, String) {
    let secret = &volume(objects, name)["secret"];
    let items = secret["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    (
        secret["secretName"].as_str().unwrap().into(),
        items[0]["key"].as_str().unwrap().into(),
        format!(
            "{}/{}",
            mount(objects, name),
            items[0]["path"].as_str().unwrap()
        ),
    )
}

/// The binary's own parser accepts the rendered args and env (`--help` last: clap checks every
/// argument and variable, then prints the help and exits 0).
fn binary_accepts(objects: &[Value]) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurm-exporter"))
        .args(args(objects))
        .arg("--help")
        .env_clear()
        .envs(env(objects))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "slurm-exporter refuses the chart's args {:?}: {}",
        args(objects),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lint_is_clean() {
    let chart = test_support::helm::workspace().join(CHART);
    test_support::helm::helm(&["lint", "--strict", chart.to_str().unwrap()], None)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn default_render() {
    let objects = render(&[]);
    let c = container(&objects);
    assert_eq!(
        c["image"],
        format!(
            "ghcr.io/slurm-rs/slurm-exporter:{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(
        flag(&objects, "slurm-url").unwrap(),
        "http://slurm-restapi.slurm:6820"
    );
    assert_eq!(flag(&objects, "interval").unwrap(), "30s");
    assert!(
        flag(&objects, "sources").is_none(),
        "all sources by default"
    );
    binary_accepts(&objects);

    // The token: a Secret's key as the file SLURM_JWT_FILE names; nothing else.
    let token_file = env_var(&objects, "SLURM_JWT_FILE").unwrap();
    assert_eq!(
        secret_file(&objects, "slurm-auth"),
        (
            "slurm-exporter-token".into(),
            "auth-token".into(),
            token_file
        )
    );
    for other in ["SLURM_JWT", "SLURM_JWT_KEY", "SLURM_USER_NAME"] {
        assert!(env_var(&objects, other).is_none(), "{other} set");
    }

    // The listener, the probes and the Service agree on the port.
    let listen = flag(&objects, "listen").unwrap();
    let port = c["ports"][0]["containerPort"].as_i64().unwrap();
    assert_eq!(listen, format!("0.0.0.0:{port}"));
    assert_eq!(c["ports"][0]["name"], "metrics");
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "metrics", "scheme": "HTTP"})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "metrics", "scheme": "HTTP"})
    );
    let service = one(&objects, "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    let labels = &one(&objects, "Deployment")["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v);
    }

    // Pod security; no Kubernetes API access at all.
    assert_eq!(
        pod(&objects)["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
               "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        c["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
               "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
               "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(pod(&objects)["automountServiceAccountToken"], false);
    let account = one(&objects, "ServiceAccount");
    assert_eq!(account["automountServiceAccountToken"], false);
    assert_eq!(
        pod(&objects)["serviceAccountName"],
        account["metadata"]["name"]
    );
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(all(&objects, kind).is_empty(), "{kind} rendered");
    }
    assert!(all(&objects, "ServiceMonitor").is_empty());
    assert!(all(&objects, "Token").is_empty());
}

#[test]
fn settings_become_flags() {
    let objects = render(&[
        "--set",
        "slurmRestApi=https://rest.hpc.example:6820",
        "--set",
        "sources={diag,nodes,jobs,partitions}",
        "--set",
        "sourceTimeouts=jobs=3m\\,diag=5s",
        "--set",
        "interval=1m",
        "--set",
        "restVersion=v0.0.42",
        "--set",
        "logFormat=json",
        "--set",
        "port=9400",
    ]);
    assert_eq!(
        flag(&objects, "slurm-url").unwrap(),
        "https://rest.hpc.example:6820"
    );
    assert_eq!(
        flag(&objects, "sources").unwrap(),
        "diag,nodes,jobs,partitions"
    );
    assert_eq!(
        flag(&objects, "source-timeouts").unwrap(),
        "jobs=3m,diag=5s"
    );
    assert_eq!(flag(&objects, "rest-version").unwrap(), "v0.0.42");
    assert_eq!(flag(&objects, "listen").unwrap(), "0.0.0.0:9400");
    assert_eq!(container(&objects)["ports"][0]["containerPort"], 9400);
    binary_accepts(&objects);
}

#[test]
fn tokens_minted_from_the_jwt_key() {
    let objects = render(&[
        "--set",
        "token.source=mint",
        "--set",
        "token.jwtKey.name=hpc-auth-jwt",
        "--set",
        "token.userName=monitor",
    ]);
    let key_file = env_var(&objects, "SLURM_JWT_KEY").unwrap();
    assert_eq!(
        secret_file(&objects, "slurm-auth"),
        ("hpc-auth-jwt".into(), "jwt.key".into(), key_file)
    );
    assert_eq!(env_var(&objects, "SLURM_USER_NAME").unwrap(), "monitor");
    assert_eq!(env_var(&objects, "SLURM_JWT_LIFESPAN").unwrap(), "30m");
    assert!(env_var(&objects, "SLURM_JWT_FILE").is_none());
    binary_accepts(&objects);
}

#[test]
fn a_token_from_the_operator() {
    let objects = render(&[
        "--set",
        "token.create=true",
        "--set",
        "token.secret.name=exporter-jwt",
    ]);
    let token = one(&objects, "Token");
    assert_eq!(token["apiVersion"], "slinky.slurm.net/v1beta1");
    assert_eq!(
        token["spec"],
        json!({"username": "slurm", "lifetime": "24h", "refresh": true,
               "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
               "secretRef": {"name": "exporter-jwt", "key": "auth-token"}})
    );
    let (secret, key, _) = secret_file(&objects, "slurm-auth");
    assert_eq!(
        (secret.as_str(), key.as_str()),
        ("exporter-jwt", "auth-token")
    );
    let err =
        try_render(&["--set", "token.create=true", "--set", "token.source=mint"]).unwrap_err();
    assert!(err.contains("token.source"), "{err}");
}

#[test]
fn https_and_basic_auth() {
    let objects = render(&[
        "--set",
        "web.tlsSecret=exporter-tls",
        "--set",
        "web.basicAuth.user=prometheus",
        "--set",
        "web.basicAuth.passwordSecret.name=exporter-basic-auth",
        "--set",
        "serviceMonitor.enabled=true",
    ]);
    let tls_dir = mount(&objects, "tls");
    assert_eq!(
        flag(&objects, "tls-cert").unwrap(),
        format!("{tls_dir}/tls.crt")
    );
    assert_eq!(
        flag(&objects, "tls-key").unwrap(),
        format!("{tls_dir}/tls.key")
    );
    assert_eq!(
        volume(&objects, "tls")["secret"]["secretName"],
        "exporter-tls"
    );
    assert_eq!(
        secret_file(&objects, "basic-auth"),
        (
            "exporter-basic-auth".into(),
            "password".into(),
            flag(&objects, "basic-auth-password-file").unwrap()
        )
    );
    assert_eq!(flag(&objects, "basic-auth-user").unwrap(), "prometheus");
    let c = container(&objects);
    assert_eq!(c["livenessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(
        one(&objects, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"],
        "https"
    );
    binary_accepts(&objects);
}

#[test]
fn service_monitor() {
    let objects = render(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.labels.release=prom",
        "--set",
        "serviceMonitor.interval=1m",
    ]);
    let monitor = one(&objects, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    let service = one(&objects, "Service");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&service["metadata"]["labels"][k], v);
    }
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "1m"}])
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([NS])
    );
}

/// `charts/slurm-exporter/rules/`: the alert rules and their promtool unit tests.
const RULES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/slurm-exporter/rules");

#[test]
fn prometheus_rule_holds_the_rules_file() {
    assert!(render(&[]).iter().all(|o| o["kind"] != "PrometheusRule"));
    let objects = render(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=prom",
    ]);
    let rule = one(&objects, "PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["labels"]["release"], "prom");
    assert_eq!(rule["metadata"]["namespace"], NS);
    let file: Value = serde_yaml::from_str(
        &std::fs::read_to_string(format!("{RULES_DIR}/slurm.rules.yaml")).unwrap(),
    )
    .unwrap();
    // The very groups of the file, Prometheus' own templates left as they are.
    assert_eq!(rule["spec"]["groups"], file["groups"]);
    assert!(rule.to_string().contains("{{ $labels.instance }}"));
}

/// `promtool check rules` and `promtool test rules` (Debian's `prometheus` package, which CI
/// installs): the rules parse, and each alert fires after its `for:` on the series of its
/// failure and stays quiet on healthy ones (`rules/slurm.rules.test.yaml`).
#[test]
fn alert_rules_pass_promtool() {
    for args in [
        ["check", "rules", "slurm.rules.yaml"],
        ["test", "rules", "slurm.rules.test.yaml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(RULES_DIR)
            .output()
            .unwrap_or_else(|e| panic!("promtool (Debian's prometheus package): {e}"));
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dashboard_config_map_holds_the_dashboard_file() {
    let objects = render(&[]);
    let map = one(&objects, "ConfigMap");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(map["metadata"]["namespace"], NS);
    // Byte for byte the file tests/dashboard.rs checks.
    assert_eq!(map["data"]["slurm.json"].as_str().unwrap(), DASHBOARD);
    let _: Value = serde_json::from_str(DASHBOARD).unwrap();

    let objects = render(&[
        "--set",
        "dashboard.namespace=grafana",
        "--set",
        "dashboard.labels.grafana_dashboard=null",
        "--set",
        "dashboard.labels.dashboards=slurm",
        "--set",
        "dashboard.annotations.grafana_folder=HPC",
    ]);
    let map = one(&objects, "ConfigMap");
    assert_eq!(map["metadata"]["namespace"], "grafana");
    assert_eq!(map["metadata"]["labels"]["dashboards"], "slurm");
    assert!(map["metadata"]["labels"].get("grafana_dashboard").is_none());
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "HPC");

    assert!(all(&render(&["--set", "dashboard.enabled=false"]), "ConfigMap").is_empty());
}

#[test]
fn typos_are_refused_by_the_schema() {
    for (set, needle) in [
        ("intervall=30s", "intervall"),
        ("token.sorce=mint", "sorce"),
        ("dashboard.label.x=y", "label"),
        ("sources={diag,gpus}", "sources"),
        ("token.source=env", "source"),
        ("interval=often", "interval"),
        ("slurmRestApi=slurm:6820", "slurmRestApi"),
    ] {
        let err = try_render(&["--set", set]).unwrap_err();
        assert!(err.contains(needle), "{set}: {err}");
    }
}
