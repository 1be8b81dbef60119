//! What the bridge's tests on the test ground share: a namespace holding a Slurm 26.05 cluster
//! (slurmctld and slurmrestd in pods, `manifests/slurm.yaml`), the ground's nodes labelled as
//! Slurm external nodes, the bridge started inside the ground as if it ran in a pod, and a
//! `slurm_client` reaching slurmrestd through a forwarded port. The tests fail, never skip, when
//! the ground is not up.

#![allow(dead_code)] // each test binary uses a part

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use secrecy::ExposeSecret as _;
use slurm_client::{JwtClaims, StaticToken};
use test_support::ground::{Ground, InsideProcess, Namespace, forward_into_ground};

/// The bridge, built by cargo for the integration tests.
pub const BRIDGE: &str = env!("CARGO_BIN_EXE_slurm-bridge");
/// The busybox image of the ground's pods.
pub const IMAGE: &str = "localhost/slurm-dev/toolbox:latest";
/// The scheduler name.
pub const SCHEDULER: &str = "slurm-bridge-scheduler";
/// The label that makes a Kubernetes node a Slurm external node.
pub const EXTERNAL: &str = "scheduler.slinky.slurm.net/external-node";
/// The key of the bridge's node taint.
pub const MANAGED_NODE: &str = "slinky.slurm.net/managed-node";
/// A taint no test pod tolerates (tests put it on a node and take it off).
pub const KEEP_OFF: &str = "example.com/keep-off";
/// Where the bridge serves `/metrics`, inside the ground's network namespace (one test runs at
/// a time).
pub const METRICS_ADDR: &str = "127.0.0.1:18080";

pub fn ground() -> &'static Ground {
    Ground::shared()
}

/// One test's Slurm cluster and bridge. Dropping it deletes the pods while the bridge still
/// runs (so their finalizers are released), stops the bridge, unlabels the nodes and deletes
/// the namespace.
pub struct TestEnv {
    bridge: Option<InsideProcess>,
    pub ns: Namespace<'static>,
    jwt_key: String,
    dir: PathBuf,
    pub nodes: Vec<String>,
}

impl TestEnv {
    /// Namespace `<prefix>-<pid>` with the key Secrets and the Slurm cluster, up and answering.
    pub fn new(prefix: &str) -> TestEnv {
        TestEnv::with_slurm_conf(prefix, "")
    }

    /// [`new`](Self::new), with `extra` lines appended to slurm.conf.
    pub fn with_slurm_conf(prefix: &str, extra: &str) -> TestEnv {
        TestEnv::setup(prefix, extra, false, None)
    }

    /// [`new`](Self::new), with Slurm's `topology.yaml`.
    pub fn with_topology(prefix: &str, topology_yaml: &str) -> TestEnv {
        TestEnv::setup(prefix, "", false, Some(topology_yaml))
    }

    /// [`new`](Self::new), with slurmdbd (and MariaDB) enforcing associations and limits, as
    /// sites that use QoS run it. Jobs need an association: the test makes one for its user.
    pub fn with_accounting(prefix: &str) -> TestEnv {
        TestEnv::setup(
            prefix,
            "AccountingStorageType=accounting_storage/slurmdbd\n\
             AccountingStorageHost=slurm-accounting.NAMESPACE.svc.cluster.local\n\
             AccountingStoragePort=6819\n\
             AccountingStorageEnforce=associations,limits\n",
            true,
            None,
        )
    }

    fn setup(prefix: &str, extra: &str, accounting: bool, topology: Option<&str>) -> TestEnv {
        let g = ground();
        let ns = g.namespace(prefix);
        let slurm_key = random_key();
        let jwt_key = random_key();
        for (name, key, value) in [
            ("slurm-auth-slurm", "slurm.key", &slurm_key),
            ("slurm-auth-jwt", "jwt.key", &jwt_key),
        ] {
            let value = base64::engine::general_purpose::STANDARD.encode(value);
            g.apply(
                &ns.name,
                &format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nimmutable: true\ndata:\n  {key}: {value}\n"),
            );
        }
        if accounting {
            let manifest = std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/manifests/accounting.yaml"
            ))
            .unwrap()
            .replace("NAMESPACE", &ns.name)
            .replace("DBPASSWORD", &random_key()[..32]);
            g.apply(&ns.name, &manifest);
            // slurmctld enforcing associations stops at its first start without slurmdbd
            g.wait_for(
                &ns.name,
                "pod/slurm-accounting-0",
                "{.status.conditions[?(@.type==\"Ready\")].status}",
                Duration::from_secs(180),
                |s| s == "True",
            );
        }
        let manifest = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/manifests/slurm.yaml"
        ))
        .unwrap()
        .replace("NAMESPACE", &ns.name)
        .replace(
            "    MaxNodeCount=64\n",
            &format!(
                "    MaxNodeCount=64\n{}",
                indent(&extra.replace("NAMESPACE", &ns.name))
            ),
        )
        .replace(
            "  cgroup.conf: |\n",
            &(topology
                .map(|t| format!("  topology.yaml: |\n{}", indent(t)))
                .unwrap_or_default()
                + "  cgroup.conf: |\n"),
        );
        g.apply(&ns.name, &manifest);
        let dir = std::env::temp_dir().join(format!("bridge-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let nodes: Vec<String> = g
            .ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
            .split_whitespace()
            .map(String::from)
            .collect();
        assert!(!nodes.is_empty(), "the ground has no nodes");
        let env = TestEnv {
            bridge: None,
            ns,
            jwt_key,
            dir,
            nodes,
        };
        env.wait_for(
            "pod/slurm-controller-0",
            "{.status.conditions[?(@.type==\"Ready\")].status}",
            Duration::from_secs(180),
            |s| s == "True",
        );
        env.wait_for(
            "deployment/slurm-restapi",
            "{.status.readyReplicas}",
            Duration::from_secs(180),
            |s| s == "1",
        );
        env
    }

    /// A JWT for user `slurm`, valid for an hour.
    pub fn token(&self) -> String {
        let claims = JwtClaims::new("slurm", Duration::from_secs(3600));
        slurm_client::mint_hs256(self.jwt_key.as_bytes(), &claims)
            .expose_secret()
            .to_owned()
    }

    /// slurmrestd's Service, as the bridge inside the ground reaches it.
    pub fn restapi_url(&self) -> String {
        format!(
            "http://slurm-restapi.{}.svc.cluster.local:6820",
            self.ns.name
        )
    }

    /// A client for slurmrestd, from the host (through a forwarded port).
    pub fn slurm(&self) -> slurm_client::Client {
        let ip = ground().get(&self.ns.name, "service/slurm-restapi", "{.spec.clusterIP}");
        let local = forward_into_ground(format!("{ip}:6820").parse().unwrap());
        slurm_client::ClientBuilder::new(format!("http://{local}"))
            .token(StaticToken::new(self.token()))
            .build()
            .unwrap()
    }

    /// Labels every ground node as a Slurm external node.
    pub fn label_nodes(&self) {
        for node in &self.nodes {
            ground().ok(&[
                "label",
                "node",
                node,
                &format!("{EXTERNAL}=true"),
                "--overwrite",
            ]);
        }
    }

    /// Starts (or restarts) the bridge with a config for this namespace.
    pub fn start_bridge(&mut self, extra_config: &str) -> &mut InsideProcess {
        let log = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
        self.start_bridge_logging(extra_config, &log)
    }

    /// [`start_bridge`](Self::start_bridge) with `RUST_LOG=<log>`.
    pub fn start_bridge_logging(&mut self, extra_config: &str, log: &str) -> &mut InsideProcess {
        if let Some(mut old) = self.bridge.take() {
            old.kill();
        }
        let process = self.spawn_bridge(extra_config, log, METRICS_ADDR, &[]);
        self.bridge.insert(process)
    }

    /// A bridge with this namespace's config, serving `/metrics` on `metrics_addr`, with
    /// `extra_args` (e.g. `--leader-elect`); the caller owns it (a second replica, say).
    pub fn spawn_bridge(
        &self,
        extra_config: &str,
        log: &str,
        metrics_addr: &str,
        extra_args: &[&str],
    ) -> InsideProcess {
        self.spawn_bridge_with_env(extra_config, log, metrics_addr, extra_args, &[])
    }

    /// [`spawn_bridge`](Self::spawn_bridge) with `env` added to its environment (its own
    /// `KUBECONFIG`, say).
    pub fn spawn_bridge_with_env(
        &self,
        extra_config: &str,
        log: &str,
        metrics_addr: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> InsideProcess {
        let config = self.dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "schedulerName: {SCHEDULER}\nslurmRestApi: {}\nmanagedNamespaces: [{}]\npartition: slurm-bridge\n{extra_config}",
                self.restapi_url(),
                self.ns.name
            ),
        )
        .unwrap();
        let token = self.dir.join("auth-token");
        std::fs::write(&token, self.token()).unwrap();
        let mut args = vec![
            "--config",
            config.to_str().unwrap(),
            "--slurm-jwt-file",
            token.to_str().unwrap(),
            "--health-addr",
            "0",
            "--metrics-addr",
            metrics_addr,
            "--webhook-addr",
            "0",
        ];
        args.extend_from_slice(extra_args);
        let mut vars = vec![("RUST_LOG", log)];
        vars.extend_from_slice(env);
        ground().spawn_inside(BRIDGE, &args, &vars)
    }

    /// Makes `process` the env's bridge (the one whose log failures show, running while the
    /// env's pods are deleted); gives the one it replaces.
    pub fn replace_bridge(&mut self, process: InsideProcess) -> Option<InsideProcess> {
        self.bridge.replace(process)
    }

    pub fn bridge(&mut self) -> &mut InsideProcess {
        self.bridge.as_mut().expect("start_bridge first")
    }

    /// Applies a manifest in the namespace.
    pub fn apply(&self, yaml: &str) {
        ground().apply(&self.ns.name, yaml);
    }

    /// Waits until `check` holds for a jsonpath of an object; panics after `limit` showing the
    /// object's value and the bridge's log.
    pub fn wait_for(
        &self,
        what: &str,
        jsonpath: &str,
        limit: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let wait = || ground().wait_for(&self.ns.name, what, jsonpath, limit, check);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(wait)) {
            Ok(v) => v,
            Err(panic) => {
                if let Some(b) = &self.bridge {
                    eprintln!("bridge log ({}):\n{}", b.log_path().display(), b.log());
                }
                std::panic::resume_unwind(panic)
            }
        }
    }

    pub fn get(&self, what: &str, jsonpath: &str) -> String {
        ground().get(&self.ns.name, what, jsonpath)
    }

    /// Waits up to `limit` until `pod` runs; gives its node.
    pub fn running_on(&self, pod: &str, limit: Duration) -> String {
        let what = format!("pod/{pod}");
        self.wait_for(&what, "{.status.phase}", limit, |p| p == "Running");
        self.get(&what, "{.spec.nodeName}")
    }

    /// The id of `pod`'s Slurm job, from the label the bridge puts on it.
    pub fn job_id(&self, pod: &str) -> u32 {
        self.get(
            &format!("pod/{pod}"),
            "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
        )
        .parse()
        .expect("the pod carries its job id")
    }

    /// The bridge's log so far.
    pub fn bridge_log(&self) -> String {
        self.bridge.as_ref().map(|b| b.log()).unwrap_or_default()
    }

    /// The bridge's `/metrics`, as Prometheus scrapes it.
    pub fn metrics(&self) -> Metrics {
        use std::io::{Read as _, Write as _};
        let local = forward_into_ground(METRICS_ADDR.parse().unwrap());
        let mut conn = std::net::TcpStream::connect(local).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: bridge\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "GET /metrics: {head}\n{}",
            self.bridge_log()
        );
        Metrics(body.to_owned())
    }
}

/// A scrape of the bridge's `/metrics`.
#[derive(Debug, Clone)]
pub struct Metrics(pub String);

impl Metrics {
    /// The sum of the samples of `name` whose labels include every `label="value"` pair of
    /// `labels` (`&[]`: all of them); 0 when there is none.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
                (metric == name
                    && labels
                        .iter()
                        .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
                .then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let g = ground();
        let _ = g.kubectl(
            &[
                "delete",
                "pods",
                "--all",
                "-n",
                &self.ns.name,
                "--wait=true",
                "--timeout=60s",
            ],
            None,
        );
        if let Some(mut b) = self.bridge.take() {
            b.kill();
        }
        for node in &self.nodes {
            let _ = g.kubectl(&["label", "node", node, &format!("{EXTERNAL}-")], None);
            let _ = g.kubectl(&["uncordon", node], None);
            // The bridge is gone before it could lift its taint.
            let _ = g.kubectl(&["taint", "node", node, &format!("{MANAGED_NODE}-")], None);
            let _ = g.kubectl(&["taint", "node", node, &format!("{KEEP_OFF}-")], None);
            let _ = g.kubectl(
                &[
                    "annotate",
                    "node",
                    node,
                    "topology.slinky.slurm.net/spec-",
                    "scheduler.slinky.slurm.net/external-node-partitions-",
                ],
                None,
            );
        }
    }
}

/// Slurm's nodes, or `None` when slurmrestd does not answer.
pub async fn slurm_nodes(slurm: &slurm_client::Client) -> Option<Vec<slurm_client::model::Node>> {
    let listed = slurm
        .list_nodes(&slurm_client::NodeQuery::default())
        .await
        .ok()?;
    Some(listed.into_value().nodes)
}

/// Waits until every ground node is a Slurm external node that takes jobs; gives Slurm's nodes.
pub async fn external_nodes(
    env: &TestEnv,
    slurm: &slurm_client::Client,
) -> Vec<slurm_client::model::Node> {
    eventually(
        "the ground's nodes as Slurm external nodes",
        Duration::from_secs(60),
        || async {
            let nodes = slurm_nodes(slurm).await?;
            let ready = env
                .nodes
                .iter()
                .all(|k| nodes.iter().any(|n| &n.name == k && n.is_available()));
            ready.then_some(nodes)
        },
    )
    .await
}

/// Installs a CRD from `tests/manifests/<file>` and waits until it is served.
pub fn install_crd(file: &str) {
    let path = format!("{}/tests/manifests/{file}", env!("CARGO_MANIFEST_DIR"));
    let g = ground();
    g.ok(&["apply", "--server-side", "-f", &path]);
    g.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &path,
    ]);
}

/// Polls `check` every 200 ms until it gives `Some`, panicking with `what` after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// slurm.conf lines indented as in the manifest's ConfigMap.
fn indent(lines: &str) -> String {
    lines.lines().map(|l| format!("    {l}\n")).collect()
}

/// 1024 random alphanumeric characters, as the chart's `randAlphaNum 1024`.
fn random_key() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut raw = [0u8; 1024];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut raw).unwrap();
    raw.iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

impl TestEnv {
    /// `kubectl delete <what>` in the namespace, waiting until it is gone.
    pub fn ground_delete(&self, what: &str) {
        let out = ground().kubectl(
            &[
                "delete",
                "-n",
                &self.ns.name,
                what,
                "--wait=true",
                "--timeout=60s",
            ],
            None,
        );
        assert!(
            out.status.success(),
            "deleting {what}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.bridge_log()
        );
    }

    /// Scales slurmrestd's Deployment and waits for the count of ready replicas.
    pub fn scale_restapi(&self, replicas: u32) {
        ground().ok(&[
            "scale",
            "-n",
            &self.ns.name,
            "deployment/slurm-restapi",
            &format!("--replicas={replicas}"),
        ]);
        let want = if replicas == 0 {
            String::new()
        } else {
            replicas.to_string()
        };
        self.wait_for(
            "deployment/slurm-restapi",
            "{.status.readyReplicas}",
            Duration::from_secs(120),
            |r| r == want || (replicas == 0 && r == "0"),
        );
    }
}

/// A pod spec for the bridge (1 CPU, 64 MiB, sleeping) with `extra` lines at its top level,
/// each line indented by `indent` spaces (for a template).
pub fn pod_spec(indent: usize, extra: &str) -> String {
    let spec = format!(
        r#"schedulerName: {SCHEDULER}
terminationGracePeriodSeconds: 1
{extra}containers:
- name: main
  image: {IMAGE}
  command: [sleep, "3600"]
  resources:
    requests: {{cpu: "1", memory: 64Mi}}
"#
    );
    let pad = " ".repeat(indent);
    spec.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// A bare pod for the bridge ([`pod_spec`]); `annotations` and `node_selector` are
/// flow-mapping entries (`k: v, k2: v2`).
pub fn pod(name: &str, annotations: &str, node_selector: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n{}",
        pod_spec(2, &format!("nodeSelector: {{{node_selector}}}\n"))
    )
}

/// How many times the bridge's log says a submission of `pod`'s workload failed.
pub fn refusals(env: &TestEnv, pod: &str) -> usize {
    env.bridge_log()
        .lines()
        .filter(|l| l.contains("workload failed") && l.contains(&format!("/{pod}")))
        .count()
}

/// Waits until Slurm's refusal of `pod`'s job is on the pod (its `SlurmJob` condition), checks
/// that the message names `word`, and that the bridge retried within `range` times over
/// `window`: with back-off, not in a loop.
pub async fn assert_refused_with_back_off(
    env: &TestEnv,
    pod: &str,
    word: &str,
    window: Duration,
    range: std::ops::RangeInclusive<usize>,
) {
    let message = env.wait_for(
        &format!("pod/{pod}"),
        "{.status.conditions[?(@.type==\"SlurmJob\")].message}",
        Duration::from_secs(60),
        |m| m.starts_with("Slurm refused the job"),
    );
    assert!(
        message.to_lowercase().contains(word),
        "the refusal names what Slurm refused ({word}): {message}"
    );
    tokio::time::sleep(window).await;
    let attempts = refusals(env, pod);
    assert!(
        range.contains(&attempts),
        "{attempts} submissions of {pod}'s refused job in {window:?}:\n{}",
        env.bridge_log()
    );
    assert_eq!(
        env.get(&format!("pod/{pod}"), "{.spec.nodeName}"),
        "",
        "{pod} is not bound"
    );
}
