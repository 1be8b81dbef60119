//! The bridge at scale (issue 25, part 2), on a test ground with hollow nodes (pods bound there
//! are Running at once, without containers), against the real Slurm 26.05 of the tests:
//!
//! - two stages, 50 and then 500 hollow nodes labelled as Slurm external nodes (the real node
//!   stays out), each node offering 16 CPUs and 64 GiB;
//! - per stage, **the floor**: the bridge's placeholder jobs (1 CPU and 1 GiB per pod, gangs of
//!   8 as one 8-node job) submitted straight through `slurm_client` in waves, 8 at a time, their
//!   states polled every 25 ms: submit → RUNNING and pods' worth started per second;
//! - then **the bridge**: the same waves as pods (gangs as coscheduling PodGroups of 8; each pod
//!   tolerating the bridge's node taint, as the bridge's webhook makes them), created
//!   8 at a time and kept until the stage ends (so the last wave meets every pod of the stage in
//!   the bridge's stores): create → bound, Slurm RUNNING → bound (the pods' jobs polled every
//!   25 ms), pods bound per second; the bridge's CPU seconds and peak RSS (`/proc`), and from its
//!   debug log its API server requests and the slurmrestd bytes it read, per pod.
//!
//! ```sh
//! cargo xtask kube up --nodes 1 --hollow-nodes 500 --hollow-allocatable cpu=16,memory=64Gi,pods=110 \
//!     --hollow-taint
//! cargo bench -p slurm-bridge --bench scale      # or: cargo xtask bench
//! ```
//!
//! `SLURM_BENCH_QUICK=1` runs smaller waves. Without the ground, or without hollow nodes, it says
//! so and is skipped.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/figures.rs"]
mod figures;

use figures::{field, ms, percentile, rest_bytes};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{IMAGE, SCHEDULER, TestEnv, eventually, ground, install_crd, slurm_nodes};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::ResourceExt as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt as _, watcher};
use slurm_client::{Client, JobState, JobSubmission};

const UP: &str = "cargo xtask kube down; cargo xtask kube up --nodes 1 --hollow-nodes 500 \
                  --hollow-allocatable cpu=16,memory=64Gi,pods=110 --hollow-taint";
/// `--hollow-taint`'s key: keeps the ground's scheduler from putting Slurm's pods there.
const HOLLOW_TAINT: &str = "kube-ground.slurm-rs.dev/hollow";
const MANAGED_TAINT: &str = "slinky.slurm.net/managed-node";
const NODES_NEEDED: usize = 500;
const LIMIT: Duration = Duration::from_secs(300);
const PARTITION: &str = "slurm-bridge";
const EXTERNAL: &str = "scheduler.slinky.slurm.net/external-node";
const JOB_LABEL: &str = "scheduler.slinky.slurm.net/slurm-jobid";
const GANG: usize = 8;
/// Requests at once, on both sides.
const AT_ONCE: usize = 8;
/// How often job states are polled (the floor's and the bridge pods' jobs).
const POLL: Duration = Duration::from_millis(25);
/// Each pod's memory, and its job's.
const MEMORY_MB: u64 = 1024;

fn main() {
    if let Some(why) = test_support::ground::not_up() {
        println!("skipped: {why}; for this bench: {UP}");
        return;
    }
    let hollow = hollow_nodes();
    if hollow < NODES_NEEDED {
        println!(
            "skipped: the test ground has {hollow} hollow nodes, the scale bench needs {NODES_NEEDED}: {UP}"
        );
        return;
    }
    let quick = std::env::var("SLURM_BENCH_QUICK").is_ok_and(|v| v == "1");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run(quick));
}

/// `KUBE_GROUND_HOLLOW_NODES` of the ground's env file (0 when absent).
fn hollow_nodes() -> usize {
    std::fs::read_to_string(test_support::ground::env_file())
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("KUBE_GROUND_HOLLOW_NODES="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One stage: how many nodes, and its waves' sizes (pods, gangs of 8 among them).
struct Stage {
    nodes: usize,
    waves: Vec<usize>,
}

fn stages(quick: bool) -> Vec<Stage> {
    if quick {
        vec![
            Stage {
                nodes: 50,
                waves: vec![200],
            },
            Stage {
                nodes: 500,
                waves: vec![500, 500],
            },
        ]
    } else {
        vec![
            Stage {
                nodes: 50,
                waves: vec![250; 2],
            },
            Stage {
                nodes: 500,
                waves: vec![500; 10],
            },
        ]
    }
}

/// How many gangs of 8 a wave of `n` pods holds: about a tenth of its pods.
fn gangs_in(n: usize) -> usize {
    n / 10 / GANG
}

#[derive(Default, Clone, Copy)]
struct PodTimes {
    created: Option<Instant>,
    bound: Option<Instant>,
    job: Option<u32>,
}

type Seen = Arc<Mutex<BTreeMap<String, PodTimes>>>;

/// One stage's figures.
#[derive(Default)]
struct Figures {
    nodes: usize,
    pods: usize,
    floor_latency: Vec<Duration>,
    /// Pods' worth (a gang's job counts 8) started, and the seconds from each wave's first
    /// submission to its last start, summed over the waves.
    floor_pods: usize,
    floor_secs: f64,
    bound_latency: Vec<Duration>,
    running_to_bound: Vec<Duration>,
    /// From the bridge's log: from its sighting of each pod's job start to the pod bound, and
    /// its binding requests.
    start_seen_to_bound: Vec<Duration>,
    start_seen_to_request: Vec<Duration>,
    bind_requests: Vec<Duration>,
    /// The API server's write latency beside the waves (see [`probe_writes`]).
    probe_writes: Vec<Duration>,
    bound_secs: f64,
    /// The bridge over the bridge's waves.
    cpu_secs: f64,
    peak_rss_kib: u64,
    requests: u64,
    rest_bytes: u64,
    /// The seconds from each pod's creation to the stage's costs being read, summed: following
    /// a job costs as long as it lives, and a stage's pods live longer the more there are.
    pod_secs: f64,
}

async fn run(quick: bool) {
    install_crd("podgroup-crd.yaml");
    let conf = "MaxNodeCount=600\nMaxJobCount=100000\n";
    let mut env = TestEnv::with_slurm_conf("scale-bench", conf);
    // The ground's real node stays a plain node; the hollow ones are labelled here, in bulk.
    env.nodes.retain(|n| !n.starts_with("hollow-"));
    let slurm = env.slurm();
    let kube = ground()
        .kube_client()
        .await
        .expect("a client of the ground");
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &env.ns.name);
    let seen = watch_pods(pods.clone());
    println!(
        "slurm-bridge scale benchmark: hollow nodes of 16 CPUs and 64 GiB; pods of 1 CPU and 1 GiB, \
         a tenth of them in gangs of {GANG} (PodGroups); waves created {AT_ONCE} requests at a time"
    );
    let mut all = Vec::new();
    for (i, stage) in stages(quick).iter().enumerate() {
        label_hollow(&kube, stage.nodes).await;
        // A fresh bridge per stage: its peak RSS and CPU are the stage's.
        env.start_bridge_logging(
            "exclusive: false\n",
            "info,slurm_bridge::jobs=debug,slurm_client::transport=debug,kube_client::client::builder=debug",
        );
        let started = Instant::now();
        wait_slurm_nodes(&slurm, stage.nodes).await;
        println!(
            "\n{} external nodes in Slurm after {:.1} s",
            stage.nodes,
            started.elapsed().as_secs_f64()
        );
        let mut f = Figures {
            nodes: stage.nodes,
            ..Figures::default()
        };
        floor(&slurm, stage, i, &mut f).await;
        bridge(&mut env, &kube, &pods, &seen, &slurm, stage, i, &mut f).await;
        all.push(f);
    }
    if let [small, large] = &all[..] {
        growth(small, large);
    }
    // The bridge stops and the namespace goes; the hollow nodes are left as the ground made them.
    drop(env);
    unlabel_hollow(&kube, NODES_NEEDED).await;
}

/// Takes the external-node label and the bridge's taint off hollow-1 … hollow-`n`: the ground's
/// own scheduler places nothing on a node the bridge tainted, and a stopped bridge leaves it.
async fn unlabel_hollow(kube: &kube::Client, n: usize) {
    let nodes: Api<Node> = Api::all(kube.clone());
    let nodes = &nodes;
    futures::stream::iter(1..=n)
        .map(|i| async move {
            let name = format!("hollow-{i}");
            let node = nodes.get(&name).await?;
            let taints: Vec<_> = node
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| !slurm_bridge::taint::is_ours(t, SCHEDULER))
                .collect();
            let patch = serde_json::json!({
                "metadata": {"labels": {EXTERNAL: null}},
                "spec": {"taints": taints},
            });
            nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        })
        .buffer_unordered(16)
        .for_each(|r: kube::Result<()>| async move {
            if let Err(e) = r {
                eprintln!("cannot restore a hollow node: {e}");
            }
        })
        .await;
}

/// Labels hollow-1 … hollow-`n` as Slurm external nodes.
async fn label_hollow(kube: &kube::Client, n: usize) {
    let nodes: Api<Node> = Api::all(kube.clone());
    let patch = serde_json::json!({"metadata": {"labels": {EXTERNAL: "true"}}});
    let patch = &patch;
    let nodes = &nodes;
    futures::stream::iter(1..=n)
        .map(|i| async move {
            nodes
                .patch(
                    &format!("hollow-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map(drop)
        })
        .buffer_unordered(16)
        .for_each(|r| async move { r.expect("label a hollow node") })
        .await;
}

/// Waits until Slurm has `n` hollow external nodes that take jobs.
async fn wait_slurm_nodes(slurm: &Client, n: usize) {
    eventually("the hollow nodes as Slurm nodes", LIMIT, || async {
        let nodes = slurm_nodes(slurm).await?;
        let ready = nodes
            .iter()
            .filter(|x| x.name.starts_with("hollow-") && x.is_available())
            .count();
        (ready >= n).then_some(())
    })
    .await;
}

/// Waits until no CPU of Slurm's nodes is allocated.
async fn idle(slurm: &Client) {
    eventually("Slurm's nodes idle", LIMIT, || async {
        let nodes = slurm_nodes(slurm).await?;
        nodes.iter().all(|n| n.cpus_allocated == 0).then_some(())
    })
    .await;
}

// --- the floor ------------------------------------------------------------------------------

/// The stage's waves as placeholder jobs straight through the client; all cancelled at the end.
async fn floor(slurm: &Client, stage: &Stage, index: usize, f: &mut Figures) {
    let mut ids = Vec::new();
    for (w, &n) in stage.waves.iter().enumerate() {
        let gangs = gangs_in(n);
        let jobs: Vec<usize> = std::iter::repeat_n(GANG, gangs)
            .chain(std::iter::repeat_n(1, n - gangs * GANG))
            .collect();
        let started = Instant::now();
        let submitted: Vec<(u32, usize, Instant)> = futures::stream::iter(jobs.iter().enumerate())
            .map(|(j, &size)| async move {
                let at = Instant::now();
                let id = submit_raw(slurm, &format!("floor-{index}-{w}-{j}"), size).await;
                (id, size, at)
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        let running = wait_running(slurm, &submitted.iter().map(|s| s.0).collect::<Vec<_>>()).await;
        let mut last = started;
        for (id, _, at) in &submitted {
            let r = running[id];
            f.floor_latency.push(r - *at);
            last = last.max(r);
        }
        let secs = (last - started).as_secs_f64();
        f.floor_pods += n;
        f.floor_secs += secs;
        println!(
            "  floor  wave {w}: {n} pods' worth ({} jobs) running in {secs:.1} s ({:.1} pods/s)",
            jobs.len(),
            n as f64 / secs
        );
        ids.extend(submitted.iter().map(|s| s.0));
    }
    futures::stream::iter(ids)
        .map(|id| async move { slurm.cancel_job(id).await.map(drop) })
        .buffer_unordered(AT_ONCE)
        .for_each(|r| async move { r.expect("cancel a placeholder job") })
        .await;
    idle(slurm).await;
}

/// A placeholder job as the bridge makes it for `pods` pods of 1 CPU and 1 GiB; its id.
async fn submit_raw(slurm: &Client, name: &str, pods: usize) -> u32 {
    let pods = pods as u32;
    let mut job = JobSubmission::external_job()
        .min_nodes(pods)
        .max_nodes(pods)
        .tasks_per_node(1)
        .exclusive(false);
    job.name = Some(name.into());
    job.partition = Some(PARTITION.into());
    job.cpus_per_task = Some(1);
    job.memory_per_node_mb = Some(MEMORY_MB);
    job.mcs_label = Some("kubernetes".into());
    job.working_directory = Some("/tmp".into());
    slurm
        .submit_job(&job)
        .await
        .expect("a placeholder job is accepted")
        .into_value()
        .job_id
}

/// Polls the jobs' states every [`POLL`] until all run; when each was first seen RUNNING.
async fn wait_running(slurm: &Client, ids: &[u32]) -> BTreeMap<u32, Instant> {
    let mut running = BTreeMap::new();
    let deadline = Instant::now() + LIMIT;
    while running.len() < ids.len() {
        assert!(Instant::now() < deadline, "the floor's jobs not running");
        let waiting: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|i| !running.contains_key(i))
            .collect();
        poll_states(slurm, &waiting, &mut running).await;
        tokio::time::sleep(POLL).await;
    }
    running
}

/// One poll of `ids`' states (200 a request): records the newly RUNNING ones.
async fn poll_states(slurm: &Client, ids: &[u32], running: &mut BTreeMap<u32, Instant>) {
    for chunk in ids.chunks(200) {
        if let Ok(states) = slurm.job_states(chunk).await {
            let now = Instant::now();
            for s in states.value {
                if s.state == JobState::Running {
                    running.entry(s.id).or_insert(now);
                }
            }
        }
    }
}

// --- the bridge -----------------------------------------------------------------------------

/// The stage's waves as pods for the bridge; the pods are deleted at the end.
#[allow(clippy::too_many_arguments)]
async fn bridge(
    env: &mut TestEnv,
    kube: &kube::Client,
    pods: &Api<Pod>,
    seen: &Seen,
    slurm: &Client,
    stage: &Stage,
    index: usize,
    f: &mut Figures,
) {
    // The last stage's pods go with the namespace.
    let last = index + 1 == stages(false).len();
    let groups = pod_groups(kube, &env.ns.name);
    let pid = env.bridge().pid().expect("the bridge runs");
    let cpu_before = cpu_secs(pid);
    let log_before = env.bridge_log();
    let (requests_before, bytes_before) = (api_requests(&log_before), rest_bytes(&log_before));
    drop(log_before);
    let mut created = Vec::new();
    let probe = probe_writes(kube.clone(), &env.ns.name);
    for (w, &n) in stage.waves.iter().enumerate() {
        let tag = format!("s{index}w{w}");
        let names = create_wave(pods, &groups, seen, &tag, n).await;
        let started = Instant::now();
        let follower = follow_job_starts(slurm.clone(), Arc::clone(seen), names.clone());
        let times = wait_bound(seen, &names).await;
        let job_started = follower.await.expect("the job state poller ends");
        created.extend(times.iter().filter_map(|t| t.created));
        let first = times
            .iter()
            .filter_map(|t| t.created)
            .min()
            .unwrap_or(started);
        let last = times
            .iter()
            .filter_map(|t| t.bound)
            .max()
            .unwrap_or(started);
        let mut bound = Vec::new();
        let mut from_running = Vec::new();
        for t in &times {
            let (Some(c), Some(b)) = (t.created, t.bound) else {
                continue;
            };
            bound.push(b - c);
            if let Some(r) = t.job.and_then(|j| job_started.get(&j)) {
                from_running.push(b.saturating_duration_since(*r));
            }
        }
        let secs = (last - first).as_secs_f64();
        println!(
            "  bridge wave {w}: {n} pods bound in {secs:.1} s ({:.1} pods/s); create→bound p50 {} p99 {}; RUNNING→bound p50 {} p99 {}; {} pods in the namespace",
            n as f64 / secs,
            ms(percentile(&bound, 50.0)),
            ms(percentile(&bound, 99.0)),
            ms(percentile(&from_running, 50.0)),
            ms(percentile(&from_running, 99.0)),
            f.pods + n
        );
        f.pods += n;
        f.bound_secs += secs;
        f.bound_latency.extend(bound);
        f.running_to_bound.extend(from_running);
    }
    probe.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    f.probe_writes = probe.task.await.expect("the write probe ends");
    let log = env.bridge_log();
    for line in log.lines().filter(|l| l.contains(": bound ")) {
        let (Some(request), after_start) = (field(line, "bind_ms"), field(line, "after_start_ms"))
        else {
            continue;
        };
        f.bind_requests.push(Duration::from_millis(request));
        if let Some(after) = after_start {
            f.start_seen_to_bound.push(Duration::from_millis(after));
            f.start_seen_to_request
                .push(Duration::from_millis(after.saturating_sub(request)));
        }
    }
    f.requests = api_requests(&log) - requests_before;
    f.rest_bytes = rest_bytes(&log) - bytes_before;
    f.cpu_secs = cpu_secs(pid) - cpu_before;
    f.peak_rss_kib = peak_rss_kib(pid);
    let end = Instant::now();
    f.pod_secs = created.iter().map(|c| (end - *c).as_secs_f64()).sum();
    // Printed before the clean-up, which a slow bridge could make fail.
    report(f);
    if !last {
        delete_all(pods, &groups).await;
        idle(slurm).await;
    }
}

/// A task that writes one ConfigMap of namespace `ns` every [`PROBE_EVERY`] until stopped, and
/// returns how long each write took: the API server's own latency under the bridge's load, the
/// floor under any binding's.
struct Probe {
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
}

const PROBE_EVERY: Duration = Duration::from_millis(100);

fn probe_writes(kube: kube::Client, ns: &str) -> Probe {
    let api: Api<ConfigMap> = Api::namespaced(kube, ns);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let task = tokio::spawn(async move {
        let params = PatchParams::apply("scale-bench").force();
        let mut took = Vec::new();
        let mut n = 0u64;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            n += 1;
            let cm = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "scale-probe"},
                "data": {"n": n.to_string()}
            });
            let sent = Instant::now();
            if api
                .patch("scale-probe", &params, &Patch::Apply(&cm))
                .await
                .is_ok()
            {
                took.push(sent.elapsed());
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
        took
    });
    Probe { stop, task }
}

/// The namespace's PodGroups.
fn pod_groups(kube: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup");
    Api::namespaced_with(kube.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// Creates a wave of `n` pods (its gangs' PodGroups first), [`AT_ONCE`] at a time; their names.
async fn create_wave(
    pods: &Api<Pod>,
    groups: &Api<DynamicObject>,
    seen: &Seen,
    tag: &str,
    n: usize,
) -> Vec<String> {
    let gangs = gangs_in(n);
    for g in 0..gangs {
        let group: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": format!("{tag}-g{g}"), "labels": {"bench": "scale"}},
            "spec": {"minMember": GANG}
        }))
        .expect("a PodGroup");
        groups
            .create(&PostParams::default(), &group)
            .await
            .expect("create a PodGroup");
    }
    let specs: Vec<(String, Option<String>)> = (0..n)
        .map(|i| {
            let group = (i < gangs * GANG).then(|| format!("{tag}-g{}", i / GANG));
            (format!("{tag}-{i}"), group)
        })
        .collect();
    futures::stream::iter(specs.iter())
        .map(|(name, group)| create_pod(pods, seen, name, group.as_deref()))
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<()>>()
        .await;
    specs.into_iter().map(|(name, _)| name).collect()
}

/// Creates one pod for the bridge (in PodGroup `group`, if any) and records when.
async fn create_pod(pods: &Api<Pod>, seen: &Seen, name: &str, group: Option<&str>) {
    let mut labels = serde_json::json!({"bench": "scale"});
    if let Some(g) = group {
        labels["scheduling.x-k8s.io/pod-group"] = g.into();
    }
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 0,
            // Only the bench's pods go to the hollow nodes (Slurm's pods need containers); the
            // bridge's own node taint tolerated as its webhook (on in its chart) makes pods.
            "tolerations": [
                {"key": HOLLOW_TAINT, "operator": "Exists", "effect": "NoSchedule"},
                {"key": MANAGED_TAINT, "operator": "Equal", "value": SCHEDULER, "effect": "NoExecute"}
            ],
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "1", "memory": format!("{MEMORY_MB}Mi")}}
            }]
        }
    }))
    .expect("a pod");
    seen.lock()
        .unwrap()
        .entry(name.to_owned())
        .or_default()
        .created = Some(Instant::now());
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create a pod");
}

/// Follows the namespace's pods: when each was first seen bound, and its job.
fn watch_pods(pods: Api<Pod>) -> Seen {
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut stream = watcher(pods, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(event) = stream.next().await {
            let Ok(pod) = event else { continue };
            let now = Instant::now();
            let job: Option<u32> = pod.labels().get(JOB_LABEL).and_then(|j| j.parse().ok());
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            let mut seen = record.lock().unwrap();
            let times = seen.entry(pod.name_any()).or_default();
            if times.job.is_none() {
                times.job = job;
            }
            if bound && times.bound.is_none() {
                times.bound = Some(now);
            }
        }
    });
    seen
}

/// Waits until every pod of `names` is bound; their times.
async fn wait_bound(seen: &Seen, names: &[String]) -> Vec<PodTimes> {
    eventually("every pod of the wave bound", LIMIT, || async {
        let seen = seen.lock().unwrap();
        let times: Vec<PodTimes> = names.iter().filter_map(|n| seen.get(n).copied()).collect();
        (times.len() == names.len() && times.iter().all(|t| t.bound.is_some())).then_some(times)
    })
    .await
}

/// Polls the states of the jobs of `names` (as their labels name them) every [`POLL`] until
/// every one of those pods is bound; when each job was first seen RUNNING.
fn follow_job_starts(
    slurm: Client,
    seen: Seen,
    names: Vec<String>,
) -> tokio::task::JoinHandle<BTreeMap<u32, Instant>> {
    tokio::spawn(async move {
        let mut started = BTreeMap::new();
        let deadline = Instant::now() + LIMIT;
        loop {
            let (jobs, all_bound) = {
                let seen = seen.lock().unwrap();
                let times: Vec<PodTimes> =
                    names.iter().filter_map(|n| seen.get(n).copied()).collect();
                let mut jobs: Vec<u32> = times
                    .iter()
                    .filter_map(|t| t.job)
                    .filter(|j| !started.contains_key(j))
                    .collect();
                jobs.sort_unstable();
                jobs.dedup();
                let all_bound =
                    times.len() == names.len() && times.iter().all(|t| t.bound.is_some());
                (jobs, all_bound)
            };
            if all_bound || Instant::now() > deadline {
                return started;
            }
            poll_states(&slurm, &jobs, &mut started).await;
            tokio::time::sleep(POLL).await;
        }
    })
}

/// Deletes the bench's pods and PodGroups and waits until the pods are gone.
async fn delete_all(pods: &Api<Pod>, groups: &Api<DynamicObject>) {
    let mine = ListParams::default().labels("bench=scale");
    // A collection deletion of thousands of pods can outlast the connection: asked again.
    eventually("the bench's objects deleted", LIMIT, || async {
        let dp = DeleteParams::default();
        let pods = pods.delete_collection(&dp, &mine).await;
        let groups = groups.delete_collection(&dp, &mine).await;
        (pods.is_ok() && groups.is_ok()).then_some(())
    })
    .await;
    eventually("the bench's pods gone", LIMIT, || async {
        let left = pods.list(&mine.clone().limit(1)).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
}

// --- the bridge's costs -----------------------------------------------------------------------

/// User and system CPU seconds of process `pid` (/proc/<pid>/stat, in clock ticks of 1/100 s).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / 100.0
}

/// Peak resident memory of process `pid` (VmHWM), KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The API server requests in the bridge's log (kube-client's "requesting" debug lines).
fn api_requests(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("kube_client") && l.contains("requesting"))
        .count() as u64
}

// --- the report -------------------------------------------------------------------------------

/// Per-pod costs of a stage, for the growth line.
struct PerPod {
    cpu_ms: f64,
    requests: f64,
    bytes: f64,
    /// slurmrestd bytes a pod-minute (see [`Figures::pod_secs`]).
    bytes_a_minute: f64,
}

fn per_pod(f: &Figures) -> PerPod {
    let n = f.pods.max(1) as f64;
    PerPod {
        cpu_ms: f.cpu_secs * 1000.0 / n,
        requests: f.requests as f64 / n,
        bytes: f.rest_bytes as f64 / n,
        bytes_a_minute: f.rest_bytes as f64 * 60.0 / f.pod_secs.max(1.0),
    }
}

/// A stage's figures beside the goals.
fn report(f: &Figures) {
    let floor_rate = f.floor_pods as f64 / f.floor_secs;
    let bound_rate = f.pods as f64 / f.bound_secs;
    let p = per_pod(f);
    let ratio = bound_rate / floor_rate;
    let p99 = percentile(&f.running_to_bound, 99.0);
    let rss_mb = f.peak_rss_kib as f64 * 1024.0 / 1e6;
    println!("\n{} nodes, {} pods:", f.nodes, f.pods);
    println!(
        "  floor  submit→RUNNING    p50 {:>8}  p99 {:>8}  {floor_rate:>7.1} pods/s",
        ms(percentile(&f.floor_latency, 50.0)),
        ms(percentile(&f.floor_latency, 99.0)),
    );
    println!(
        "  bridge create→bound      p50 {:>8}  p99 {:>8}  {bound_rate:>7.1} pods/s",
        ms(percentile(&f.bound_latency, 50.0)),
        ms(percentile(&f.bound_latency, 99.0)),
    );
    println!(
        "  bridge RUNNING→bound     p50 {:>8}  p99 {:>8}  (goal p99 < 250 ms: {})",
        ms(percentile(&f.running_to_bound, 50.0)),
        ms(p99),
        met(p99 < Duration::from_millis(250))
    );
    println!(
        "  bridge start seen→bound p50 {:>8}  p99 {:>8}  (from the bridge's log: its own sighting of the job's start)",
        ms(percentile(&f.start_seen_to_bound, 50.0)),
        ms(percentile(&f.start_seen_to_bound, 99.0)),
    );
    println!(
        "  of which the bridge's   p50 {:>8}  p99 {:>8}  (start seen → binding request sent)",
        ms(percentile(&f.start_seen_to_request, 50.0)),
        ms(percentile(&f.start_seen_to_request, 99.0)),
    );
    println!(
        "  and the binding request p50 {:>8}  p99 {:>8}",
        ms(percentile(&f.bind_requests, 50.0)),
        ms(percentile(&f.bind_requests, 99.0)),
    );
    println!(
        "  API server probe write  p50 {:>8}  p99 {:>8}  (a ConfigMap applied every {} ms beside the waves)",
        ms(percentile(&f.probe_writes, 50.0)),
        ms(percentile(&f.probe_writes, 99.0)),
        PROBE_EVERY.as_millis()
    );
    println!(
        "  rate: bridge / floor {ratio:.2} (goal ≥ 0.9: {})",
        met(ratio >= 0.9)
    );
    println!(
        "  bridge: {:.1} CPU s ({:.1} ms a pod), peak RSS {rss_mb:.0} MB (goal < 200 MB: {}), {:.1} API requests and {:.0} slurmrestd bytes a pod ({:.0} a pod-minute)",
        f.cpu_secs,
        p.cpu_ms,
        met(rss_mb < 200.0),
        p.requests,
        p.bytes,
        p.bytes_a_minute
    );
}

/// How the per-pod costs grow from the small stage to the large one (goal: flat, linear in all).
fn growth(small: &Figures, large: &Figures) {
    let (a, b) = (per_pod(small), per_pod(large));
    let x = |a: f64, b: f64| b / a.max(f64::MIN_POSITIVE);
    println!(
        "\n{} → {} nodes ({} → {} pods), per pod (goal: linear growth, so ×1.0 per pod): CPU ×{:.2}, API requests ×{:.2}, slurmrestd bytes ×{:.2} (a pod-minute ×{:.2}); RUNNING→bound p99 ×{:.2}; peak RSS ×{:.2}",
        small.nodes,
        large.nodes,
        small.pods,
        large.pods,
        x(a.cpu_ms, b.cpu_ms),
        x(a.requests, b.requests),
        x(a.bytes, b.bytes),
        x(a.bytes_a_minute, b.bytes_a_minute),
        x(
            percentile(&small.running_to_bound, 99.0).as_secs_f64(),
            percentile(&large.running_to_bound, 99.0).as_secs_f64()
        ),
        x(small.peak_rss_kib as f64, large.peak_rss_kib as f64),
    );
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}
