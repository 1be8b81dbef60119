//! The bridge on the test ground against a real Slurm 26.05 (slurmctld and slurmrestd in pods,
//! external nodes for the ground's nodes): pods are placed by Slurm, bound where their job runs,
//! packed by their requests, ended with their job, and nothing is deleted while slurmrestd is
//! away or after the bridge restarts; crashes at any point leave one job per pod.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TestEnv, eventually, external_nodes, pod};
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
