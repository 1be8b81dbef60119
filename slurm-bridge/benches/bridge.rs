//! The bridge's figures on the test ground (`cargo xtask kube up`), against the real Slurm 26.05 of
//! the tests (slurmctld and slurmrestd in pods, the ground's nodes as external nodes), with the
//! bridge running inside the ground as in a pod:
//!
//! - **the floor**: placeholder jobs submitted straight through `slurm_client`, as the bridge
//!   submits them and at the pace the last round's pods arrived: submit → RUNNING latency
//!   p50/p99 and jobs running per second;
//! - **the bridge**: as many pods created at once: create → bound and create → Running latency
//!   p50/p99, pods bound per second, the time from a job RUNNING in Slurm (the bench polls the
//!   jobs' states every 10 ms) to its pod bound, and the slurmrestd response bytes the bridge
//!   read per bound pod (from its debug log, so everything it reads while the pods are placed
//!   counts);
//! - both again with 20,000 unrelated held jobs in Slurm (5,000 with `SLURM_BENCH_QUICK=1`).
//!
//! Each round fills every CPU of the external nodes with 1-CPU jobs or pods, and rounds of the
//! floor and the bridge alternate, so the two see the same cluster; each starts after a wait that
//! spreads the round starts over slurmctld's one-second scheduling cycle (see [`phase`]). A third
//! kind of round runs the two **side by side**: half the CPUs for the floor's jobs, half for the
//! bridge's pods, submitted and created interleaved at the same moment, so both wait for the same
//! scheduling passes and the difference of their latencies is the bridge's own (alternating
//! rounds differ by where in slurmctld's cycle each one fell). Ratios are printed at the end.
//!
//! ```sh
//! cargo bench -p slurm-bridge --bench bridge      # or: cargo xtask bench
//! ```
//!
//! Without the ground (no `/run/slurm-dev/kube/kube.env`) the bench says so and is skipped.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/figures.rs"]
mod figures;

use figures::{ms, percentile, rest_bytes};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{IMAGE, SCHEDULER, TestEnv, eventually, external_nodes, ground, slurm_nodes};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use slurm_client::{Client, JobState, JobSubmission};

const LIMIT: Duration = Duration::from_secs(180);
const PARTITION: &str = "slurm-bridge";

fn main() {
    if let Some(why) = test_support::ground::not_up() {
        println!("skipped: {why}");
        return;
    }
    let quick = std::env::var("SLURM_BENCH_QUICK").is_ok_and(|v| v == "1");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run(quick));
}

/// When each pod was created (by this process), bound and seen Running.
#[derive(Default, Clone, Copy)]
struct PodTimes {
    created: Option<Instant>,
    /// The job id label appeared: the bridge has submitted the pod's job.
    submitted: Option<Instant>,
    bound: Option<Instant>,
    running: Option<Instant>,
    /// The job id label's value.
    job: Option<u32>,
}

type Seen = Arc<Mutex<BTreeMap<String, PodTimes>>>;

/// One setting's samples.
#[derive(Default)]
struct Figures {
    raw_latency: Vec<Duration>,
    raw_rate: Vec<f64>,
    submitted_latency: Vec<Duration>,
    bound_latency: Vec<Duration>,
    running_latency: Vec<Duration>,
    /// From the pod's job RUNNING in Slurm (as this bench's 10 ms state polls see it) to the
    /// pod bound: the bridge's own share of the start path.
    started_to_bound: Vec<Duration>,
    /// How long this process took to create a round's pods.
    create_span: Vec<Duration>,
    bound_rate: Vec<f64>,
    bytes_per_pod: Vec<f64>,
    /// Side-by-side rounds: the floor's submit → RUNNING and the bridge's create → bound.
    paired_raw: Vec<Duration>,
    paired_bound: Vec<Duration>,
}

async fn run(quick: bool) {
    let rounds = if quick { 2 } else { 8 };
    let fillers = if quick { 5_000 } else { 20_000 };
    // Lines of SLURM_BENCH_SLURM_CONF (e.g. `SchedulerParameters=…`) go into slurm.conf too.
    let extra = std::env::var("SLURM_BENCH_SLURM_CONF").unwrap_or_default();
    let conf = format!("MaxJobCount=60000\n{}\n", extra.replace("\\n", "\n"));
    let mut env = TestEnv::with_slurm_conf("bridge-bench", &conf);
    let slurm = env.slurm();
    env.label_nodes();
    env.start_bridge_logging("exclusive: false\n", "info,slurm_client::transport=debug");
    let slots: usize = external_nodes(&env, &slurm)
        .await
        .iter()
        .map(|n| n.cpus as usize)
        .sum();
    let kube = ground()
        .kube_client()
        .await
        .expect("a client of the ground");
    let pods: Api<Pod> = Api::namespaced(kube, &env.ns.name);
    let seen = watch_pods(pods.clone());
    println!(
        "slurm-bridge benchmark: {} external nodes, {slots} CPUs; {rounds} rounds of {slots} jobs and of {slots} pods per setting",
        env.nodes.len()
    );

    let mut settings = Vec::new();
    for (setting, extra) in [("no other jobs", 0), ("with fillers", fillers)] {
        if extra > 0 {
            let started = Instant::now();
            fill(&slurm, extra).await;
            let secs = started.elapsed().as_secs_f64();
            println!(
                "  submitted {extra} held jobs in {secs:.1} s ({:.0} jobs/s)",
                extra as f64 / secs
            );
        }
        let mut f = Figures::default();
        // The floor submits its jobs as the pods of the last bridge round arrived, one every
        // (creation span / n): Slurm starts a job submitted into a quiet cluster at once, but
        // later ones on its scheduler's next pass, so the pace changes the floor.
        let mut gap = Duration::from_millis(30);
        for round in 0..rounds {
            let tag = format!("{}{round}", if extra > 0 { "f" } else { "e" });
            tokio::time::sleep(phase(3 * round)).await;
            let (latencies, rate) = raw_round(&slurm, slots, &tag, gap).await;
            f.raw_latency.extend(latencies);
            f.raw_rate.push(rate);
            tokio::time::sleep(phase(3 * round + 1)).await;
            bridge_round(&env, &pods, &seen, &slurm, slots, &tag, &mut f).await;
            gap = *f.create_span.last().expect("a round ran") / slots as u32;
            tokio::time::sleep(phase(3 * round + 2)).await;
            paired_round(&pods, &seen, &slurm, slots, &tag, &mut f).await;
        }
        let label = if extra > 0 {
            format!("{extra} other jobs")
        } else {
            setting.to_owned()
        };
        settings.push((label, f));
    }
    report(&settings);
}

/// The wait before the `k`th round. slurmctld starts most jobs on a pass of its one-second
/// cycle, so a job's wait depends on where in that cycle it is submitted. A round that starts
/// when the one before is over starts at much the same point of the cycle every time (a bridge
/// round about 0.3 s after the pass that started the floor's jobs), which measures that point,
/// not the bridge. The waits spread each side's round starts evenly over a second (a golden-ratio
/// sequence: `k` = 3r for the floor, 3r + 1 for the bridge, 3r + 2 side by side).
fn phase(k: usize) -> Duration {
    Duration::from_secs_f64((k as f64 * 0.618_033_988_75).fract())
}

/// Follows the namespace's pods: when each was first seen bound and Running.
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
            let name = pod.metadata.name.clone().unwrap_or_default();
            let job: Option<u32> = pod
                .labels()
                .get("scheduler.slinky.slurm.net/slurm-jobid")
                .and_then(|j| j.parse().ok());
            let labelled = job.is_some();
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let mut seen = record.lock().unwrap();
            let times = seen.entry(name).or_default();
            if labelled && times.submitted.is_none() {
                times.submitted = Some(now);
                times.job = job;
            }
            if bound && times.bound.is_none() {
                times.bound = Some(now);
            }
            if running && times.running.is_none() {
                times.running = Some(now);
            }
        }
    });
    seen
}

/// `n` placeholder jobs, as the bridge makes them, straight through the client, one every
/// `gap`: each job's submit → RUNNING time and jobs running per second; then they are cancelled.
async fn raw_round(slurm: &Client, n: usize, tag: &str, gap: Duration) -> (Vec<Duration>, f64) {
    let started = Instant::now();
    let mut pollers = Vec::new();
    for i in 0..n {
        let submitted = Instant::now();
        let id = submit_raw(slurm, &format!("raw-{tag}-{i}")).await;
        // One poller per job, so that one job's wait does not delay noticing another's start.
        let slurm = slurm.clone();
        pollers.push(tokio::spawn(async move {
            loop {
                if let Ok(job) = slurm.get_job(id).await {
                    let job = job.into_value();
                    if job.state == JobState::Running {
                        return (id, submitted.elapsed(), Instant::now());
                    }
                    assert!(!job.state.is_finished(), "job {id} ended: {job:?}");
                }
                assert!(
                    submitted.elapsed() < LIMIT,
                    "job {id} not running after {LIMIT:?}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
        tokio::time::sleep(gap).await;
    }
    let mut latencies = Vec::new();
    let mut ids = Vec::new();
    let mut last = started;
    for poller in pollers {
        let (id, latency, at) = poller.await.expect("the poller ends");
        latencies.push(latency);
        ids.push(id);
        last = last.max(at);
    }
    let rate = n as f64 / (last - started).as_secs_f64();
    for id in &ids {
        slurm
            .cancel_job(*id)
            .await
            .expect("cancel a placeholder job");
    }
    idle(slurm).await;
    (latencies, rate)
}

/// A placeholder job as the bridge makes them for a 1-CPU pod; its id.
async fn submit_raw(slurm: &Client, name: &str) -> u32 {
    let mut job = JobSubmission::external_job();
    job.name = Some(name.into());
    job.partition = Some(PARTITION.into());
    job.cpus_per_task = Some(1);
    job.memory_per_node_mb = Some(64);
    job.min_nodes = Some(1);
    job.max_nodes = Some(1);
    job.tasks_per_node = Some(1);
    job.mcs_label = Some("kubernetes".into());
    job.working_directory = Some("/tmp".into());
    slurm
        .submit_job(&job)
        .await
        .expect("a placeholder job is accepted")
        .into_value()
        .job_id
}

/// Creates a 1-CPU pod for the bridge and records when.
async fn create_pod(pods: &Api<Pod>, seen: &Seen, name: &str) {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}
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

/// Deletes the pods `names` and waits until they are gone.
async fn delete_pods(pods: &Api<Pod>, names: &[String]) {
    for name in names {
        let _ = pods.delete(name, &DeleteParams::default()).await;
    }
    eventually("the round's pods gone", LIMIT, || async {
        let left = pods.list(&Default::default()).await.ok()?;
        let left = left
            .items
            .iter()
            .filter(|p| names.contains(p.metadata.name.as_ref().unwrap()))
            .count();
        (left == 0).then_some(())
    })
    .await;
}

/// `n / 2` placeholder jobs straight through the client and `n / 2` pods for the bridge,
/// submitted and created in turns (a pod first in one pair, a job first in the next): the
/// floor's submit → RUNNING (its jobs' states polled every 5 ms, one request for all) and the
/// bridge's create → bound, in the same scheduling passes.
async fn paired_round(
    pods: &Api<Pod>,
    seen: &Seen,
    slurm: &Client,
    n: usize,
    tag: &str,
    f: &mut Figures,
) {
    let half = n / 2;
    let names: Vec<String> = (0..half).map(|i| format!("pair-{tag}-{i}")).collect();
    let mut submitted = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        if i % 2 == 1 {
            let at = Instant::now();
            submitted.insert(submit_raw(slurm, &format!("pair-{tag}-{i}")).await, at);
        }
        create_pod(pods, seen, name).await;
        if i % 2 == 0 {
            let at = Instant::now();
            submitted.insert(submit_raw(slurm, &format!("pair-{tag}-{i}")).await, at);
        }
    }
    let ids: Vec<u32> = submitted.keys().copied().collect();
    let mut running: BTreeMap<u32, Instant> = BTreeMap::new();
    let deadline = Instant::now() + LIMIT;
    while running.len() < ids.len() {
        assert!(Instant::now() < deadline, "side-by-side jobs not running");
        if let Ok(states) = slurm.job_states(&ids).await {
            let now = Instant::now();
            for s in states.value {
                if s.state == JobState::Running {
                    running.entry(s.id).or_insert(now);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for (id, at) in &running {
        f.paired_raw.push(*at - submitted[id]);
    }
    let times: Vec<PodTimes> = eventually("every side-by-side pod bound", LIMIT, || async {
        let seen = seen.lock().unwrap();
        let times: Vec<PodTimes> = names.iter().filter_map(|n| seen.get(n).copied()).collect();
        (times.len() == half && times.iter().all(|t| t.bound.is_some())).then_some(times)
    })
    .await;
    for t in &times {
        let created = t.created.expect("recorded before the create");
        f.paired_bound.push(t.bound.expect("waited for") - created);
    }
    for id in &ids {
        slurm
            .cancel_job(*id)
            .await
            .expect("cancel a placeholder job");
    }
    delete_pods(pods, &names).await;
    idle(slurm).await;
}

/// `n` pods created at once for the bridge: create → bound and → Running, pods bound per
/// second, slurmrestd bytes read by the bridge per pod; then the pods are deleted.
async fn bridge_round(
    env: &TestEnv,
    pods: &Api<Pod>,
    seen: &Seen,
    slurm: &Client,
    n: usize,
    tag: &str,
    f: &mut Figures,
) {
    let bytes_before = rest_bytes(&env.bridge_log());
    let names: Vec<String> = (0..n).map(|i| format!("pod-{tag}-{i}")).collect();
    let started = Instant::now();
    for name in &names {
        create_pod(pods, seen, name).await;
    }
    f.create_span.push(started.elapsed());
    let job_started = follow_job_starts(slurm.clone(), Arc::clone(seen), names.clone());
    let times: Vec<PodTimes> = eventually("every pod Running", LIMIT, || async {
        let seen = seen.lock().unwrap();
        let times: Vec<PodTimes> = names.iter().filter_map(|n| seen.get(n).copied()).collect();
        (times.len() == n && times.iter().all(|t| t.running.is_some())).then_some(times)
    })
    .await;
    let bytes = rest_bytes(&env.bridge_log()) - bytes_before;
    let mut last_bound = started;
    for t in &times {
        let created = t.created.expect("recorded before the create");
        let bound = t.bound.expect("a Running pod is bound");
        f.submitted_latency
            .push(t.submitted.unwrap_or(bound).min(bound) - created);
        f.bound_latency.push(bound - created);
        f.running_latency
            .push(t.running.expect("waited for") - created);
        last_bound = last_bound.max(bound);
    }
    let job_started = job_started.await.expect("the job state poller ends");
    for t in &times {
        if let (Some(job), Some(bound)) = (t.job, t.bound)
            && let Some(at) = job_started.get(&job)
        {
            f.started_to_bound
                .push(bound.saturating_duration_since(*at));
        }
    }
    f.bound_rate
        .push(n as f64 / (last_bound - started).as_secs_f64());
    f.bytes_per_pod.push(bytes as f64 / n as f64);
    delete_pods(pods, &names).await;
    idle(slurm).await;
}

/// Polls the states of the jobs of `names` (as their labels name them) every 10 ms until every
/// one of those pods is bound; returns when each job was first seen RUNNING.
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
                let jobs: Vec<u32> = times
                    .iter()
                    .filter_map(|t| t.job)
                    .filter(|j| !started.contains_key(j))
                    .collect();
                let all_bound =
                    times.len() == names.len() && times.iter().all(|t| t.bound.is_some());
                (jobs, all_bound)
            };
            if (all_bound && jobs.is_empty()) || Instant::now() > deadline {
                return started;
            }
            if !jobs.is_empty()
                && let Ok(states) = slurm.job_states(&jobs).await
            {
                let now = Instant::now();
                for s in states.value {
                    if s.state == JobState::Running {
                        started.entry(s.id).or_insert(now);
                    }
                }
            }
            if all_bound {
                return started;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// Waits until no CPU of the external nodes is allocated.
async fn idle(slurm: &Client) {
    eventually("the nodes idle", LIMIT, || async {
        let nodes = slurm_nodes(slurm).await?;
        nodes.iter().all(|n| n.cpus_allocated == 0).then_some(())
    })
    .await;
}

/// Submits `count` held batch jobs, 16 at a time.
async fn fill(slurm: &Client, count: usize) {
    let mut job = JobSubmission::wrap("true");
    job.name = Some("filler".into());
    job.partition = Some(PARTITION.into());
    job.hold = true;
    job.working_directory = Some("/tmp".into());
    let job = &job;
    futures::stream::iter(0..count)
        .map(|_| async move { slurm.submit_job(job).await.map(drop) })
        .buffer_unordered(16)
        .for_each(|r| async move { r.expect("a filler job is accepted") })
        .await;
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn report(settings: &[(String, Figures)]) {
    for (label, f) in settings {
        let raw50 = percentile(&f.raw_latency, 50.0);
        let bound50 = percentile(&f.bound_latency, 50.0);
        println!("\n{label}:");
        println!(
            "  floor  submit→RUNNING    p50 {:>8}  p99 {:>8}  {:>6.1} jobs/s",
            ms(raw50),
            ms(percentile(&f.raw_latency, 99.0)),
            mean(&f.raw_rate)
        );
        println!(
            "  bridge create→submitted  p50 {:>8}  p99 {:>8}  (pods created in {} per round)",
            ms(percentile(&f.submitted_latency, 50.0)),
            ms(percentile(&f.submitted_latency, 99.0)),
            ms(percentile(&f.create_span, 50.0))
        );
        println!(
            "  bridge create→bound      p50 {:>8}  p99 {:>8}  {:>6.1} pods/s",
            ms(bound50),
            ms(percentile(&f.bound_latency, 99.0)),
            mean(&f.bound_rate)
        );
        println!(
            "  bridge job RUNNING→bound p50 {:>8}  p99 {:>8}  (the bridge's share of the start path)",
            ms(percentile(&f.started_to_bound, 50.0)),
            ms(percentile(&f.started_to_bound, 99.0))
        );
        println!(
            "  bridge create→Running    p50 {:>8}  p99 {:>8}",
            ms(percentile(&f.running_latency, 50.0)),
            ms(percentile(&f.running_latency, 99.0))
        );
        println!(
            "  slurmrestd bytes read by the bridge per bound pod: {:.0}",
            mean(&f.bytes_per_pod)
        );
        let extra = bound50.as_secs_f64() - raw50.as_secs_f64();
        println!(
            "  ratios: bridge rate / floor rate {:.2} (goal ≥ 0.8); bound p50 − floor p50 {:+.0} ms (goal ≤ +100 ms)",
            mean(&f.bound_rate) / mean(&f.raw_rate),
            extra * 1000.0
        );
        let (raw, bound) = (
            percentile(&f.paired_raw, 50.0),
            percentile(&f.paired_bound, 50.0),
        );
        println!(
            "  side by side: floor submit→RUNNING p50 {}, bridge create→bound p50 {}: {:+.0} ms (goal ≤ +100 ms)",
            ms(raw),
            ms(bound),
            (bound.as_secs_f64() - raw.as_secs_f64()) * 1000.0
        );
    }
    if let [(_, empty), (label, full)] = settings {
        println!(
            "\nwith {label} / without: bound p50 ×{:.2}, bridge rate ×{:.2}, floor p50 ×{:.2}",
            percentile(&full.bound_latency, 50.0).as_secs_f64()
                / percentile(&empty.bound_latency, 50.0).as_secs_f64(),
            mean(&full.bound_rate) / mean(&empty.bound_rate),
            percentile(&full.raw_latency, 50.0).as_secs_f64()
                / percentile(&empty.raw_latency, 50.0).as_secs_f64()
        );
    }
}
