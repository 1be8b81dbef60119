//! The admission webhook against the test ground's API server: the webhook server runs in this
//! test process on 127.0.0.1 (the API server is a process on the host's loopback, so a `url:`
//! webhook reaches it), behind a ValidatingWebhookConfiguration of its own whose
//! namespaceSelector matches only this test's namespace. Invalid manifests are refused by
//! `kubectl apply` with the field named; Slinky-style manifests go through.

use crate::common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{TestEnv, ground, manifest};
use slurm_operator::webhook::{self, Endpoint, WebhookArgs};

/// The label that scopes a test's webhook configuration to its namespace.
const SCOPE_LABEL: &str = "slurm-rs.test/webhook";

/// The CRDs as this build generates them (the types the webhook decodes), once per process.
pub(crate) fn ensure_crds() {
    static APPLIED: std::sync::Once = std::sync::Once::new();
    APPLIED.call_once(|| {
        let g = ground();
        for (file, yaml) in slurm_operator::crd::yaml_files() {
            let out = g.kubectl(
                &["apply", "--server-side", "--force-conflicts", "-f", "-"],
                Some(&yaml),
            );
            assert!(
                out.status.success(),
                "{file}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let plural = file
                .trim_start_matches("slinky.slurm.net_")
                .trim_end_matches(".yaml");
            g.ok(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{plural}.slinky.slurm.net"),
            ]);
        }
    });
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The webhook server on its own runtime and thread, and its configuration; dropping it deletes
/// the configuration (the server thread ends with the test process).
pub(crate) struct Webhook {
    configuration: String,
}

impl Webhook {
    /// Installs a configuration named after the namespace that sends the namespace's requests to
    /// `https://127.0.0.1:<port>`, then starts `serve` with `args` filled in for that port.
    pub(crate) fn start(env: &TestEnv, ca_bundle: Option<&[u8]>, mut args: WebhookArgs) -> Webhook {
        let g = ground();
        let ns = env.name();
        g.ok(&["label", "namespace", ns, &format!("{SCOPE_LABEL}={ns}")]);
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let name = format!("slurm-operator-webhook-test-{ns}");

        let mut config = webhook::configuration(&Endpoint::Url(url.clone()), ca_bundle);
        config.metadata.name = Some(name.clone());
        for hook in config.webhooks.iter_mut().flatten() {
            hook.namespace_selector = Some(
                serde_json::from_value(serde_json::json!({"matchLabels": {SCOPE_LABEL: ns}}))
                    .unwrap(),
            );
        }
        let out = g.kubectl(
            &["apply", "-f", "-"],
            Some(&serde_json::to_string(&config).unwrap()),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let guard = Webhook {
            configuration: name.clone(),
        };

        args.webhook_addr = format!("127.0.0.1:{port}");
        args.webhook_url = Some(url);
        args.webhook_configuration = name;
        let kubeconfig = g.kubeconfig().to_path_buf();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                kube_support::tls::install_crypto_provider();
                let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .unwrap();
                let client = kube::Client::try_from(config).unwrap();
                if let Err(e) = webhook::serve(args, client).await {
                    eprintln!("webhook server: {e:#}");
                }
            });
        });
        guard
    }

    /// Waits until the API server calls the webhook for the namespace: a server-side dry run of
    /// an invalid Token is refused by it (the API server picks up configuration changes a
    /// moment later, and the self-signed mode writes the caBundle after the start).
    pub(crate) fn wait_ready(&self, env: &TestEnv) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let probe = "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {name: probe}\n\
                     spec: {jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}, username: \"\"}\n";
        loop {
            let out = ground().kubectl(
                &["apply", "--dry-run=server", "-n", env.name(), "-f", "-"],
                Some(probe),
            );
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            if err.contains("denied the request: spec.username: must not be empty") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the webhook never answered: {err}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = ground().kubectl(
            &[
                "delete",
                "validatingwebhookconfiguration",
                &self.configuration,
                "--wait=false",
            ],
            None,
        );
    }
}

/// `kubectl apply` of `yaml` in the namespace: Ok(stderr) when it went through, Err(stderr).
fn apply(env: &TestEnv, yaml: &str) -> Result<String, String> {
    let out = ground().kubectl(&["apply", "-n", env.name(), "-f", "-"], Some(yaml));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(err)
    } else {
        Err(err)
    }
}

fn refused(env: &TestEnv, yaml: &str, webhook: &str, message: &str) {
    match apply(env, yaml) {
        Ok(_) => panic!("accepted, expected {message:?}:\n{yaml}"),
        Err(err) => assert!(
            err.contains(&format!(
                "admission webhook \"{webhook}\" denied the request"
            )) && err.contains(message),
            "expected {webhook} to refuse with {message:?}, got:\n{err}"
        ),
    }
}

fn object(kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: slinky.slurm.net/v1beta1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const KEYS: &str = "  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}\n  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n";

#[test]
fn self_signed_webhook_refuses_invalid_manifests_and_accepts_slinkys() {
    ensure_crds();
    let env = TestEnv::new("op-webhook");
    let g = ground();
    let args = WebhookArgs {
        webhook_self_signed: true,
        ..WebhookArgs::default()
    };
    let wh = Webhook::start(&env, None, args);
    wh.wait_ready(&env);
    let bundle = g.ok(&[
        "get",
        "validatingwebhookconfiguration",
        &wh.configuration,
        "-o",
        "jsonpath={.webhooks[*].clientConfig.caBundle}",
    ]);
    assert_eq!(
        bundle.split_whitespace().count(),
        6,
        "a caBundle per webhook: {bundle}"
    );

    g.apply(
        env.name(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: has-slurm-conf}\ndata: {slurm.conf: \"ClusterName=x\"}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: has-unknown-file}\ndata: {gres.conf: \"\", mine.conf: \"\"}\n",
    );

    let ctl = "controller.slinky.slurm.net";
    let ns_hook = "nodeset.slinky.slurm.net";
    let cases: Vec<(String, &str, &str)> = vec![
        (
            object(
                "Controller",
                "c1",
                &format!("{KEYS}  clusterName: {}\n", "c".repeat(41)),
            ),
            ctl,
            "spec.clusterName: \"ccccccccccccccccccccccccccccccccccccccccc\" is 41 characters long",
        ),
        (
            object(
                "Controller",
                "c2",
                &format!("{KEYS}  configFileRefs: [{{name: missing}}]\n"),
            ),
            ctl,
            "spec.configFileRefs[0].name: ConfigMap \"missing\" not found",
        ),
        (
            object(
                "Controller",
                "c3",
                &format!("{KEYS}  configFileRefs: [{{name: has-slurm-conf}}]\n"),
            ),
            ctl,
            "spec.configFileRefs[0].name: ConfigMap \"has-slurm-conf\" has key \"slurm.conf\", which the operator generates",
        ),
        (
            object(
                "Controller",
                "c4",
                &format!(
                    "{KEYS}  extraConf: |\n    SchedulerType=sched/backfill\n    SlurmctldHost=elsewhere\n"
                ),
            ),
            ctl,
            "spec.extraConf: line 2: SlurmctldHost is set by the operator",
        ),
        (
            object(
                "Controller",
                "c5",
                &format!("{KEYS}  extraConf: |\n    SchedulerType sched/backfill\n"),
            ),
            ctl,
            "spec.extraConf: line 1: \"SchedulerType sched/backfill\" is not Key=Value",
        ),
        (
            object(
                "NodeSet",
                "n2",
                "  controllerRef: {name: slurm}\n  updateStrategy: {rollingUpdate: {maxUnavailable: 0}}\n",
            ),
            ns_hook,
            "spec.updateStrategy.rollingUpdate.maxUnavailable: must be greater than 0, got 0",
        ),
        (
            object(
                "NodeSet",
                "n3",
                "  controllerRef: {name: slurm}\n  updateStrategy: {rollingUpdate: {maxUnavailable: 0%}}\n",
            ),
            ns_hook,
            "spec.updateStrategy.rollingUpdate.maxUnavailable: must not be 0%",
        ),
        (
            object(
                "NodeSet",
                "n4",
                "  controllerRef: {name: slurm}\n  updateStrategy:\n    type: ScheduledUpdate\n    scheduledUpdate: {startTime: \"2030-01-01T00:00:00Z\", duration: 30s}\n",
            ),
            ns_hook,
            "spec.updateStrategy.scheduledUpdate.duration: must be at least 1m",
        ),
        (
            object(
                "NodeSet",
                "n5",
                "  controllerRef: {name: slurm}\n  ssh: {enabled: true, sssdConfRef: {name: \"\", key: sssd.conf}}\n",
            ),
            ns_hook,
            "spec.ssh.sssdConfRef.name: must not be empty when ssh.enabled is true",
        ),
        (
            object(
                "NodeSet",
                "n6",
                "  controllerRef: {name: slurm}\n  template: {spec: {hostname: Bad_Host-}}\n",
            ),
            ns_hook,
            "spec.template.spec.hostname: \"Bad_Host-\": a lowercase RFC 1123 subdomain",
        ),
        (
            object(
                "NodeSet",
                "n7",
                "  controllerRef: {name: slurm}\n  extraConf: CPUs=2 RealMemory\n",
            ),
            ns_hook,
            "spec.extraConf: token \"RealMemory\" is not Key=Value",
        ),
        (
            object(
                "LoginSet",
                "l1",
                "  controllerRef: {name: slurm}\n  sssdConfRef: {name: \"\", key: sssd.conf}\n",
            ),
            "loginset.slinky.slurm.net",
            "spec.sssdConfRef.name: must not be empty",
        ),
        (
            object(
                "Token",
                "t1",
                "  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n  lifetime: 0s\n",
            ),
            "token.slinky.slurm.net",
            "spec.lifetime: \"0s\" is not a positive duration",
        ),
    ];

    // The Controller the NodeSet cases refer to (a missing one would add a warning).
    g.apply(env.name(), &object("Controller", "slurm", KEYS));
    for (yaml, hook, message) in &cases {
        refused(&env, yaml, hook, message);
    }

    // A ConfigMap key Slurm does not read is a warning, not a refusal.
    let warned = apply(
        &env,
        &object(
            "Controller",
            "warned",
            &format!("{KEYS}  configFileRefs: [{{name: has-unknown-file}}]\n"),
        ),
    )
    .expect("a warning only");
    assert!(
        warned.contains(
            "Warning: spec.configFileRefs[0].name: ConfigMap \"has-unknown-file\" key \"mine.conf\""
        ),
        "{warned}"
    );

    // A NodeSet applied before its Controller (GitOps, `kubectl apply -f dir/`) goes through,
    // with a warning.
    let early = apply(
        &env,
        &object("NodeSet", "early", "  controllerRef: {name: later}\n"),
    )
    .expect("accepted before its Controller");
    assert!(
        early.contains("Warning: spec.controllerRef.name: Controller \"later\" does not exist"),
        "{early}"
    );

    // Slinky's chart output goes through, created and then applied again unchanged (UPDATE).
    g.ok(&["delete", "-n", env.name(), "controller/slurm"]);
    let cluster = manifest("cluster.yaml");
    for round in ["create", "update"] {
        if let Err(err) = apply(&env, &cluster) {
            panic!("cluster.yaml refused on {round}:\n{err}");
        }
    }

    // Updates that change immutable fields.
    for (kind, name, patch, hook, message) in [
        (
            "nodeset",
            "slurm-worker-slinky",
            r#"{"spec":{"controllerRef":{"name":"other"}}}"#,
            ns_hook,
            "spec.controllerRef.name: field is immutable",
        ),
        (
            "controller",
            "slurm",
            r#"{"spec":{"clusterName":"renamed"}}"#,
            ctl,
            "spec.clusterName: field is immutable",
        ),
        (
            "controller",
            "slurm",
            r#"{"spec":{"persistence":{"enabled":false}}}"#,
            ctl,
            "spec.persistence.enabled: field is immutable",
        ),
        (
            "token",
            "slurm-token",
            r#"{"spec":{"jwtKeyRef":{"name":"another"}}}"#,
            "token.slinky.slurm.net",
            "spec.jwtKeyRef: field is immutable",
        ),
        (
            "restapi",
            "slurm",
            r#"{"spec":{"controllerRef":{"name":"other"}}}"#,
            "restapi.slinky.slurm.net",
            "spec.controllerRef.name: field is immutable",
        ),
    ] {
        let out = g.kubectl(
            &[
                "patch",
                "-n",
                env.name(),
                kind,
                name,
                "--type=merge",
                "-p",
                patch,
            ],
            None,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains(&format!("admission webhook \"{hook}\" denied the request"))
                && err.contains(message),
            "{kind}/{name} {patch}: expected {message:?}, got:\n{err}"
        );
    }
    // An allowed change goes through.
    g.ok(&[
        "patch",
        "-n",
        env.name(),
        "nodeset",
        "slurm-worker-slinky",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":2}}"#,
    ]);
    drop(wh);
}

/// cert-manager's way: the certificate in a directory (tls.crt/tls.key), the CA in the
/// configuration from the start.
#[test]
fn cert_dir_webhook() {
    ensure_crds();
    let env = TestEnv::new("op-webhook-certdir");
    let dir: PathBuf = std::env::temp_dir().join(format!("{}-certs", env.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();

    let args = WebhookArgs {
        webhook_cert_dir: dir.clone(),
        ..WebhookArgs::default()
    };
    let wh = Webhook::start(&env, Some(ca_cert.pem().as_bytes()), args);
    wh.wait_ready(&env);
    refused(
        &env,
        &object(
            "Controller",
            "c",
            &format!("{KEYS}  configFileRefs: [{{name: missing}}]\n"),
        ),
        "controller.slinky.slurm.net",
        "spec.configFileRefs[0].name: ConfigMap \"missing\" not found",
    );
    apply(&env, &object("Controller", "slurm", KEYS)).expect("a valid Controller");
    drop(wh);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each kind with nulls at several depths, as Slinky's chart renders empty values, applied
/// through the generated CRDs: the webhook accepts them (a NodeSet and a LoginSet before their
/// Controller, too), and the API server stores them as it would under Slinky's CRDs: a null of
/// a field Slinky does not mark nullable is pruned before defaulting, a nullable one is kept.
#[test]
fn nulls_at_every_depth_are_stored_as_slinky_stores_them() {
    ensure_crds();
    let env = TestEnv::new("op-nulls");
    let g = ground();
    let args = WebhookArgs {
        webhook_self_signed: true,
        ..WebhookArgs::default()
    };
    let wh = Webhook::start(&env, None, args);
    wh.wait_ready(&env);

    let objects = [
        object(
            "NodeSet",
            "workers",
            "  controllerRef: {name: slurm}\n  replicas:\n  extraConf:\n  ssh:\n  partition: {enabled: null, config: null}\n  \
             template:\n    metadata: {labels: null, annotations: null}\n    spec: {nodeSelector: null}\n  \
             updateStrategy:\n    rollingUpdate: {maxUnavailable: null}\n    scheduledUpdate: {flags: null}\n  \
             volumeClaimTemplates:\n  workloadDisruptionProtection:\n",
        ),
        object(
            "LoginSet",
            "login",
            "  controllerRef: {name: slurm}\n  sssdConfRef: {name: sssd, key: sssd.conf}\n  replicas:\n  strategy:\n  \
             rootSshAuthorizedKeys:\n  service: {metadata: {annotations: null}, port: null}\n",
        ),
        object(
            "Controller",
            "slurm",
            &format!(
                "{KEYS}  clusterName:\n  accountingRef:\n  jwksKeyRef:\n  configFileRefs:\n  prologScriptRefs:\n  \
                 epilogScriptRefs:\n  prologSlurmctldScriptRefs:\n  epilogSlurmctldScriptRefs:\n  extraConf:\n  \
                 template: {{metadata: {{labels: null}}}}\n  persistence: {{enabled: null, existingClaim: null}}\n  \
                 metrics: {{enabled: null, serviceMonitor: null}}\n  ha:\n"
            ),
        ),
        object(
            "RestApi",
            "slurm",
            "  controllerRef: {name: slurm}\n  replicas:\n  slurmrestd:\n  template:\n  service:\n",
        ),
        object(
            "Accounting",
            "slurm",
            &format!(
                "{KEYS}  jwksKeyRef:\n  extraConf:\n  storageConfig: {{host: mariadb, port: null, database: null, \
                 passwordKeyRef: {{name: db, key: password}}}}\n"
            ),
        ),
        object(
            "Token",
            "slurm",
            "  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n  lifetime:\n  refresh:\n  secretRef:\n",
        ),
    ];
    // `kubectl create`/`replace` send the nulls as Helm does (`kubectl apply` drops them).
    let send = |verb: &str, yaml: &str| {
        let out = g.kubectl(&[verb, "-n", env.name(), "-f", "-"], Some(yaml));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{verb} refused:\n{yaml}\n{err}");
    };
    for yaml in &objects {
        send("create", yaml);
    }

    let stored = |kind: &str, name: &str| -> serde_json::Value {
        let json = g.ok(&["get", "-n", env.name(), kind, name, "-o", "json"]);
        serde_json::from_str::<serde_json::Value>(&json).unwrap()["spec"].take()
    };
    // Pruned, then defaulted.
    let c = stored("controller", "slurm");
    assert_eq!(c["persistence"]["enabled"], true, "{c:#}");
    assert!(
        c.get("accountingRef").is_none() && c.get("ha").is_none(),
        "{c:#}"
    );
    assert_eq!(c["metrics"]["enabled"], false, "{c:#}");
    let n = stored("nodeset", "workers");
    assert_eq!(n["replicas"], 1, "{n:#}");
    assert_eq!(n["workloadDisruptionProtection"], true, "{n:#}");
    assert_eq!(
        n["updateStrategy"]["rollingUpdate"]["maxUnavailable"], "25%",
        "{n:#}"
    );
    let a = stored("accounting", "slurm");
    assert_eq!(a["storageConfig"]["port"], 3306, "{a:#}");
    let t = stored("token", "slurm");
    assert!(
        t.get("lifetime").is_none() && t.get("secretRef").is_none(),
        "{t:#}"
    );
    assert_eq!(t["refresh"], true, "{t:#}");
    // Kept: Slinky marks these nullable.
    for field in [
        "configFileRefs",
        "prologScriptRefs",
        "epilogSlurmctldScriptRefs",
    ] {
        assert!(
            c[field].is_null() && c.get(field).is_some(),
            "{field}: {c:#}"
        );
    }
    assert!(
        c["metrics"]
            .get("serviceMonitor")
            .is_some_and(|v| v.is_null()),
        "{c:#}"
    );
    assert!(
        n["template"]["metadata"]
            .get("labels")
            .is_some_and(|v| v.is_null()),
        "{n:#}"
    );
    assert!(
        n["updateStrategy"]["scheduledUpdate"]
            .get("flags")
            .is_some_and(|v| v.is_null()),
        "{n:#}"
    );

    // Sent again unchanged (UPDATE, the stored nulls in the old object too).
    for yaml in &objects {
        send("replace", yaml);
    }
    drop(wh);
}
