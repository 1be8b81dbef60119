//! The operator at scale (issue 25, part 3), on a test ground with hollow nodes (pods bound there
//! are Running and Ready at once, without containers), against a real Slurm 26.05 slurmctld and
//! slurmrestd in pods on the ground's real node:
//!
//! 1. **one NodeSet of 1,000 pods**: `tests/manifests/cluster.yaml` with its NodeSet made 1,000
//!    replicas for the hollow nodes (their toleration and label, and `oversubscribeNode: true`,
//!    so that 1,000 pods share the ground's hollow nodes instead of needing 1,000 of them). No
//!    slurmd runs in a hollow pod, so the bench stands in for each: as soon as a pod runs, it
//!    creates the pod's Slurm node through slurmrestd, `NodeName=<hostname> CPUs=2
//!    RealMemory=2048 Feature=slinky State=EXTERNAL`. External nodes (Slurm 25.11+) are nodes
//!    slurmctld never expects a slurmd on: they stay in service without one (a dynamic node
//!    made with `scontrol create` waits for its slurmd, and `SlurmdTimeout=0` would only keep
//!    a silent one from being marked down after it registered). The operator reads, drains and
//!    returns them to service as it does registered nodes. Figures: apply → every pod ready,
//!    → every Slurm node in service;
//! 2. **scale 1,000 → 900 → 1,000** through the scale subresource: time to converge (the pods
//!    gone and their nodes drained, then every pod back and every node in service again) and the
//!    operator's API writes per pod moved, until it has written nothing for 5 s (the ground's
//!    audit log, told apart by the operator's `User-Agent`);
//! 3. **requests a minute at rest**, by the operator;
//! 4. **reconcile p99** per controller (its `/metrics` histogram: the bucket bound) and **peak
//!    RSS** (`VmHWM`);
//! 5. **50 small clusters more**, each a Controller and a NodeSet of 4, all on hollow nodes (so
//!    no slurmctld runs; the operator holds their objects): time until their pods run, requests
//!    at rest, RSS.
//!
//! ```sh
//! cargo xtask kube up --nodes 1 --hollow-nodes 100 --hollow-allocatable cpu=64,memory=256Gi,pods=110 --hollow-taint
//! cargo bench -p slurm-operator --bench scale      # or: cargo xtask bench
//! ```
//!
//! `SLURM_BENCH_QUICK=1`: 200 pods and 10 small clusters. Without the ground, or without enough
//! hollow nodes, it says so and is skipped.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/measure.rs"]
mod measure;
#[path = "../tests/cluster/metrics.rs"]
#[allow(dead_code)]
mod metrics;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestEnv, ground};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use measure::{
    AuditMark, Count, Result, count_requests, ground_var, mib, operator_pid, peak_rss_kib, rss_kib,
    scale, slurm,
};
use slurm_client::Client;
use slurm_operator::crd::NodeSet;

const UP: &str = "cargo xtask kube down; cargo xtask kube up --nodes 1 --hollow-nodes 100 \
                  --hollow-allocatable cpu=64,memory=256Gi,pods=110 --hollow-taint";
/// The hollow nodes' label and taint key.
const HOLLOW: &str = "kube-ground.slurm-rs.dev/hollow";
/// Hollow nodes needed: 1,000 pods and the small clusters' 250, at 110 pods a node, with room.
const HOLLOW_NEEDED: usize = 20;
const NODESET: &str = "slurm-worker-slinky";
const LIMIT: Duration = Duration::from_secs(900);
/// Where the operator serves `/metrics` inside the ground.
const METRICS_ADDR: &str = "127.0.0.1:18481";
/// Small clusters and their NodeSets' pods.
const SMALL_PODS: usize = 4;

fn main() {
    measure::bench_main("operator scale benchmark", |env_file, quick| async move {
        run(&env_file, quick).await
    });
}

async fn run(env_file: &str, quick: bool) -> Result<()> {
    let (pods_wanted, small_clusters) = if quick { (200, 10) } else { (1000, 50) };
    let kube = ground().kube_client().await?;
    let hollow = Api::<Node>::all(kube.clone())
        .list_metadata(&ListParams::default().labels(&format!("{HOLLOW}=true")))
        .await?
        .items
        .len();
    if hollow < HOLLOW_NEEDED {
        println!(
            "skipped: the test ground has {hollow} hollow nodes, the operator's scale bench needs {HOLLOW_NEEDED}: {UP}"
        );
        return Ok(());
    }
    let audit_log = ground_var(env_file, "KUBE_GROUND_AUDIT_LOG")
        .map(PathBuf::from)
        .ok_or("KUBE_GROUND_AUDIT_LOG missing in the ground's env file")?;
    let mut env = TestEnv::new("op-scale");
    let ns = env.name().to_owned();
    println!(
        "slurm-operator scale benchmark: {hollow} hollow nodes, namespace {ns}, one NodeSet of \
         {pods_wanted} pods, then {small_clusters} small clusters"
    );

    // 1. Apply → every pod ready → every Slurm node in service.
    env.apply_manifest("cluster.yaml");
    let nodesets: Api<NodeSet> = Api::namespaced(kube.clone(), &ns);
    nodesets
        .patch(
            NODESET,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "replicas": pods_wanted,
                "oversubscribeNode": true,
                "template": {"spec": {
                    "nodeSelector": {HOLLOW: "true"},
                    "tolerations": [{"key": HOLLOW, "operator": "Exists"}],
                }},
            }})),
        )
        .await?;
    let t0 = Instant::now();
    env.start_operator(&["--metrics-addr", METRICS_ADDR]);
    let pid = loop {
        if let Some(pid) = operator_pid(&mut env) {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let client = wait_for(t0, "slurmrestd answering", || async {
        let Some(c) = slurm(&kube, &ns).await? else {
            return Ok(None);
        };
        Ok(c.list_nodes(&Default::default()).await.is_ok().then_some(c))
    })
    .await?;
    let answering = t0.elapsed();
    let slurmds = Slurmds::start(kube.clone(), ns.clone(), client.clone());
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    let ready = wait_for(t0, "every NodeSet pod ready", || async {
        Ok((ready_pods(&pods).await? == pods_wanted).then_some(t0.elapsed()))
    })
    .await?;
    let serving = wait_for(t0, "every Slurm node in service", || async {
        Ok((in_service(&client, &pods).await? == pods_wanted).then_some(t0.elapsed()))
    })
    .await?;
    let start = AuditMark::now(&audit_log)?;
    let (_, settled) = settle(&start, &ns).await?;
    let settled = serving + settled;
    println!("\n1. one NodeSet of {pods_wanted} pods on hollow nodes, from the operator's start");
    for (stage, at) in [
        ("slurmrestd answers", answering),
        ("every pod ready", ready),
        ("every Slurm node in service", serving),
        ("the operator's last write (then 5 s quiet)", settled),
    ] {
        println!("   {stage:<46} {:>8.1}s", at.as_secs_f64());
    }
    println!(
        "   ({} Slurm nodes created by the bench, standing in for the slurmds)",
        slurmds.created()
    );

    // 2. Scale in and out again.
    let moved = pods_wanted / 10;
    println!(
        "\n2. scale {pods_wanted} → {} → {pods_wanted}",
        pods_wanted - moved
    );
    println!("   {:<46} {:>9} {:>13}", "", "converged", "writes / pod");
    for (to, what) in [
        (pods_wanted - moved, "scale in (drained, pods deleted)"),
        (pods_wanted, "scale out (pods ready, nodes in service)"),
    ] {
        let mark = AuditMark::now(&audit_log)?;
        let t = Instant::now();
        scale(&nodesets, NODESET, to).await?;
        let took = wait_for(t, what, || async {
            let live = live_pods(&pods).await?;
            let settled = live.len() == to
                && ready_pods(&pods).await? == to
                && in_service(&client, &pods).await? == to;
            Ok(settled.then(|| t.elapsed()))
        })
        .await?;
        let (count, _) = settle(&mark, &ns).await?;
        println!(
            "   {what:<46} {:>8.1}s {:>13.1}",
            took.as_secs_f64(),
            count.ns_writes as f64 / moved as f64
        );
        print_detail(&count, |verb| !is_read(verb));
    }

    // 3. At rest.
    let quiet = Duration::from_secs(if quick { 30 } else { 60 });
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rest = at_rest(&audit_log, &ns, quiet).await?;
    println!(
        "\n3. the operator's API requests at rest ({} s, a minute)",
        quiet.as_secs()
    );
    print_rest(&rest, quiet);

    // 4. Reconcile p99 and RSS.
    let forwarded = test_support::ground::forward_into_ground(METRICS_ADDR.parse()?);
    println!("\n4. reconcile duration (the /metrics histogram) and memory");
    print_reconciles(forwarded);
    let rss_one = rss_kib(pid).ok_or("no VmRSS")?;
    println!(
        "   RSS {:.1} MiB now, peak {:.1} MiB",
        mib(rss_one),
        mib(peak_rss_kib(pid).ok_or("no VmHWM")?)
    );

    // 5. Many small clusters.
    let t = Instant::now();
    ground().apply(&ns, &small_clusters_yaml(small_clusters));
    let want = small_clusters * (SMALL_PODS + 1);
    let took = wait_for(t, "the small clusters' pods running", || async {
        let running = pods
            .list(&ListParams::default().labels("bench.slurm-rs.dev/small=true"))
            .await?
            .items
            .iter()
            .filter(|p| phase(p) == "Running")
            .count();
        Ok((running >= want).then(|| t.elapsed()))
    })
    .await;
    println!(
        "\n5. {small_clusters} small clusters more (Controller + NodeSet of {SMALL_PODS}, on hollow nodes)"
    );
    match took {
        Ok(took) => println!(
            "   their {want} pods running after {:.1} s",
            took.as_secs_f64()
        ),
        Err(e) => println!("   not all running: {e}"),
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    let rest = at_rest(&audit_log, &ns, quiet).await?;
    println!(
        "   at rest with {} clusters ({} s, a minute):",
        small_clusters + 1,
        quiet.as_secs()
    );
    print_rest(&rest, quiet);
    print_reconciles(forwarded);
    println!(
        "   RSS {:.1} MiB now, peak {:.1} MiB",
        mib(rss_kib(pid).ok_or("no VmRSS")?),
        mib(peak_rss_kib(pid).ok_or("no VmHWM")?)
    );
    slurmds.stop();
    Ok(())
}

/// Stands in for the slurmds of the NodeSet's hollow pods: every second, creates the Slurm node
/// of each running pod that Slurm does not have yet.
struct Slurmds {
    created: Arc<Mutex<HashSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Slurmds {
    fn start(kube: kube::Client, ns: String, client: Client) -> Slurmds {
        let created = Arc::new(Mutex::new(HashSet::new()));
        let task = tokio::spawn({
            let created = created.clone();
            async move {
                let pods: Api<Pod> = Api::namespaced(kube, &ns);
                loop {
                    if let Err(e) = Slurmds::round(&pods, &client, &created).await {
                        eprintln!("   (standing in for slurmd: {e})");
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        });
        Slurmds { created, task }
    }

    async fn round(
        pods: &Api<Pod>,
        client: &Client,
        created: &Mutex<HashSet<String>>,
    ) -> Result<()> {
        let known: HashSet<String> = client
            .list_nodes(&Default::default())
            .await?
            .into_value()
            .nodes
            .into_iter()
            .map(|n| n.name)
            .collect();
        let missing: Vec<String> = live_pods(pods)
            .await?
            .into_iter()
            .filter(|(_, running)| *running)
            .map(|(host, _)| host)
            .filter(|h| !known.contains(h))
            .collect();
        let results: Vec<(String, std::result::Result<(), slurm_client::Error>)> =
            futures::stream::iter(missing)
                .map(|host| async move {
                    let line = format!(
                        "NodeName={host} CPUs=2 RealMemory=2048 Feature=slinky State=EXTERNAL"
                    );
                    let result = client.create_node(&line).await.map(drop);
                    (host, result)
                })
                .buffer_unordered(8)
                .collect()
                .await;
        for (host, result) in results {
            match result {
                Ok(()) => {
                    created.lock().unwrap().insert(host);
                }
                Err(e) => eprintln!("   (creating Slurm node {host}: {e})"),
            }
        }
        Ok(())
    }

    fn created(&self) -> usize {
        self.created.lock().unwrap().len()
    }

    fn stop(self) {
        self.task.abort();
    }
}

/// The NodeSet's pods not being deleted.
async fn nodeset_pods(pods: &Api<Pod>) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={NODESET}"));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// The NodeSet's pods not being deleted: hostname → running.
async fn live_pods(pods: &Api<Pod>) -> Result<BTreeMap<String, bool>> {
    Ok(nodeset_pods(pods)
        .await?
        .iter()
        .filter_map(|p| Some((p.spec.as_ref()?.hostname.clone()?, phase(p) == "Running")))
        .collect())
}

/// The NodeSet's ready pods, as its status counts them.
async fn ready_pods(pods: &Api<Pod>) -> Result<usize> {
    Ok(nodeset_pods(pods)
        .await?
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count())
}

/// The live pods' Slurm nodes that take jobs (not drained, down or failing).
async fn in_service(client: &Client, pods: &Api<Pod>) -> Result<usize> {
    let live = live_pods(pods).await?;
    Ok(client
        .list_nodes(&Default::default())
        .await?
        .into_value()
        .nodes
        .iter()
        .filter(|n| live.contains_key(&n.name) && n.is_available())
        .count())
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Polls `check` every 500 ms from `t` until it gives a value; an error after [`LIMIT`].
async fn wait_for<T, F, Fut>(t: Instant, what: &str, check: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let mut last = String::new();
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = e.to_string(),
        }
        if t.elapsed() > LIMIT {
            return Err(format!("{what}: not after {LIMIT:?} (last error: {last})").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the operator has written nothing in `ns` for 5 s (at most 2 minutes); its
/// requests since `mark`, and how long after the call its last write came.
async fn settle(mark: &AuditMark, ns: &str) -> Result<(Count, Duration)> {
    let t = Instant::now();
    let (mut writes, mut last_change) = (usize::MAX, Duration::ZERO);
    loop {
        let count = count_requests(&mark.read_since()?, ns);
        if count.ns_writes != writes {
            writes = count.ns_writes;
            last_change = t.elapsed();
        } else if t.elapsed() - last_change >= Duration::from_secs(5)
            || t.elapsed() > Duration::from_secs(120)
        {
            return Ok((count, last_change));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn at_rest(audit_log: &std::path::Path, ns: &str, quiet: Duration) -> Result<Count> {
    let mark = AuditMark::now(audit_log)?;
    tokio::time::sleep(quiet).await;
    Ok(count_requests(&mark.read_since()?, ns))
}

fn is_read(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

fn print_rest(count: &Count, quiet: Duration) {
    let per_min = |n: usize| n as f64 * 60.0 / quiet.as_secs_f64();
    println!(
        "   in the namespace: {:.1} reads, {:.1} writes; cluster-scoped: {:.1} reads, {:.1} writes",
        per_min(count.ns_reads),
        per_min(count.ns_writes),
        per_min(count.cluster_reads),
        per_min(count.cluster_writes)
    );
    print_detail(count, |_| true);
}

fn print_detail(count: &Count, keep: impl Fn(&str) -> bool) {
    for (verb, resource, n) in count.ns_detail.iter().chain(&count.cluster_detail) {
        if keep(verb) {
            println!("     {n:>6} × {verb} {resource}");
        }
    }
}

/// Each controller's reconciles and the bound of the histogram bucket holding its 99th
/// percentile.
fn print_reconciles(forwarded: SocketAddr) {
    let scrape = metrics::scrape(forwarded);
    for controller in metrics::CONTROLLERS {
        let labels = [("controller", controller)];
        let count = scrape.sum("slurm_operator_reconcile_duration_seconds_count", &labels);
        if count == 0.0 {
            continue;
        }
        let p99 = p99_bound(&scrape, controller);
        println!(
            "   {controller:<12} {count:>7.0} reconciles, p99 {}",
            p99.map_or("> 10 s".to_string(), |b| format!("≤ {:.0} ms", b * 1000.0))
        );
    }
}

/// The upper bound of the histogram bucket that holds `controller`'s 99th percentile; `None`
/// beyond the last finite bound.
fn p99_bound(scrape: &metrics::Scrape, controller: &str) -> Option<f64> {
    let needle = format!("controller=\"{controller}\"");
    let mut buckets: Vec<(f64, f64)> = scrape
        .lines("slurm_operator_reconcile_duration_seconds_bucket")
        .lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    buckets
        .iter()
        .find(|(_, n)| *n >= 0.99 * total)
        .map(|(le, _)| *le)
        .filter(|le| le.is_finite())
}

/// `n` clusters, each a Controller and a NodeSet of [`SMALL_PODS`], every pod on a hollow node.
fn small_clusters_yaml(n: usize) -> String {
    let hollow = format!(
        "nodeSelector: {{{HOLLOW}: \"true\"}}\n      tolerations: [{{key: {HOLLOW}, operator: Exists}}]"
    );
    (0..n)
        .map(|i| {
            format!(
                r#"---
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata:
  name: small-{i}
spec:
  slurmKeyRef: {{name: slurm-auth-slurm, key: slurm.key}}
  jwtKeyRef: {{name: slurm-auth-jwt, key: jwt.key}}
  slurmctld:
    image: ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04
  template:
    metadata:
      labels: {{bench.slurm-rs.dev/small: "true"}}
    spec:
      {hollow}
  persistence:
    enabled: false
---
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata:
  name: small-{i}-workers
spec:
  controllerRef: {{name: small-{i}}}
  replicas: {SMALL_PODS}
  oversubscribeNode: true
  slurmd:
    image: ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04
  template:
    metadata:
      labels: {{bench.slurm-rs.dev/small: "true"}}
    spec:
      hostname: s{i}-
      {hollow}
"#
            )
        })
        .collect()
}
