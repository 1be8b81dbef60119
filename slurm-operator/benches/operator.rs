//! The operator's figures on the test ground (`cargo xtask kube up`), against real Slurm 26.05
//! daemons in pods, with the operator binary running inside the ground as in a pod:
//!
//! 1. time from applying `tests/manifests/cluster.yaml` to all three workers idle in Slurm (read
//!    through the RestApi Service with the Token's JWT), with the time each stage was reached;
//! 2. reconcile latency of NodeSet scale changes (3 → 4 → 3, repeated): scale-subresource patch
//!    → the new pod object exists (→ its node IDLE in Slurm, the old pod's DOWN lifted), and patch
//!    → the victim's drain shows in Slurm (and → its pod is deleted), p50/p99;
//! 3. API requests per minute by the operator at rest, from the ground's audit log;
//! 4. the operator's RSS at rest with that cluster, then with 10 more clusters × 20 NodeSet pods
//!    that never run (see [`many_clusters`]).
//!
//! ```sh
//! cargo bench -p slurm-operator --bench operator      # or: cargo xtask bench
//! ```
//!
//! `SLURM_BENCH_QUICK=1`: 5 scale repetitions instead of 10 and a 30 s quiet window instead of
//! 60 s. `SLURM_BENCH_REST_ONLY=1`: parts 1 and 3 only; `SLURM_BENCH_QUIET_SECS=180` sets the
//! quiet window; `SLURM_OPERATOR_BIN` runs another operator build (a before/after comparison;
//! name the file `slurm-operator`). The goal at rest: no request but the watches' own renewals
//! (a watch ends after about five minutes and is started again). Without the ground (no `/run/slurm-dev/kube/kube.env`) the bench says so and is
//! skipped. It runs in its own namespace `op-bench-<pid>`, deleted at the end.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/measure.rs"]
mod measure;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{TestEnv, ground};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use measure::{
    AuditMark, Result, count_requests, ground_var, mib, ms, operator_pid, other_operators,
    percentile, rss_kib, scale, slurm,
};
use slurm_client::Client;
use slurm_operator::crd::NodeSet;

const NODESET: &str = "slurm-worker-slinky";
const LIMIT: Duration = Duration::from_secs(240);
/// What the worker pods' preStop hook sets in Slurm.
const STALE_REASON: &str = "slurm-operator: Pod is terminating";
/// The end of the operator's scale-in drain reason.
const SCALE_IN: &str = "pending termination for scale-in";
/// Extra clusters and NodeSet pods for the RSS figure.
const CLUSTERS: usize = 10;
const PODS_PER_CLUSTER: usize = 20;

fn main() {
    measure::bench_main("operator benchmark", |env_file, quick| async move {
        run(&env_file, quick).await
    });
}

async fn run(env_file: &str, quick: bool) -> Result<()> {
    let reps = if quick { 5 } else { 10 };
    let rest_only = std::env::var("SLURM_BENCH_REST_ONLY").is_ok_and(|v| v == "1");
    let quiet = Duration::from_secs(
        std::env::var("SLURM_BENCH_QUIET_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if quick { 30 } else { 60 }),
    );
    let audit_log = ground_var(env_file, "KUBE_GROUND_AUDIT_LOG")
        .map(PathBuf::from)
        .ok_or("KUBE_GROUND_AUDIT_LOG missing in the ground's env file")?;

    let mut env = TestEnv::new("op-bench");
    let ns = env.name().to_owned();
    let kube = ground().kube_client().await?;
    println!("operator benchmark on the test ground, namespace {ns}");
    println!(
        "operator: {} run --namespaces {ns} (default flags)",
        common::operator_bin()
    );

    // 1. Manifests → all workers idle.
    env.start_operator(&[]);
    let t0 = Instant::now();
    env.apply_manifest("cluster.yaml");
    let applied = t0.elapsed();
    let startup = startup(&kube, &ns, t0).await?;
    let client = startup.client;
    println!("\n1. tests/manifests/cluster.yaml applied → cluster with 3 idle workers");
    println!("   {:<46} {:>9}", "stage", "since apply");
    let rows = [
        ("kubectl apply returned", applied),
        (
            "Controller: StatefulSet slurm-controller ready",
            startup.controller,
        ),
        ("RestApi: Deployment slurm-restapi ready", startup.restapi),
        ("RestApi answers (first node listing)", startup.answering),
        ("NodeSet: 3 pods ready", startup.pods_ready),
        ("all 3 workers registered IDLE in Slurm", startup.idle),
    ];
    let mut rows = rows;
    rows.sort_by_key(|(_, at)| *at);
    for (stage, at) in rows {
        println!("   {stage:<46} {:>8.1}s", at.as_secs_f64());
    }
    let pid = operator_pid(&mut env).ok_or("no slurm-operator process found")?;
    let rss_one = rss_kib(pid).ok_or("no VmRSS")?;

    // 2. Scale latency. The victim is whichever pod the operator picks; the new pod whichever
    // ordinal it fills.
    let nodesets: Api<NodeSet> = Api::namespaced(kube.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    let mut up = Vec::new();
    let mut drain = Vec::new();
    let mut gone = Vec::new();
    let mut back = Vec::new();
    let mut undrained = 0;
    for _ in 0..if rest_only { 0 } else { reps } {
        let t = Instant::now();
        scale(&nodesets, NODESET, 4).await?;
        up.push(
            wait_until("a 4th worker pod", t, || async {
                Ok(workers(&pods).await?.live.len() == 4)
            })
            .await?,
        );
        // All 4 idle in Slurm before the scale-in, so that the operator picks its victim by
        // ordinal. The re-created pod's node carries the DOWN state its predecessor's preStop
        // hook set ("Pod is terminating") until the operator returns it to service, which it does
        // once the new pod is ready: that wait is part of the figure.
        let last = std::sync::Mutex::new(String::new());
        let settled = wait_until("4 workers idle in Slurm", t, || async {
            let live = workers(&pods).await?.live;
            let nodes = client.list_nodes(&Default::default()).await?.value.nodes;
            let mut idle = 0;
            let mut states = Vec::new();
            for n in nodes.iter().filter(|n| live.contains(&n.name)) {
                // Drains of others (a cordoned ground node: the ground is shared) are tolerated.
                let ours = n
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains(SCALE_IN) || r == STALE_REASON);
                if n.state.as_str() == "IDLE" && !(n.is_drain() && ours) {
                    idle += 1;
                }
                states.push(format!(
                    "{} {:?} {:?} {:?}",
                    n.name, n.state, n.state_flags, n.reason
                ));
            }
            *last.lock().unwrap() = format!("{states:?}");
            Ok(idle == 4)
        })
        .await;
        match settled {
            Ok(at) => back.push(at),
            Err(e) => {
                return Err(format!(
                    "{e}: last seen {}; operator log {}",
                    last.lock().unwrap(),
                    env.operator().log_path().display()
                )
                .into());
            }
        }

        let live = workers(&pods).await?.live;
        let t = Instant::now();
        scale(&nodesets, NODESET, 3).await?;
        // Done at the first scale-in drain in Slurm, or when the victim's pod is deleted without
        // one having been seen (counted and reported).
        let seen = std::sync::atomic::AtomicBool::new(false);
        let at = wait_until("a worker drained in Slurm or deleted", t, || async {
            let nodes = client.list_nodes(&Default::default()).await?.value.nodes;
            if nodes.iter().any(|n| {
                live.contains(&n.name)
                    && n.is_drain()
                    && n.reason.as_deref().is_some_and(|r| r.contains(SCALE_IN))
            }) {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
                return Ok(true);
            }
            Ok(workers(&pods).await?.live.len() == 3)
        })
        .await?;
        if seen.into_inner() {
            drain.push(at);
        } else {
            undrained += 1;
        }
        gone.push(
            wait_until("a worker pod deleted", t, || async {
                Ok(workers(&pods).await?.live.len() == 3)
            })
            .await?,
        );
        wait_until("the deleted pod gone", Instant::now(), || async {
            Ok(workers(&pods).await?.all == 3)
        })
        .await?;
    }
    if rest_only {
        println!("\n2. NodeSet scale latency: skipped (SLURM_BENCH_REST_ONLY)");
    } else {
        println!("\n2. NodeSet scale latency ({reps} × scale 3→4→3 through the scale subresource)");
        println!("   {:<46} {:>8} {:>8}", "from the patch to", "p50", "p99");
    }
    for (what, samples) in [
        ("scale up: the new pod object exists", &mut up),
        ("scale up: the new worker IDLE in Slurm", &mut back),
        ("scale in: the victim shows DRAIN in Slurm", &mut drain),
        ("scale in: the victim pod is deleted", &mut gone),
    ] {
        if rest_only {
            break;
        }
        samples.sort();
        println!(
            "   {what:<46} {:>7.0}ms {:>7.0}ms",
            ms(percentile(samples, 50)),
            ms(percentile(samples, 99)),
        );
    }

    if undrained > 0 {
        println!(
            "   NOTE: in {undrained} of {reps} scale-ins no drain for scale-in was seen in Slurm \
             before the victim's pod was deleted (polled every 20 ms); those runs are not in the \
             DRAIN row ({} samples)",
            drain.len()
        );
    }
    // 3. API requests at rest.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mark = AuditMark::now(&audit_log)?;
    let others_before = other_operators(pid);
    tokio::time::sleep(quiet).await;
    let entries = mark.read_since()?;
    let others = others_before.max(other_operators(pid));
    let count = count_requests(&entries, &ns);
    let per_min = |n: usize| n as f64 * 60.0 / quiet.as_secs_f64();
    println!(
        "\n3. API requests at rest ({} s of quiet, audit log, per minute)",
        quiet.as_secs()
    );
    println!("   {:<46} {:>8} {:>8}", "", "reads", "writes");
    println!(
        "   {:<46} {:>8.1} {:>8.1}",
        format!("operator, in namespace {ns}"),
        per_min(count.ns_reads),
        per_min(count.ns_writes)
    );
    println!(
        "   {:<46} {:>8.1} {:>8.1}",
        "operator, cluster-scoped",
        per_min(count.cluster_reads),
        per_min(count.cluster_writes)
    );
    println!(
        "   (reads = get/list/watch; requests told apart by the operator's User-Agent; the \
         cluster-scoped ones of every operator on the machine: {others} other slurm-operator \
         process(es) ran meanwhile)"
    );
    for (verb, resource, n) in &count.ns_detail {
        println!("     {n:>4} × {verb} {resource}");
    }
    println!("   cluster-scoped:");
    for (verb, resource, n) in &count.cluster_detail {
        println!("     {n:>4} × {verb} {resource}");
    }
    if rest_only {
        return Ok(());
    }

    // 4. RSS with many clusters.
    let rss_rest = rss_kib(pid).ok_or("no VmRSS")?;
    let many = many_clusters(&mut env, &pods).await;
    println!("\n4. operator RSS (VmRSS of pid {pid})");
    println!("   {:<62} {:>9}", "", "RSS");
    println!(
        "   {:<62} {:>6.1}MiB",
        "after the cluster came up (1 cluster, 3 workers)",
        mib(rss_one)
    );
    println!(
        "   {:<62} {:>6.1}MiB",
        "at rest after the scale runs",
        mib(rss_rest)
    );
    match many {
        Ok((created, rss_many)) => {
            println!(
                "   {:<62} {:>6.1}MiB",
                format!(
                    "+{CLUSTERS} clusters × {PODS_PER_CLUSTER} NodeSet pods ({created} pods, never scheduled)"
                ),
                mib(rss_many)
            );
            println!(
                "   ratio: {:.2}× the one-cluster RSS for {:.0}× the pods",
                rss_many as f64 / rss_rest as f64,
                (created + 3) as f64 / 3.0
            );
            println!(
                "   (the {CLUSTERS} extra clusters: Controller + NodeSet of {PODS_PER_CLUSTER} each in \
                 the same namespace, every pod with a nodeSelector no node has, so slurmctld and \
                 slurmd never run: the operator holds and watches the pod objects, Slurm is \
                 unreachable for them)"
            );
        }
        Err(e) => println!("   {CLUSTERS} clusters × {PODS_PER_CLUSTER} pods: not measured: {e}"),
    }
    Ok(())
}

struct Startup {
    client: Client,
    controller: Duration,
    restapi: Duration,
    answering: Duration,
    pods_ready: Duration,
    idle: Duration,
}

/// Polls the stages every 250 ms from `t0` until every worker is idle in Slurm.
async fn startup(kube: &kube::Client, ns: &str, t0: Instant) -> Result<Startup> {
    let sts: Api<StatefulSet> = Api::namespaced(kube.clone(), ns);
    let deploy: Api<Deployment> = Api::namespaced(kube.clone(), ns);
    let nodesets: Api<NodeSet> = Api::namespaced(kube.clone(), ns);
    let (mut controller, mut restapi, mut answering, mut pods_ready) = (None, None, None, None);
    let mut client: Option<Client> = None;
    loop {
        let now = t0.elapsed();
        if now > LIMIT {
            return Err(format!(
                "no idle cluster after {LIMIT:?} (controller {controller:?}, restapi {restapi:?}, \
                 answering {answering:?}, pods {pods_ready:?})"
            )
            .into());
        }
        if controller.is_none()
            && sts
                .get_opt("slurm-controller")
                .await?
                .and_then(|s| s.status?.ready_replicas)
                == Some(1)
        {
            controller = Some(t0.elapsed());
        }
        if restapi.is_none()
            && deploy
                .get_opt("slurm-restapi")
                .await?
                .and_then(|d| d.status?.ready_replicas)
                == Some(1)
        {
            restapi = Some(t0.elapsed());
        }
        if pods_ready.is_none()
            && nodesets
                .get_opt(NODESET)
                .await?
                .and_then(|n| n.status.map(|s| s.ready_replicas))
                == Some(3)
        {
            pods_ready = Some(t0.elapsed());
        }
        if restapi.is_some() && client.is_none() {
            client = slurm(kube, ns).await?;
        }
        if let Some(c) = &client
            && let Ok(Ok(nodes)) =
                tokio::time::timeout(Duration::from_secs(3), c.list_nodes(&Default::default()))
                    .await
        {
            let now = t0.elapsed();
            answering.get_or_insert(now);
            let nodes = nodes.value.nodes;
            let idle = nodes
                .iter()
                .filter(|n| n.state.as_str() == "IDLE" && !n.is_drain())
                .count();
            if idle == 3 && nodes.len() == 3 {
                return Ok(Startup {
                    client: client.take().expect("checked"),
                    controller: controller.unwrap_or(now),
                    restapi: restapi.unwrap_or(now),
                    answering: answering.unwrap_or(now),
                    pods_ready: pods_ready.unwrap_or(now),
                    idle: now,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The NodeSet's pods: Slurm node names (hostnames) of those not being deleted, and how many
/// pod objects there are in all.
struct Workers {
    live: HashSet<String>,
    all: usize,
}

async fn workers(pods: &Api<Pod>) -> Result<Workers> {
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={NODESET}"));
    let list = pods.list(&lp).await?.items;
    let live = list
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.spec.as_ref()?.hostname.clone())
        .collect();
    Ok(Workers {
        live,
        all: list.len(),
    })
}

/// Polls `check` every 20 ms until it holds; the time since `t`.
async fn wait_until<F, Fut>(what: &str, t: Instant, check: F) -> Result<Duration>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    loop {
        if check().await? {
            return Ok(t.elapsed());
        }
        if t.elapsed() > LIMIT {
            return Err(format!("{what}: not after {LIMIT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// 10 more clusters in the namespace, each a Controller and a NodeSet of 20 whose pods (and
/// slurmctld) carry a nodeSelector no node has: they stay Pending. Returns the pods created and
/// the RSS once the operator settled with them.
async fn many_clusters(env: &mut TestEnv, pods: &Api<Pod>) -> Result<(usize, u64)> {
    let mut yaml = String::new();
    for i in 0..CLUSTERS {
        yaml.push_str(&format!(
            r#"---
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata:
  name: bench-c{i}
spec:
  slurmKeyRef: {{name: slurm-auth-slurm, key: slurm.key}}
  jwtKeyRef: {{name: slurm-auth-jwt, key: jwt.key}}
  slurmctld:
    image: ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04
  template:
    spec:
      nodeSelector: {{slurm-bench.example/unschedulable: "true"}}
  persistence:
    enabled: false
---
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata:
  name: bench-c{i}-workers
spec:
  controllerRef: {{name: bench-c{i}}}
  replicas: {PODS_PER_CLUSTER}
  slurmd:
    image: ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04
  template:
    spec:
      hostname: bc{i}-
      nodeSelector: {{slurm-bench.example/unschedulable: "true"}}
"#
        ));
    }
    ground().apply(env.name(), &yaml);
    let want = CLUSTERS * PODS_PER_CLUSTER;
    let mut created = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(120) {
        created = 0;
        for i in 0..CLUSTERS {
            let lp = ListParams::default()
                .labels(&format!("app.kubernetes.io/instance=bench-c{i}-workers"));
            created += pods.list_metadata(&lp).await?.items.len();
        }
        if created >= want {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if created < want {
        return Err(format!("only {created} of {want} pods after 120 s").into());
    }
    println!(
        "\n   ({want} NodeSet pods of {CLUSTERS} extra clusters created in {:.1} s)",
        t.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let pid = operator_pid(env).ok_or("the operator is gone")?;
    Ok((created, rss_kib(pid).ok_or("no VmRSS")?))
}
