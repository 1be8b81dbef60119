//! The bridge on the test ground against a real Slurm 26.05 (slurmctld and slurmrestd in pods,
//! external nodes for the ground's nodes): pods are placed by Slurm, bound where their job runs,
//! packed by their requests, ended with their job, and nothing is deleted while slurmrestd is
//! away or after the bridge restarts; crashes at any point leave one job per pod. GPUs go to
//! Slurm as GRES both ways, a pod Slurm does not place keeps the bridge's off a node it fills,
//! several pods that each fit beside such a pod but not together never overcommit its node (the
//! refit at binding), and `/metrics` counts what happened.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{IMAGE, MANAGED_NODE, SCHEDULER, TestEnv, eventually, external_nodes, ground, pod};
use slurm_client::{JobQuery, JobState};

/// SIGKILLs and restarts the bridge as soon as it logs `step` for a storm pod (or after 20 s).
async fn crash_at(env: &mut TestEnv, step: &str) {
    let seen = |log: &str| {
        log.lines()
            .filter(|l| l.contains(step) && l.contains("/storm-"))
            .count()
    };
    let before = seen(&env.bridge_log());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen(&env.bridge_log()) == before && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    env.bridge().crash_restart();
}

/// A bare pod of the bridge packed by its requests: `cpu` CPUs, 64 MiB, and `extra` lines of
/// its resources (e.g. limits).
fn sized_pod(name: &str, cpu: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  schedulerName: {SCHEDULER}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
    resources:
      requests: {{cpu: "{cpu}", memory: 64Mi}}
{extra}"#
    )
}

/// A 1-CPU pod of the bridge with `gpus` GPUs.
fn gpu_pod(name: &str, gpus: u32) -> String {
    sized_pod(
        name,
        "1",
        &format!("      limits: {{nvidia.com/gpu: \"{gpus}\"}}\n"),
    )
}

/// A pod bound straight to `node` (as a DaemonSet's are: Slurm knows nothing of it), taking
/// `cpu` CPUs.
fn daemon_pod(node: &str, cpu: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: daemon
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  tolerations: [{{operator: Exists}}]
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
    resources:
      requests: {{cpu: "{cpu}", memory: 64Mi}}
"#
    )
}

/// Deletes `pods`, waiting until they are gone.
fn delete_pods(env: &TestEnv, pods: &[&str]) {
    let mut args = vec![
        "delete",
        "pods",
        "-n",
        &env.ns.name,
        "--wait=true",
        "--timeout=60s",
    ];
    args.extend(pods);
    ground().ok(&args);
}

/// An external node registered with 2 CPUs and no GPUs, then given 3 CPUs and 2 GPUs, and
/// in service with them.
async fn late_node_follows_its_size(env: &TestEnv, slurm: &slurm_client::Client) {
    const NODE: &str = "late-gpus";
    struct Remove;
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = ground().kubectl(&["delete", "node", NODE, "--wait=false"], None);
        }
    }
    let _remove = Remove;
    let g = ground();
    g.kubectl(
        &["create", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n  labels: {{{}: \"true\"}}\n",
            common::EXTERNAL
        )),
    );
    let status = |allocatable: &str| {
        g.ok(&[
            "patch",
            "node",
            NODE,
            "--subresource=status",
            "--type=merge",
            "-p",
            &format!(r#"{{"status":{{"capacity":{allocatable},"allocatable":{allocatable}}}}}"#),
        ]);
    };
    status(r#"{"cpu":"2","memory":"2Gi","pods":"10"}"#);
    let in_slurm = async |cpus: u32, gpus: u64| {
        eventually(
            &format!("{NODE} in Slurm with {cpus} CPUs and {gpus} GPUs, in service"),
            Duration::from_secs(60),
            || async {
                let n = slurm.get_node(NODE).await.ok()?.into_value();
                (n.cpus == cpus && n.gpus() == gpus && n.memory_mb == 2048 && !n.is_drain())
                    .then_some(n)
            },
        )
        .await
    };
    in_slurm(2, 0).await;
    status(r#"{"cpu":"3","memory":"2Gi","pods":"10","nvidia.com/gpu":"2"}"#);
    let resized = in_slurm(3, 2).await;
    assert_eq!(resized.gres.as_deref(), Some("gpu:2"), "{resized:?}");
    assert!(
        env.bridge_log().contains("the node's size changed"),
        "the bridge says why it drains the node"
    );
    // Unlabelled, it leaves Slurm (idle: at once), so that no later job goes to a node with
    // no kubelet.
    g.ok(&["label", "node", NODE, &format!("{}-", common::EXTERNAL)]);
    eventually(
        &format!("{NODE} gone from Slurm"),
        Duration::from_secs(60),
        || async { slurm.get_node(NODE).await.is_err().then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn slurm_places_pods() {
    let mut env = TestEnv::new("bridge");
    let slurm = env.slurm();
    env.label_nodes();
    env.start_bridge("exclusive: false\n");
    external_nodes(&env, &slurm).await;

    // A bare pod: its job runs where the pod is bound, with the annotations' fields.
    env.apply(&pod(
        "hello",
        "slurmjob.slinky.slurm.net/job-name: hello-bridge, slurmjob.slinky.slurm.net/timelimit: '10'",
        "",
    ));
    env.wait_for(
        "pod/hello",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    let node = env.get("pod/hello", "{.spec.nodeName}");
    let id: u32 = env
        .get(
            "pod/hello",
            "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
        )
        .parse()
        .expect("the pod carries its job id");
    let job = slurm.get_job(id).await.unwrap().into_value();
    assert_eq!(job.state, JobState::Running, "{job:?}");
    assert_eq!(job.nodes.as_deref(), Some(node.as_str()));
    assert_eq!(job.name, "hello-bridge");
    assert!(job.is_external(), "{job:?}");
    assert_eq!(
        job.admin_comment.as_deref(),
        Some(
            format!(
                r#"{{"pods":["{}/hello"],"bridge":"kubernetes"}}"#,
                env.ns.name
            )
            .as_str()
        )
    );
    assert_eq!(
        env.get(
            "pod/hello",
            "{.metadata.annotations.slinky\\.slurm\\.net/slurm-node}"
        ),
        node
    );

    // The pod ends: its job ends, and the finalizer lets the pod go.
    env.ground_delete("pod/hello");
    eventually("hello's job to end", Duration::from_secs(30), || async {
        let job = slurm.get_job(id).await.ok()?.into_value();
        job.state.is_finished().then_some(())
    })
    .await;

    // A pod that tolerates the bridge's node taint already, as its webhook makes pods: bound
    // without waiting for its job label, which follows with the finalizer; no second toleration.
    env.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: tolerating
spec:
  schedulerName: {SCHEDULER}
  terminationGracePeriodSeconds: 1
  tolerations:
  - {{key: {MANAGED_NODE}, operator: Equal, value: {SCHEDULER}, effect: NoExecute}}
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
    resources:
      requests: {{cpu: "1", memory: 64Mi}}
"#
    ));
    env.wait_for(
        "pod/tolerating",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    env.wait_for(
        "pod/tolerating",
        "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
        Duration::from_secs(30),
        |job| job.parse::<u32>().is_ok(),
    );
    env.wait_for(
        "pod/tolerating",
        "{.metadata.finalizers}",
        Duration::from_secs(30),
        |f| f.contains("scheduler.slinky.slurm.net/finalizer"),
    );
    assert_eq!(
        env.get(
            "pod/tolerating",
            &format!("{{.spec.tolerations[?(@.key==\"{MANAGED_NODE}\")].effect}}")
        ),
        "NoExecute",
        "one toleration of the bridge's taint"
    );
    env.ground_delete("pod/tolerating");

    // GPUs (the ground's nodes have 2 each, `nvidia.com/gpu`): the external nodes are
    // registered with them (Gres=gpu:2), a 2-GPU pod and a 1-GPU pod take two nodes, and a
    // second 1-GPU pod packs beside the first.
    let added = Instant::now();
    for node in external_nodes(&env, &slurm).await {
        assert_eq!(node.gres.as_deref(), Some("gpu:2"), "{node:?}");
    }
    env.apply(&format!(
        "{}---\n{}",
        gpu_pod("gpu-2", 2),
        gpu_pod("gpu-1", 1)
    ));
    let (two, one) = (
        env.running_on("gpu-2", Duration::from_secs(60)),
        env.running_on("gpu-1", Duration::from_secs(60)),
    );
    assert_ne!(two, one, "2 + 1 GPUs do not fit on a node of 2");
    env.apply(&gpu_pod("gpu-1b", 1));
    assert_eq!(
        env.running_on("gpu-1b", Duration::from_secs(60)),
        one,
        "packed beside the 1-GPU pod"
    );
    for (pod, gpus) in [("gpu-2", 2), ("gpu-1", 1), ("gpu-1b", 1)] {
        let job = slurm.get_job(env.job_id(pod)).await.unwrap().into_value();
        assert_eq!(
            job.tres_per_node.as_deref(),
            Some(format!("gres/gpu={gpus}").as_str())
        );
    }
    let used = slurm.get_node(&one).await.unwrap().into_value();
    assert!(
        used.gres_used
            .as_deref()
            .is_some_and(|g| g.starts_with("gpu:2")),
        "{used:?}"
    );
    delete_pods(&env, &["gpu-2", "gpu-1", "gpu-1b"]);
    eprintln!("GPUs: {:.1} s", added.elapsed().as_secs_f64());

    // A node whose device plugin publishes its GPUs after the node was registered (the usual
    // order), and whose CPUs change: its Slurm node follows, drained, deleted while idle and
    // registered again, and is back in service. (A Node object with no kubelet: the bridge
    // reads only its labels and status.)
    let added = Instant::now();
    late_node_follows_its_size(&env, &slurm).await;
    eprintln!("sizes followed: {:.1} s", added.elapsed().as_secs_f64());

    // Kubernetes-side fit: a pod bound straight to a node (as a DaemonSet's are, Slurm knows
    // nothing of it) takes 3 of its 4 CPUs; a 2-CPU pod of the bridge is placed elsewhere, its
    // job excluding that node, and never fails with OutOfcpu.
    let added = Instant::now();
    let full = env.nodes[1].clone();
    env.apply(&daemon_pod(&full, "3"));
    assert_eq!(env.running_on("daemon", Duration::from_secs(60)), full);
    env.apply(&sized_pod("fit", "2", ""));
    let placed = env.running_on("fit", Duration::from_secs(60));
    assert_ne!(placed, full, "placed beside a pod it does not fit beside");
    let job = slurm.get_job(env.job_id("fit")).await.unwrap().into_value();
    let excluded =
        slurm_client::hostlist::expand(job.excluded_nodes.as_deref().unwrap_or_default()).unwrap();
    assert!(excluded.contains(&full), "{excluded:?} lacks {full}");
    for pod in ["daemon", "fit"] {
        assert_eq!(
            env.get(&format!("pod/{pod}"), "{.status.phase} {.status.reason}"),
            "Running ",
            "{pod}"
        );
    }
    let reasons = env.get("events", "{.items[*].reason}");
    assert!(
        !reasons.split_whitespace().any(|r| r.starts_with("OutOf")),
        "{reasons}"
    );
    delete_pods(&env, &["daemon", "fit"]);
    eprintln!(
        "Kubernetes-side fit: {:.1} s",
        added.elapsed().as_secs_f64()
    );

    // /metrics: each bound pod counted once (hello, tolerating, the GPU pods, fit), and nothing
    // failed.
    let scraped = env.metrics();
    let bound = |m: &common::Metrics| {
        m.sum("slurm_bridge_actions_total", &[("operation", "bind")])
            - m.sum("slurm_bridge_action_errors_total", &[("operation", "bind")])
    };
    assert_eq!(bound(&scraped), 6.0, "{}", scraped.0);
    assert_eq!(
        scraped.sum("slurm_bridge_actions_total", &[("operation", "submit")]),
        6.0,
        "{}",
        scraped.0
    );
    for histogram in [
        "slurm_bridge_pod_bind_seconds_count",
        "slurm_bridge_pod_bind_after_job_start_seconds_count",
    ] {
        assert_eq!(scraped.sum(histogram, &[]), 6.0, "{}", scraped.0);
    }
    assert_eq!(
        scraped.sum("slurm_bridge_action_errors_total", &[]),
        0.0,
        "{}",
        scraped.0
    );
    assert!(
        scraped.sum(
            "slurm_bridge_slurm_requests_total",
            &[("operation", "submit_job")]
        ) >= 5.0
    );

    // Several pods that each fit beside a pod Slurm does not know of, but not all together:
    // the daemon takes 1 of the node's 4 CPUs, and four 1-CPU pods that may run there alone
    // come at once. Slurm sees 4 free CPUs and may start all four jobs there; the bridge binds
    // three, and cancels the fourth's job to submit it again (a refit): that pod waits, never
    // fails with OutOfcpu, and runs there once one of the three has ended.
    let added = Instant::now();
    env.apply(&daemon_pod(&full, "1"));
    assert_eq!(env.running_on("daemon", Duration::from_secs(60)), full);
    let small: Vec<String> = (0..4)
        .map(|i| {
            pod(
                &format!("small-{i}"),
                "",
                &format!("kubernetes.io/hostname: {full}"),
            )
        })
        .collect();
    env.apply(&small.join("---\n"));
    let phases = || {
        (0..4)
            .map(|i| env.get(&format!("pod/small-{i}"), "{.status.phase}"))
            .collect::<Vec<_>>()
    };
    let left_out = eventually(
        "three of the four on the node",
        Duration::from_secs(90),
        || async {
            let phases = phases();
            let running = phases.iter().filter(|p| *p == "Running").count();
            let waiting = (0..4).find(|i| {
                phases[*i] == "Pending"
                    && env.get(
                        &format!("pod/small-{i}"),
                        "{.status.conditions[?(@.type==\"SlurmJob\")].reason}",
                    ) == "Unschedulable"
            });
            (running == 3).then_some(waiting).flatten()
        },
    )
    .await;
    for i in (0..4).filter(|i| *i != left_out) {
        assert_eq!(env.get(&format!("pod/small-{i}"), "{.spec.nodeName}"), full);
    }
    let waiting = format!("small-{left_out}");
    let first = (0..4).find(|i| *i != left_out).unwrap();
    delete_pods(&env, &[&format!("small-{first}")]);
    assert_eq!(
        env.running_on(&waiting, Duration::from_secs(90)),
        full,
        "runs beside the daemon once there is room"
    );
    let reasons = env.get("events", "{.items[*].reason}");
    assert!(
        !reasons.split_whitespace().any(|r| r.starts_with("OutOf")),
        "{reasons}"
    );
    for i in (0..4).filter(|i| *i != first) {
        assert_eq!(
            env.get(
                &format!("pod/small-{i}"),
                "{.status.phase} {.status.reason}"
            ),
            "Running ",
            "small-{i}"
        );
    }
    let others: Vec<String> = (0..4)
        .filter(|i| *i != first)
        .map(|i| format!("small-{i}"))
        .chain(["daemon".to_string()])
        .collect();
    delete_pods(&env, &others.iter().map(String::as_str).collect::<Vec<_>>());
    eprintln!(
        "several pods beside a daemon: {:.1} s, refits {}",
        added.elapsed().as_secs_f64(),
        env.metrics()
            .sum("slurm_bridge_actions_total", &[("operation", "refit")])
    );

    // Packing: four 1-CPU pods that Kubernetes allows on one 4-CPU node share it.
    let target = env.nodes[0].clone();
    for i in 0..4 {
        env.apply(&pod(
            &format!("pack-{i}"),
            "",
            &format!("kubernetes.io/hostname: {target}"),
        ));
    }
    for i in 0..4 {
        env.wait_for(
            &format!("pod/pack-{i}"),
            "{.status.phase}",
            Duration::from_secs(60),
            |p| p == "Running",
        );
        assert_eq!(
            env.get(&format!("pod/pack-{i}"), "{.spec.nodeName}"),
            target
        );
    }
    let ids: Vec<u32> = (0..4)
        .map(|i| {
            env.get(
                &format!("pod/pack-{i}"),
                "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
            )
            .parse()
            .unwrap()
        })
        .collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        4,
        "one job per pod: {ids:?}"
    );
    for id in &ids {
        let job = slurm.get_job(*id).await.unwrap().into_value();
        assert_eq!(
            (job.state, job.nodes.as_deref()),
            (JobState::Running, Some(target.as_str()))
        );
    }

    // scancel ends the pod of the job.
    slurm.cancel_job(ids[0]).await.unwrap();
    env.wait_for(
        "pods",
        "{.items[*].metadata.name}",
        Duration::from_secs(30),
        |names| !names.split_whitespace().any(|n| n == "pack-0"),
    );

    // slurmrestd away for a minute: nothing is deleted.
    let before = env.metrics();
    env.scale_restapi(0);
    tokio::time::sleep(Duration::from_secs(60)).await;
    for i in 1..4 {
        let name = format!("pod/pack-{i}");
        assert_eq!(
            env.get(&name, "{.status.phase}"),
            "Running",
            "{}",
            env.bridge_log()
        );
        assert_eq!(
            env.get(&name, "{.metadata.deletionTimestamp}"),
            "",
            "{name} was deleted while slurmrestd was away"
        );
    }
    env.scale_restapi(1);
    // The metrics say so: failed Slurm calls, no pod bound, deleted or cancelled meanwhile.
    let after = env.metrics();
    let errors = |m: &common::Metrics| m.sum("slurm_bridge_slurm_request_errors_total", &[]);
    assert!(errors(&after) > errors(&before), "{}", after.0);
    for action in ["bind", "delete", "cancel", "submit"] {
        let count =
            |m: &common::Metrics| m.sum("slurm_bridge_actions_total", &[("operation", action)]);
        assert_eq!(count(&after), count(&before), "{action}: {}", after.0);
    }

    // A restarted bridge finds its jobs again: no second job for any pod, and new pods still run.
    env.bridge().restart();
    env.apply(&pod("after-restart", "", ""));
    env.wait_for(
        "pod/after-restart",
        "{.status.phase}",
        Duration::from_secs(90),
        |p| p == "Running",
    );
    let jobs = slurm
        .list_jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_value()
        .jobs;
    for i in 1..4 {
        let needle = format!("{}/pack-{i}\"", env.ns.name);
        let count = jobs
            .iter()
            .filter(|j| !j.state.is_finished())
            .filter(|j| {
                j.admin_comment
                    .as_deref()
                    .is_some_and(|c| c.contains(&needle))
            })
            .count();
        assert_eq!(count, 1, "pack-{i} has {count} live jobs");
    }

    // Crashes at any point (SIGKILL while pods are being submitted, labelled and bound): after
    // the last restart every pod runs with exactly one live job, and no job is left without pods.
    let storm: Vec<String> = (0..6).map(|i| pod(&format!("storm-{i}"), "", "")).collect();
    env.apply(&storm.join("---\n"));
    for step in ["submitted", "bound"] {
        crash_at(&mut env, step).await;
    }
    for i in 0..6 {
        env.wait_for(
            &format!("pod/storm-{i}"),
            "{.status.phase}",
            Duration::from_secs(90),
            |p| p == "Running",
        );
    }
    let live: Vec<_> = slurm
        .list_jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_value()
        .jobs
        .into_iter()
        .filter(|j| !j.state.is_finished())
        .collect();
    for i in 0..6 {
        let needle = format!("{}/storm-{i}\"", env.ns.name);
        let ids: Vec<u32> = live
            .iter()
            .filter(|j| {
                j.admin_comment
                    .as_deref()
                    .is_some_and(|c| c.contains(&needle))
            })
            .map(|j| j.id)
            .collect();
        let label: u32 = env
            .get(
                &format!("pod/storm-{i}"),
                "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
            )
            .parse()
            .unwrap();
        assert_eq!(
            ids,
            vec![label],
            "storm-{i}: live jobs {ids:?}, label {label}"
        );
    }
    eventually(
        "no live job without pods",
        Duration::from_secs(60),
        || async {
            let pods = env.get("pods", "{.items[*].metadata.name}");
            let pods: BTreeSet<String> = pods
                .split_whitespace()
                .map(|p| format!("{}/{p}\"", env.ns.name))
                .collect();
            let jobs = slurm
                .list_jobs(&JobQuery::default())
                .await
                .ok()?
                .into_value()
                .jobs;
            jobs.iter()
                .filter(|j| !j.state.is_finished())
                .all(|j| {
                    j.admin_comment
                        .as_deref()
                        .is_none_or(|c| pods.iter().any(|p| c.contains(p.as_str())))
                })
                .then_some(())
        },
    )
    .await;
}
