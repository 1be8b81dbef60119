//! The Helm end-to-end, as a user deploys: on the test ground (a fresh one: `cargo xtask kube up`),
//! with real Helm from the chart directories and the project's own images (`cargo xtask image
//! project --tag e2e-upgrade`), install the CRDs and the operator, a Slurm cluster from the `slurm`
//! chart, run a job with the `slurm` CLI image; log in to the login pod over ssh and run Slurm's
//! commands there ([`login`]); install the exporter and scrape it through its Service; install
//! the bridge (its token from a Token resource) and have Slurm place a pod; scrape it all with a
//! real Prometheus ([`monitoring`]); upgrade the operator to a new image tag without disturbing
//! the cluster; check each component's RBAC against the audit log; uninstall everything and find
//! nothing left behind.
//!
//! Values: `xtask/deploy/*.yaml` (shared with `cargo xtask demo`). Run alone: `cargo test -p xtask --test deploy -- --nocapture`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "deploy/login.rs"]
mod login;
#[path = "deploy/monitoring.rs"]
mod monitoring;

use serde_json::Value;
use test_support::ground::{Ground, forward_into_ground};
use test_support::helm::{helm, workspace};
use test_support::{PROJECT_VERSION, rbac};

/// The second tag `cargo xtask image project --tag e2e-upgrade` gives every project image.
const UPGRADE_TAG: &str = "e2e-upgrade";

/// The namespaces of one run (the ground is fresh, but a rerun by hand must not collide).
struct Names {
    operator: String,
    slurm: String,
    work: String,
}

impl Names {
    fn new() -> Names {
        let id = std::process::id();
        Names {
            operator: format!("slinky-{id}"),
            slurm: format!("slurm-{id}"),
            work: format!("bridge-work-{id}"),
        }
    }
}

#[test]
fn charts_install_run_upgrade_and_uninstall() {
    let g = Ground::shared();
    let n = Names::new();
    let started = Instant::now();
    let step = |what: &str| eprintln!("==> [{:>5.1}s] {what}", started.elapsed().as_secs_f64());

    step("CRDs and the operator");
    install(
        g,
        "slurm-operator-crds",
        "slurm-operator/charts/slurm-operator-crds",
        "default",
        &[] as &[&str],
    );
    install(
        g,
        "slurm-operator",
        "slurm-operator/charts/slurm-operator",
        &n.operator,
        &["--wait"],
    );
    wait_pods_ready(
        g,
        &n.operator,
        "app.kubernetes.io/instance=slurm-operator",
        1,
        180,
    );

    step("a Slurm cluster from the slurm chart, with slurmctld's metrics and their ServiceMonitor");
    let crd = std::fs::read_to_string(workspace().join("xtask/deploy/servicemonitor-crd.yaml"))
        .expect("xtask/deploy/servicemonitor-crd.yaml");
    g.apply("default", &crd);
    g.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/servicemonitors.monitoring.coreos.com",
        "--timeout=60s",
    ]);
    let keys = login::Keys::new();
    install(
        g,
        "slurm",
        "slurm-operator/charts/slurm",
        &n.slurm,
        &with(
            [values("slurm.yaml"), keys.values()].concat(),
            monitoring::SLURMCTLD_METRICS,
        ),
    );
    let cluster = Cluster::new(g, &n.slurm, "slurm");
    wait_pods_ready(g, &n.slurm, "app.kubernetes.io/name=slurmctld", 1, 300);
    wait_pods_ready(g, &n.slurm, "app.kubernetes.io/name=slurmd", 2, 300);
    wait_pods_ready(g, &n.slurm, "app.kubernetes.io/name=slurmrestd", 1, 300);
    let job = cluster.cli_settling(
        &[
            "jobs",
            "submit",
            "--name",
            "e2e",
            "--partition",
            "workers",
            "--wrap",
            "hostname",
            "--output",
            "json",
        ],
        120,
    );
    let job_id = json(&job)["job_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job id in {job}"));
    cluster.wait_job(job_id, &["COMPLETED"], 120);
    wait_pods_ready(g, &n.slurm, "app.kubernetes.io/name=login", 1, 300);
    step("ssh to the login pod with root's authorized key: sinfo, srun -p workers -N2 hostname");
    login::login_runs_slurm_commands(g, &n.slurm, &keys, &["workers-0", "workers-1"]);

    step("scale-in: the operator drains a worker in Slurm, then deletes its pod");
    g.ok(&[
        "scale",
        "nodeset",
        "slurm-worker-workers",
        "-n",
        &n.slurm,
        "--replicas=1",
    ]);
    g.wait_for(
        &n.slurm,
        "pods",
        "{.items[*].metadata.name}",
        Duration::from_secs(120),
        |names| !names.contains("slurm-worker-workers-1"),
    );

    step("the exporter, scraped through its Service");
    install(
        g,
        "slurm-exporter",
        "slurm-exporter/charts/slurm-exporter",
        &n.slurm,
        &with(values("exporter.yaml"), &["--wait"]),
    );
    let metrics = scrape(g, &n.slurm, "slurm-exporter", 120, |m| {
        m.lines().any(|l| l == "slurm_up 1")
    });
    assert!(
        metrics.contains("slurm_nodes"),
        "no node metrics:\n{metrics}"
    );

    step("the bridge, and a pod that Slurm places");
    g.ok(&["create", "namespace", &n.work]);
    // Slurm gets two of the three nodes, which the bridge taints; the first keeps the pods
    // of the system (the operator's, the CLI's) that do not tolerate the taint.
    let slurm_nodes = &nodes(g)[1..];
    for node in slurm_nodes {
        g.ok(&[
            "label",
            "node",
            node,
            "scheduler.slinky.slurm.net/external-node=true",
            "--overwrite",
        ]);
    }
    install(
        g,
        "slurm-bridge",
        "slurm-bridge/charts/slurm-bridge",
        &n.slurm,
        &bridge_values(&n),
    );
    let bridge_job = place(g, &cluster, &n.work, "sleeper");
    assert_eq!(
        g.get(&n.work, "pod/sleeper", "{.spec.schedulerName}"),
        "slurm-bridge-scheduler"
    );

    step("Prometheus scrapes every component through the ServiceMonitors of the charts");
    let prometheus = monitoring::prometheus(g, &n);
    let held = monitoring::hold_job(&cluster);
    step("every query of the dashboard answers");
    monitoring::dashboard_answers(&prometheus);
    step("slurmctld's own metrics agree with the exporter's");
    monitoring::slurmctld_agrees_with_exporter(&prometheus);
    cluster.cli(&["jobs", "cancel", &held.to_string()]);
    step("slurmrestd stopped: the alert fires, and resolves when it is back");
    monitoring::outage_fires_and_resolves(g, &n, &prometheus);
    drop(prometheus);
    step("slurmctld's ServiceMonitor turned off and on: the operator deletes and remakes it");
    monitoring::service_monitor_follows_the_controller(g, &n);

    step("operator upgraded to a new image tag; the cluster is left alone");
    let before = pods(g, &n.slurm);
    let upgraded = format!("operator.image.tag={UPGRADE_TAG}");
    upgrade(
        g,
        "slurm-operator",
        "slurm-operator/charts/slurm-operator",
        &n.operator,
        &["--set", &upgraded, "--wait"],
    );
    g.wait_for(
        &n.operator,
        "pods",
        "{.items[*].spec.containers[0].image}",
        Duration::from_secs(180),
        |images| {
            !images.is_empty()
                && images
                    .split(' ')
                    .all(|i| i.ends_with(&format!(":{UPGRADE_TAG}")))
        },
    );
    wait_pods_ready(
        g,
        &n.operator,
        "app.kubernetes.io/instance=slurm-operator",
        1,
        180,
    );
    std::thread::sleep(Duration::from_secs(20));
    let after = pods(g, &n.slurm);
    for (name, (uid, restarts)) in &before {
        assert_eq!(
            after.get(name),
            Some(&(uid.clone(), *restarts)),
            "pod {name} changed across the operator upgrade"
        );
    }
    cluster.wait_job(bridge_job, &["RUNNING"], 10);

    step("bridge: helm upgrade keeps the CA it wrote; restarted, it writes a new one");
    upgrade(
        g,
        "slurm-bridge",
        "slurm-bridge/charts/slurm-bridge",
        &n.slurm,
        &bridge_values(&n),
    );
    let upgraded_job = place(g, &cluster, &n.work, "after-upgrade");
    let old = g.ok(&[
        "get",
        "pods",
        "-n",
        &n.slurm,
        "-l",
        "app.kubernetes.io/instance=slurm-bridge",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    g.ok(&["delete", "pod", &old, "-n", &n.slurm, "--wait=true"]);
    wait_pods_ready(
        g,
        &n.slurm,
        "app.kubernetes.io/instance=slurm-bridge",
        1,
        180,
    );
    let restarted_job = place(g, &cluster, &n.work, "after-restart");

    step("a job Slurm ends takes its pod with it");
    cluster.cli(&["jobs", "cancel", &restarted_job.to_string()]);
    g.wait_for(
        &n.work,
        "pods",
        "{.items[*].metadata.name}",
        Duration::from_secs(120),
        |names| !names.split(' ').any(|p| p == "after-restart"),
    );

    step("RBAC: every request granted, every grant used");
    check_rbac(g, &n.operator, "slurm-operator", OPERATOR_UNUSED);
    check_rbac(g, &n.slurm, "slurm-bridge", BRIDGE_UNUSED);

    step("uninstall: nothing left behind");
    g.ok(&[
        "delete",
        "pod",
        "sleeper",
        "-n",
        &n.work,
        "--wait=true",
        "--timeout=120s",
    ]);
    g.ok(&[
        "delete",
        "pod",
        "after-upgrade",
        "-n",
        &n.work,
        "--wait=true",
        "--timeout=120s",
    ]);
    for job in [bridge_job, upgraded_job, restarted_job] {
        cluster.wait_job(job, &["COMPLETED", "CANCELLED"], 60);
    }
    // Unlabelled, an idle node leaves Slurm, and the bridge lifts its taint.
    for node in slurm_nodes {
        g.ok(&[
            "label",
            "node",
            node,
            "scheduler.slinky.slurm.net/external-node-",
        ]);
    }
    for node in slurm_nodes {
        g.wait_for(
            "",
            &format!("node/{node}"),
            "{.spec.taints[?(@.key==\"slinky.slurm.net/managed-node\")].key}",
            Duration::from_secs(90),
            str::is_empty,
        );
    }
    uninstall(g, "slurm-bridge", &n.slurm);
    uninstall(g, "slurm-exporter", &n.slurm);
    uninstall(g, "slurm", &n.slurm);
    // Slurm's saved state outlives an uninstall, as with Slinky (the StatefulSet's claim is
    // retained): the one thing left, on purpose. A reinstall picks it up; a user deletes it.
    let statesave = "persistentvolumeclaim/statesave-slurm-controller-0";
    wait_empty(g, &n.slurm, &[statesave], 240);
    // The operator's ServiceMonitor goes with its Controller.
    g.wait_for(
        &n.slurm,
        "servicemonitors",
        "{.items[*].metadata.name}",
        Duration::from_secs(60),
        str::is_empty,
    );
    g.ok(&["delete", statesave, "-n", &n.slurm, "--wait=true"]);
    uninstall(g, "slurm-operator", &n.operator);
    uninstall(g, "slurm-operator-crds", "default");
    g.ok(&[
        "delete",
        "crd",
        "servicemonitors.monitoring.coreos.com",
        "--wait=true",
    ]);
    wait_empty(g, &n.operator, &[], 120);
    let crds = g.ok(&["get", "crds", "-o", "name"]);
    assert!(!crds.contains("slinky.slurm.net"), "CRDs left: {crds}");
    let cluster_wide = g.ok(&[
        "get",
        "mutatingwebhookconfigurations,validatingwebhookconfigurations,clusterroles,clusterrolebindings",
        "-o",
        "name",
    ]);
    let left: Vec<&str> = cluster_wide
        .lines()
        .filter(|l| l.contains("slurm"))
        .collect();
    assert!(left.is_empty(), "cluster-scoped objects left: {left:?}");
    for ns in [&n.operator, &n.slurm, &n.work] {
        g.ok(&["delete", "namespace", ns, "--wait=false"]);
    }
    step("done");
}

/// Creates pod `name` (WORK_POD) in the bridge's namespace and waits until it runs on the nodes of
/// its Slurm job, which must be running; the job's id.
fn place(g: &Ground, cluster: &Cluster, ns: &str, name: &str) -> u64 {
    g.apply(
        ns,
        &WORK_POD.replace("name: sleeper", &format!("name: {name}")),
    );
    let phase = g.wait_for(
        ns,
        &format!("pod/{name}"),
        "{.status.phase}",
        Duration::from_secs(180),
        |p| p == "Running",
    );
    assert_eq!(phase, "Running", "{}", g.logs_tail(cluster.ns.as_str(), 30));
    let job: u64 = g
        .get(
            ns,
            &format!("pod/{name}"),
            "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
        )
        .parse()
        .expect("the bridge labels the pod with its Slurm job id");
    cluster.wait_job(job, &["RUNNING"], 60);
    job
}

const WORK_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: sleeper
  annotations:
    slurmjob.slinky.slurm.net/job-name: e2e-bridge
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: sleeper
      image: busybox:latest
      command: ["sleep", "3600"]
      resources:
        requests:
          cpu: "1"
          memory: 64Mi
"#;

/// Grants this run does not exercise, each with the path that uses it.
const OPERATOR_UNUSED: &[(&str, &str)] = &[
    (
        "patch core/secrets",
        "a Token's own Secret re-applied when its token is refreshed (after four fifths of its lifetime) or its key changes; a new one is created, and this run is shorter",
    ),
    (
        "patch apps/controllerrevisions",
        "a NodeSet template that comes back to an earlier revision; the templates here do not change",
    ),
    (
        "delete apps/controllerrevisions",
        "a NodeSet revision no pod uses any more; the templates here do not change",
    ),
    (
        "get slinky.slurm.net/accountings",
        "read when a Controller references an Accounting; this cluster has none",
    ),
    (
        "patch slinky.slurm.net/accountings/status",
        "an Accounting's status; this cluster has none",
    ),
    (
        "patch slinky.slurm.net/nodesets",
        "the finalizer of a ScheduledUpdate's maintenance reservation; no NodeSet here uses one",
    ),
    (
        "get core/persistentvolumeclaims",
        "the webhook's check of a Controller's persistence.existingClaim; not set here",
    ),
    (
        "create core/persistentvolumeclaims",
        "NodeSet volumeClaimTemplates; none here",
    ),
    (
        "list core/persistentvolumeclaims",
        "the owners of NodeSet volumeClaimTemplates' claims (persistentVolumeClaimRetentionPolicy); none here",
    ),
    (
        "patch core/persistentvolumeclaims",
        "the owners of NodeSet volumeClaimTemplates' claims (persistentVolumeClaimRetentionPolicy); none here",
    ),
    (
        "patch events.k8s.io/events",
        "an Event that repeats is counted by patching it (event series); whether one repeats is timing",
    ),
    ("update slinky.slurm.net/controllers/finalizers", FINALIZERS),
    ("update slinky.slurm.net/nodesets/finalizers", FINALIZERS),
    ("update slinky.slurm.net/loginsets/finalizers", FINALIZERS),
    ("update slinky.slurm.net/restapis/finalizers", FINALIZERS),
    ("update slinky.slurm.net/accountings/finalizers", FINALIZERS),
    ("update slinky.slurm.net/tokens/finalizers", FINALIZERS),
];
const BRIDGE_UNUSED: &[(&str, &str)] = &[
    (
        "get core/pods",
        "after a binding answered 409, to see whether the pod is bound to that node already",
    ),
    (
        "patch events.k8s.io/events",
        "an Event that repeats is counted by patching it (event series); whether one repeats is timing",
    ),
    ("get apps/replicasets", OWNERS),
    ("get apps/deployments", OWNERS),
    ("get apps/statefulsets", OWNERS),
    ("get batch/jobs", OWNERS),
    ("get scheduling.x-k8s.io/podgroups", OWNERS),
    (
        "patch scheduling.x-k8s.io/podgroups/status",
        "a coscheduling PodGroup's status (podGroupStatus); the pods here are bare",
    ),
    ("get jobset.x-k8s.io/jobsets", OWNERS),
    ("get leaderworkerset.x-k8s.io/leaderworkersets", OWNERS),
    (
        "patch core/persistentvolumeclaims",
        "a WaitForFirstConsumer claim's selected node; the pods here use no claims",
    ),
];
/// The bridge's walk up a pod's owners (the workload's annotations, its gang size).
const OWNERS: &str = "the walk from a pod to the workload that owns it; the pods here are bare";
/// Not a request: admission's check of an owner reference with blockOwnerDeletion.
const FINALIZERS: &str = "the OwnerReferencesPermissionEnforcement admission plugin (OpenShift) \
    checks it for owner references with blockOwnerDeletion; an authorization check the audit log never shows";

/// A Slurm cluster of the `slurm` chart, reached with the `slurm` CLI image in pods.
struct Cluster<'a> {
    g: &'a Ground,
    ns: String,
    release: String,
    seq: std::cell::Cell<u32>,
}

impl<'a> Cluster<'a> {
    fn new(g: &'a Ground, ns: &str, release: &str) -> Self {
        Cluster {
            g,
            ns: ns.to_owned(),
            release: release.to_owned(),
            seq: std::cell::Cell::new(0),
        }
    }

    /// Runs `slurm ARGS` in a pod of the CLI image (JWT minted from the chart's key Secret); its
    /// output. Panics, with the output, when it fails.
    fn cli(&self, args: &[&str]) -> String {
        let (ok, out) = self.try_cli(args);
        assert!(ok, "slurm {}:\n{out}", args.join(" "));
        out
    }

    /// As [`cli`](Self::cli), retried for up to `secs` while slurmrestd cannot reach slurmctld:
    /// a new cluster's slurmctld restarts once its NodeSets and LoginSets join the config.
    fn cli_settling(&self, args: &[&str], secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let (ok, out) = self.try_cli(args);
            if ok {
                return out;
            }
            let transient = out.contains("Unable to contact slurm controller")
                || out.contains("HTTP 502")
                || out.contains("HTTP 503");
            assert!(
                transient && Instant::now() < deadline,
                "slurm {}:\n{out}",
                args.join(" ")
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    /// Runs `slurm ARGS` once: whether it succeeded, and its output.
    fn try_cli(&self, args: &[&str]) -> (bool, String) {
        let n = self.seq.get();
        self.seq.set(n + 1);
        let name = format!("slurm-cli-{n}");
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "containers": [{
                    "name": "slurm",
                    "image": format!("ghcr.io/slurm-rs/slurm:{PROJECT_VERSION}"),
                    "args": args,
                    "env": [
                        {"name": "SLURM_REST_URL", "value": format!("http://{}-restapi.{}:6820", self.release, self.ns)},
                        {"name": "SLURM_USER_NAME", "value": "slurm"},
                        {"name": "SLURM_JWT_KEY", "value": "/etc/slurm-jwt/jwt.key"},
                    ],
                    "volumeMounts": [{"name": "jwt", "mountPath": "/etc/slurm-jwt", "readOnly": true}],
                }],
                "volumes": [{"name": "jwt", "secret": {"secretName": format!("{}-auth-jwt", self.release)}}],
            },
        });
        self.g.apply(&self.ns, &pod.to_string());
        let phase = self.g.wait_for(
            &self.ns,
            &format!("pod/{name}"),
            "{.status.phase}",
            Duration::from_secs(120),
            |p| p == "Succeeded" || p == "Failed",
        );
        let out = self.g.log(&self.ns, &name, "slurm");
        let _ = self.g.kubectl(
            &["delete", "pod", &name, "-n", &self.ns, "--wait=false"],
            None,
        );
        (phase == "Succeeded", out)
    }

    /// Waits until job `id` is in one of `states`.
    fn wait_job(&self, id: u64, states: &[&str], secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let out = self.cli(&["jobs", "show", &id.to_string(), "--output", "json"]);
            let job = json(&out);
            let state: Vec<String> = job["state"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .or_else(|| job["state"].as_str().map(|s| vec![s.to_owned()]))
                .unwrap_or_default();
            if state
                .iter()
                .any(|s| states.iter().any(|w| s.eq_ignore_ascii_case(w)))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} still {state:?} after {secs} s, waiting for {states:?}:\n{out}"
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}

/// The first JSON value in `text` (the CLI's output may have lines before and warnings after).
fn json(text: &str) -> Value {
    let start = text.find(['{', '[']).unwrap_or(0);
    match serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()
    {
        Some(Ok(v)) => v,
        Some(Err(e)) => panic!("not JSON ({e}): {text}"),
        None => panic!("no JSON: {text}"),
    }
}

fn chart(path: &str) -> String {
    workspace().join(path).display().to_string()
}

fn values(file: &str) -> Vec<String> {
    vec![
        "-f".into(),
        workspace()
            .join("xtask/deploy")
            .join(file)
            .display()
            .to_string(),
    ]
}

/// The bridge's values: xtask/deploy/bridge.yaml, managing this run's work namespace.
fn bridge_values(n: &Names) -> Vec<String> {
    with([values("bridge.yaml"), bridge_set(n)].concat(), &["--wait"])
}

/// The `--set` of the bridge's values: the namespaces it manages.
fn bridge_set(n: &Names) -> Vec<String> {
    vec![
        "--set".into(),
        format!("config.managedNamespaces={{{}}}", n.work),
    ]
}

fn with(mut values: Vec<String>, extra: &[&str]) -> Vec<String> {
    values.extend(extra.iter().map(|s| s.to_string()));
    values
}

fn install<S: AsRef<str>>(g: &Ground, release: &str, chart_path: &str, ns: &str, extra: &[S]) {
    helm_ok(g, "install", release, chart_path, ns, extra);
}

fn upgrade<S: AsRef<str>>(g: &Ground, release: &str, chart_path: &str, ns: &str, extra: &[S]) {
    helm_ok(g, "upgrade", release, chart_path, ns, extra);
}

fn helm_ok<S: AsRef<str>>(
    g: &Ground,
    verb: &str,
    release: &str,
    chart_path: &str,
    ns: &str,
    extra: &[S],
) {
    let chart = chart(chart_path);
    let mut args = vec![
        verb,
        release,
        chart.as_str(),
        "-n",
        ns,
        "--create-namespace",
        "--timeout",
        "300",
    ];
    if verb == "upgrade" {
        args.retain(|a| *a != "--create-namespace");
    }
    args.extend(extra.iter().map(AsRef::as_ref));
    if let Err(e) = helm(&args, Some(g.kubeconfig())) {
        panic!(
            "{e}\npods:\n{}\nlogs:\n{}",
            g.ok(&["get", "pods", "-A", "-o", "wide"]),
            g.logs_tail(ns, 40)
        );
    }
}

fn uninstall(g: &Ground, release: &str, ns: &str) {
    if let Err(e) = helm(
        &["uninstall", release, "-n", ns, "--wait", "--timeout", "300"],
        Some(g.kubeconfig()),
    ) {
        panic!("{e}");
    }
}

fn nodes(g: &Ground) -> Vec<String> {
    g.ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Pod name → (uid, restarts of all containers).
fn pods(g: &Ground, ns: &str) -> BTreeMap<String, (String, u64)> {
    let list: Value =
        serde_json::from_str(&g.ok(&["get", "pods", "-n", ns, "-o", "json"])).expect("a pod list");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            !p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .starts_with("slurm-cli-")
        })
        .map(|p| {
            let restarts = p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_u64())
                .sum();
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                (
                    p["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
                    restarts,
                ),
            )
        })
        .collect()
}

fn wait_pods_ready(g: &Ground, ns: &str, selector: &str, want: usize, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let ready = g.ok(&[
            "get", "pods", "-n", ns, "-l", selector, "-o",
            r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ]);
        if ready.lines().filter(|l| *l == "True").count() >= want {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "{ns}: fewer than {want} pods {selector} Ready after {secs} s:\n{}\nlogs:\n{}",
                g.ok(&["get", "pods", "-n", ns, "-o", "wide"]),
                g.logs_tail(ns, 40)
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// GETs /metrics of Service `service` (its first port) until `check` holds; the text.
fn scrape(g: &Ground, ns: &str, service: &str, secs: u64, check: impl Fn(&str) -> bool) -> String {
    let ip = g.get(ns, &format!("service/{service}"), "{.spec.clusterIP}");
    let port = g.get(ns, &format!("service/{service}"), "{.spec.ports[0].port}");
    let target = format!("{ip}:{port}")
        .parse()
        .expect("a ClusterIP and port");
    let local = forward_into_ground(target);
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let text = http_get(local, "/metrics").unwrap_or_default();
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}/{service}: /metrics never passed the check:\n{text}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The body of GET `path` at `addr`.
fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    test_support::http::get(addr, path).map(|(_, body)| body)
}

/// Waits until the namespace has no pods, Secrets, PVCs, Services, ConfigMaps (but the root CA's),
/// Deployments or StatefulSets left but those in `kept` (`kind/name`, as `kubectl -o name`).
fn wait_empty(g: &Ground, ns: &str, kept: &[&str], secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = g.ok(&[
            "get",
            "pods,secrets,persistentvolumeclaims,services,configmaps,deployments,statefulsets",
            "-n",
            ns,
            "-o",
            "name",
        ]);
        let left: Vec<&str> = left
            .lines()
            .filter(|l| {
                !l.starts_with("configmap/kube-root-ca.crt")
                    && !l.starts_with("pod/slurm-cli-")
                    && !kept.contains(l)
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}: left behind after uninstall: {left:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn check_rbac(g: &Ground, ns: &str, account: &str, may_stay_unused: &[(&str, &str)]) {
    let may_stay_unused: Vec<&str> = may_stay_unused.iter().map(|(grant, _why)| *grant).collect();
    let audit = std::fs::read_to_string("/run/slurm-dev/kube/kube.env")
        .ok()
        .and_then(|env| {
            env.lines()
                .find_map(|l| l.strip_prefix("KUBE_GROUND_AUDIT_LOG=").map(str::to_owned))
        })
        .expect("KUBE_GROUND_AUDIT_LOG in the ground's env file");
    let user = format!("system:serviceaccount:{ns}:{account}");
    let requests = rbac::requests(std::path::Path::new(&audit), &user);
    assert!(
        !requests.is_empty(),
        "no request of {user} in the audit log: does its pod run as that service account?"
    );
    let objects: Value = serde_json::from_str(&g.ok(&[
        "get",
        "clusterroles,clusterrolebindings,roles,rolebindings",
        "-A",
        "-o",
        "json",
    ]))
    .expect("RBAC objects");
    let grants = rbac::grants(&objects, ns, account);
    let report = rbac::check(&requests, &grants, &may_stay_unused);
    let used: Vec<String> = requests.iter().map(ToString::to_string).collect();
    assert!(
        report.is_clean(),
        "RBAC of {user}:\n{report}\nrequests made:\n  {}",
        used.join("\n  ")
    );
}
