//! Two replicas of the bridge with leader election (`--leader-elect`), as the chart runs them
//! with `replicaCount: 2`: the leader is killed (SIGKILL, so its Lease is not released) in the
//! middle of a burst of 50 pods. The other replica takes the Lease once it expires and carries
//! on from Slurm's jobs: every pod runs to its end with exactly one Slurm job, none is left
//! pending, no job outlives its pod, and the killed replica, restarted as its pod would be,
//! waits as the standby. A leader whose API traffic is black-holed stops by its own clock
//! before its Lease can pass, and the standby leads after the Lease expires and places pods.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{IMAGE, SCHEDULER, TestEnv, eventually, external_nodes, ground, slurm_nodes};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use slurm_client::JobQuery;

const PODS: usize = 50;
/// The leader is killed once it has bound this many of the burst's pods.
const KILL_AFTER_BOUND: usize = 8;
/// The standby's `/metrics` (the leader's is the env's), inside the ground.
const STANDBY_METRICS: &str = "127.0.0.1:18081";

/// A 1-CPU pod of the bridge that runs for two seconds.
fn short_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  schedulerName: {SCHEDULER}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "2"]
    resources:
      requests: {{cpu: "1", memory: 64Mi}}
"#
    )
}

/// Lines of `log` saying a burst pod was bound.
fn bound_lines(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("bound") && l.contains("/burst-"))
        .count()
}

/// The identity a replica logged when it started leading, if it did.
fn leading_identity(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains(" leading"))?;
    let start = line.find("identity=")? + "identity=".len();
    Some(line[start..].split_whitespace().next()?.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_standby_takes_over_a_burst_without_a_duplicate_or_a_lost_pod() {
    // Slurm starts the jobs that wait for the CPUs of ended ones on its backfill pass (every
    // 30 s by default): the burst's later waves would wait 30 s each.
    let mut env = TestEnv::with_slurm_conf(
        "ha",
        "SchedulerParameters=batch_sched_delay=0,bf_interval=2\n",
    );
    let slurm = env.slurm();
    env.label_nodes();
    let ns = env.ns.name.clone();
    let elect = ["--leader-elect", "--leader-elect-namespace", &ns];
    let config = "exclusive: false\n";
    let first = env.spawn_bridge(config, "info", common::METRICS_ADDR, &elect);
    env.replace_bridge(first);
    eventually("the first replica to lead", Duration::from_secs(60), || {
        let log = env.bridge_log();
        async move { leading_identity(&log) }
    })
    .await;
    external_nodes(&env, &slurm).await;
    let standby = env.spawn_bridge(config, "info", STANDBY_METRICS, &elect);
    eventually(
        "the second replica to wait",
        Duration::from_secs(60),
        || {
            let log = standby.log();
            async move { log.contains("waiting for leadership").then_some(()) }
        },
    )
    .await;

    // The burst, all at once; the leader dies once it has bound a few of them.
    let burst: Vec<String> = (0..PODS)
        .map(|i| short_pod(&format!("burst-{i}")))
        .collect();
    env.apply(&burst.join("---\n"));
    eventually(
        "the leader to bind some of the burst",
        Duration::from_secs(90),
        || {
            let bound = bound_lines(&env.bridge_log());
            async move { (bound >= KILL_AFTER_BOUND).then_some(()) }
        },
    )
    .await;
    env.bridge().kill_now();
    let killed = Instant::now();
    let bound_by_first = bound_lines(&env.bridge_log());
    let new_leader = eventually("the standby to lead", Duration::from_secs(60), || {
        let log = standby.log();
        async move { leading_identity(&log) }
    })
    .await;
    let takeover = killed.elapsed();
    // The killed replica comes back, as its pod's restart would, and waits.
    let mut first = env.replace_bridge(standby).expect("the first replica");
    first.restart();
    let restarted = first.log().len();
    eventually(
        "the restarted replica to wait",
        Duration::from_secs(60),
        || {
            let log = first.log()[restarted..].to_owned();
            async move { log.contains("waiting for leadership").then_some(()) }
        },
    )
    .await;

    // Every pod runs to its end.
    let started = Instant::now();
    for i in 0..PODS {
        env.wait_for(
            &format!("pod/burst-{i}"),
            "{.status.phase}",
            Duration::from_secs(240),
            |p| p == "Succeeded",
        );
    }
    println!(
        "{PODS} pods: the first leader bound {bound_by_first} before it was killed; the standby led \
         {:.1} s after the kill (the Lease lasts 15 s from its last renewal); all pods Succeeded {:.1} s later",
        takeover.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // Exactly one Slurm job per pod, the one on its label, and none still running or pending.
    let jobs = slurm
        .list_jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_value()
        .jobs;
    let mut per_pod: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for job in &jobs {
        for i in 0..PODS {
            let needle = format!("\"{ns}/burst-{i}\"");
            if job
                .admin_comment
                .as_deref()
                .is_some_and(|c| c.contains(&needle))
            {
                per_pod
                    .entry(format!("burst-{i}"))
                    .or_default()
                    .push(job.id);
            }
        }
    }
    for i in 0..PODS {
        let pod = format!("burst-{i}");
        assert_eq!(
            per_pod.get(&pod).cloned().unwrap_or_default(),
            vec![env.job_id(&pod)],
            "{pod}: its Slurm jobs against its label"
        );
    }
    eventually(
        "no job of the burst left running or pending",
        Duration::from_secs(60),
        || async {
            let jobs = slurm
                .list_jobs(&JobQuery::default())
                .await
                .ok()?
                .into_value()
                .jobs;
            jobs.iter()
                .filter(|j| {
                    j.admin_comment
                        .as_deref()
                        .is_some_and(|c| c.contains("/burst-"))
                })
                .all(|j| j.state.is_finished())
                .then_some(())
        },
    )
    .await;

    // Full service: the Lease is the new leader's, the restarted replica never led again, and
    // every external node takes jobs (none drained or down).
    let holder = ground().get(&ns, "lease/slurm-bridge", "{.spec.holderIdentity}");
    assert_eq!(holder, new_leader);
    assert_eq!(
        first.log().matches(" leading").count(),
        1,
        "the restarted replica stays the standby:\n{}",
        first.log()
    );
    let nodes = slurm_nodes(&slurm).await.expect("Slurm's nodes");
    for node in nodes.iter().filter(|n| env.nodes.contains(&n.name)) {
        assert!(node.is_available(), "{} takes no jobs: {node:?}", node.name);
    }
    ground().ok(&[
        "delete",
        "pods",
        "-n",
        &ns,
        "--all",
        "--wait=true",
        "--timeout=60s",
    ]);
}

/// The binaries' lease duration and renew deadline (`kube_support::leader::Timings`).
const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// A time field of the bridge's Lease in `ns` (`renewTime`, `acquireTime`).
fn lease_time(ns: &str, field: &str) -> Timestamp {
    let text = ground().get(ns, "lease/slurm-bridge", &format!("{{.spec.{field}}}"));
    text.parse()
        .unwrap_or_else(|e| panic!("lease {field} {text:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_the_api_server_stops_before_its_lease_can_pass() {
    let mut env = TestEnv::new("ha-fence");
    let slurm = env.slurm();
    env.label_nodes();
    let ns = env.ns.name.clone();
    let elect = ["--leader-elect", "--leader-elect-namespace", &ns];
    let config = "exclusive: false\n";
    let proxy = ground().api_proxy();
    let kubeconfig = proxy.kubeconfig().to_string_lossy().into_owned();
    let first = env.spawn_bridge_with_env(
        config,
        "info",
        common::METRICS_ADDR,
        &elect,
        &[("KUBECONFIG", &kubeconfig), ("POD_NAME", "bridge-a")],
    );
    env.replace_bridge(first);
    env.bridge()
        .wait_for_log(" leading", Duration::from_secs(60));
    external_nodes(&env, &slurm).await;
    let mut standby = env.spawn_bridge_with_env(
        config,
        "info",
        STANDBY_METRICS,
        &elect,
        &[("POD_NAME", "bridge-b")],
    );
    standby.wait_for_log("waiting for leadership", Duration::from_secs(60));

    let paused = Instant::now();
    proxy.pause();
    let exit = loop {
        if env.bridge().try_status().is_some() {
            break Timestamp::now();
        }
        assert!(
            paused.elapsed() < LEASE + Duration::from_secs(5),
            "the cut-off leader still runs:\n{}",
            env.bridge_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stopped_after = paused.elapsed();
    let renewed = lease_time(&ns, "renewTime");
    assert!(
        env.bridge_log().contains("leader fenced"),
        "{}",
        env.bridge_log()
    );
    let exit_after_renewal = exit.duration_since(renewed);
    assert!(
        exit_after_renewal
            < SignedDuration::try_from(RENEW_DEADLINE + Duration::from_secs(1)).unwrap(),
        "the leader exited {exit_after_renewal:?} after its last renewal"
    );
    standby.wait_for_log(" leading", Duration::from_secs(60));
    let acquired = lease_time(&ns, "acquireTime");
    let takeover_after_renewal = acquired.duration_since(renewed);
    println!(
        "black-holed bridge: exited {:.2} s after the pause, {:.2} s after its last renewal; the \
         standby took the Lease {:.2} s after that renewal",
        stopped_after.as_secs_f64(),
        exit_after_renewal.as_secs_f64(),
        takeover_after_renewal.as_secs_f64(),
    );
    assert!(takeover_after_renewal >= SignedDuration::try_from(LEASE).unwrap());
    assert!(
        acquired > exit,
        "the standby led before the old leader exited"
    );

    // Full service: the new leader places a pod that runs to its end.
    let _old = env.replace_bridge(standby);
    env.apply(&short_pod("after-fence"));
    env.wait_for(
        "pod/after-fence",
        "{.status.phase}",
        Duration::from_secs(120),
        |p| p == "Succeeded",
    );
    ground().ok(&[
        "delete",
        "pods",
        "-n",
        &ns,
        "--all",
        "--wait=true",
        "--timeout=60s",
    ]);
}
