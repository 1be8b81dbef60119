//! Hollow nodes (`kube-ground hollow`) against the running test ground: the test starts its own
//! hollow process with 50 tainted nodes of its own names, beside the ground's nodes, and checks
//! what `cargo xtask kube up --hollow-nodes N` gives: Node objects Ready with renewed Leases,
//! pods scheduled onto them by the ground's scheduler (or bound by nodeName), Running and Ready
//! without containers, ending as their annotations say, and deletion as the test kubelet's.
//!
//! `hollow_scale` (ignored) is the measured run at scale, on a ground brought up with
//! `--hollow-nodes`: see the ground's section of the README.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use test_support::ground::Ground;

const IMAGE: &str = "localhost/slurm-dev/toolbox:latest";
const LABEL: &str = "kube-ground.slurm-rs.dev/hollow";
const NODES: usize = 50;

/// The test's hollow process; stopped (SIGTERM) and its nodes and leases removed on drop, after
/// the pods left in `ns` are deleted (a pod on a node nobody serves would never go).
struct Hollow<'a> {
    g: &'a Ground,
    child: Child,
    prefix: String,
    ns: String,
    log: std::path::PathBuf,
    stopped: bool,
}

impl<'a> Hollow<'a> {
    fn start(g: &'a Ground, prefix: &str, ns: &str) -> Hollow<'a> {
        let log = std::env::temp_dir().join(format!("{prefix}hollow.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kube-ground"))
            .args([
                "hollow",
                &format!("--nodes={NODES}"),
                &format!("--prefix={prefix}"),
                "--allocatable=cpu=8,memory=16Gi,pods=20",
                "--taint",
                "--cost-every=0",
            ])
            .env("KUBECONFIG", g.kubeconfig())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting kube-ground hollow");
        Hollow {
            g,
            child,
            prefix: prefix.into(),
            ns: ns.into(),
            log,
            stopped: false,
        }
    }

    fn names(&self) -> Vec<String> {
        (1..=NODES).map(|i| format!("{}{i}", self.prefix)).collect()
    }

    /// SIGTERM, then the log it wrote.
    fn stop(&mut self) -> String {
        self.stopped = true;
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Hollow<'_> {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.g.kubectl(
                &[
                    "delete",
                    "pods",
                    "--all",
                    "-n",
                    &self.ns,
                    "--wait",
                    "--timeout=60s",
                ],
                None,
            );
            self.stop();
        }
        let names = self.names();
        let mut args = vec!["delete", "nodes", "--wait=false", "--ignore-not-found"];
        args.extend(names.iter().map(String::as_str));
        let _ = self.g.kubectl(&args, None);
        let mut args = vec![
            "delete",
            "leases",
            "-n",
            "kube-node-lease",
            "--wait=false",
            "--ignore-not-found",
        ];
        args.extend(names.iter().map(String::as_str));
        let _ = self.g.kubectl(&args, None);
        let _ = std::fs::remove_file(&self.log);
    }
}

fn wait(what: &str, limit: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if Instant::now() > deadline => panic!("{what} after {limit:?}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn lines(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(' ').map(String::from).collect())
        .collect()
}

#[test]
fn hollow_nodes_run_pods_without_containers() {
    let g = Ground::connect();
    let prefix = format!("kg-hollow-{}-", std::process::id());
    let ns = g.namespace("kg-hollow");
    let hollow = Hollow::start(&g, &prefix, &ns.name);
    let names = hollow.names();

    // Every node registered, Ready, with what it was given, and tainted.
    wait("hollow nodes Ready", Duration::from_secs(60), || {
        let out = g.ok(&[
            "get",
            "nodes",
            "-l",
            &format!("{LABEL}=true"),
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ]);
        let ready = lines(&out)
            .iter()
            .filter(|l| l[0].starts_with(&prefix) && l.get(1).map(String::as_str) == Some("True"))
            .count();
        (ready == NODES)
            .then_some(())
            .ok_or(format!("{ready} of {NODES} Ready"))
    });
    let node7 = format!("{prefix}7");
    let shown = g.ok(&[
        "get",
        &format!("node/{node7}"),
        "-o",
        "jsonpath={.status.allocatable.cpu} {.status.allocatable.memory} {.status.allocatable.pods} {.spec.taints[0].key} {.spec.taints[0].effect}",
    ]);
    assert_eq!(shown, format!("8 16Gi 20 {LABEL} NoSchedule"));
    let renewed = |name: &str| {
        g.get(
            "kube-node-lease",
            &format!("lease/{name}"),
            "{.spec.renewTime}",
        )
    };
    // The last node's renewal comes last in the 10 s period.
    let mut first_renewal = String::new();
    wait("the last node's lease", Duration::from_secs(20), || {
        first_renewal = renewed(&names[NODES - 1]);
        (!first_renewal.is_empty())
            .then_some(())
            .ok_or(format!("no lease for {}", names[NODES - 1]))
    });

    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 20
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      nodeSelector: {{{LABEL}: "true"}}
      tolerations: [{{key: {LABEL}, operator: Exists}}]
      containers:
      - name: main
        image: {IMAGE}
        command: [sleep, infinity]
        readinessProbe: {{exec: {{command: ["false"]}}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: short
  annotations: {{kube-ground.slurm-rs.dev/hollow-run-seconds: "4"}}
spec:
  nodeName: {node7}
  restartPolicy: Never
  containers:
  - {{name: main, image: {IMAGE}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: fails
  annotations: {{kube-ground.slurm-rs.dev/hollow-run-seconds: "1", kube-ground.slurm-rs.dev/hollow-exit-code: "3"}}
spec:
  restartPolicy: Never
  nodeSelector: {{{LABEL}: "true"}}
  tolerations: [{{key: {LABEL}, operator: Exists}}]
  containers:
  - {{name: main, image: {IMAGE}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: held}}
spec:
  restartPolicy: Never
  nodeSelector: {{{LABEL}: "true"}}
  tolerations: [{{key: {LABEL}, operator: Exists}}]
  initContainers:
  - {{name: setup, image: {IMAGE}}}
  containers:
  - {{name: main, image: {IMAGE}}}
  - {{name: second, image: {IMAGE}}}
"#
        ),
    );

    // The Deployment's pods: scheduled onto the test's hollow nodes by the ground's scheduler,
    // Running and Ready (probes pass at once), each with an address of the hollow range.
    wait(
        "the Deployment's pods Running and Ready",
        Duration::from_secs(90),
        || {
            let out = g.ok(&[
            "get",
            "pods",
            "-n",
            &ns.name,
            "-l",
            "app=web",
            "-o",
            r#"jsonpath={range .items[*]}{.spec.nodeName} {.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.status.podIP} {.status.containerStatuses[0].ready} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}"#,
        ]);
            let pods = lines(&out);
            let good = pods
                .iter()
                .filter(|l| l.len() == 6 && l[1] == "Running" && l[2] == "True" && l[4] == "true")
                .count();
            if good < 20 {
                return Err(format!("{good} of 20 Running and Ready:\n{out}"));
            }
            for l in &pods {
                assert!(l[0].starts_with(&prefix), "on a node not the test's: {l:?}");
                assert!(l[3].starts_with("10.245."), "pod IP {l:?}");
                assert!(!l[5].is_empty(), "no startedAt: {l:?}");
            }
            let nodes: std::collections::BTreeSet<&String> = pods.iter().map(|l| &l[0]).collect();
            assert!(nodes.len() > 1, "all on one node: {nodes:?}");
            Ok(())
        },
    );

    // The annotated pods end as asked, the other one keeps running.
    g.wait_for(
        &ns.name,
        "pod/short",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Succeeded",
    );
    let ended = g.get(
        &ns.name,
        "pod/short",
        "{.status.containerStatuses[0].state.terminated.exitCode} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.startedAt} {.status.containerStatuses[0].state.terminated.finishedAt} {.spec.nodeName}",
    );
    let parts: Vec<&str> = ended.split(' ').collect();
    assert_eq!(&parts[..2], ["0", "Completed"], "{ended}");
    assert_eq!(parts[4], node7);
    let ran = parts[3].parse::<Timestamp>().unwrap().as_second()
        - parts[2].parse::<Timestamp>().unwrap().as_second();
    assert!((3..=10).contains(&ran), "ran {ran} s: {ended}");
    g.wait_for(
        &ns.name,
        "pod/fails",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Failed",
    );
    assert_eq!(
        g.get(
            &ns.name,
            "pod/fails",
            "{.status.containerStatuses[0].state.terminated.exitCode}"
        ),
        "3"
    );
    g.wait_for(
        &ns.name,
        "pod/held",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    let held = g.get(
        &ns.name,
        "pod/held",
        r#"{.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.status.initContainerStatuses[0].state.terminated.reason} {.status.containerStatuses[*].ready} {.status.hostIP}"#,
    );
    assert_eq!(
        held.split(' ').take(5).collect::<Vec<_>>()[..4],
        ["Running", "True", "Completed", "true"],
        "{held}"
    );

    // Events as the test kubelet's: Started for every container (one event, counted as a
    // series by the event recorder, as the kubelet's own).
    let events = || {
        g.ok(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns.name,
            "-o",
            r#"jsonpath={range .items[*]}{.regarding.name} {.reason} {.series.count} {.note}{"\n"}{end}"#,
        ])
    };
    let started = events();
    assert!(
        started.contains("held Started 3 Started container "),
        "{started}"
    );
    assert!(
        started.contains("short Started  Started container main"),
        "{started}"
    );

    // Deletion: graceful, the object gone at once (nothing to wait for), a Killing event.
    let deleting = Instant::now();
    g.ok(&[
        "delete",
        "pod",
        "held",
        "-n",
        &ns.name,
        "--wait",
        "--timeout=30s",
    ]);
    assert!(
        deleting.elapsed() < Duration::from_secs(15),
        "deletion took {:?}",
        deleting.elapsed()
    );
    assert!(events().contains("held Killing"), "{}", events());
    g.ok(&["scale", "deployment", "web", "-n", &ns.name, "--replicas=0"]);
    wait(
        "the Deployment's pods gone",
        Duration::from_secs(60),
        || {
            let left = g.get(&ns.name, "pods", "{.items[*].metadata.labels.app}");
            (!left.contains("web")).then_some(()).ok_or(left)
        },
    );

    // Leases renewed meanwhile (every 10 s).
    wait("a lease renewed", Duration::from_secs(30), || {
        let now = renewed(&names[NODES - 1]);
        (now != first_renewal)
            .then_some(())
            .ok_or(format!("still {now}"))
    });

    g.ok(&[
        "delete",
        "pods",
        "--all",
        "-n",
        &ns.name,
        "--wait",
        "--timeout=60s",
    ]);
    let mut hollow = hollow;
    let log = hollow.stop();
    assert!(log.contains("hollow cost"), "{log}");
    assert!(log.contains("api_requests"), "{log}");
}
