//! End to end on the test ground, against real Slurm 26.05 daemons in pods: Slinky-style
//! manifests (Controller + RestApi + NodeSet of 3 + Token) become a working cluster whose Slurm
//! nodes' comments name their pods, and the
//! NodeSet's scale-in drains before it deletes, keeps busy nodes, leaves an admin's drain alone
//! and keeps every pod while Slurm cannot be asked.

use crate::common;

use std::time::{Duration, Instant};

use common::workers::{LIMIT, NODESET, node, pods, scale, slurm, wait_node, wait_pods};
use common::{TestEnv, ground};

#[tokio::test(flavor = "multi_thread")]
async fn slinky_manifests_make_a_working_cluster_that_scales_in_safely() {
    let mut env = TestEnv::new("op-cluster");
    env.start_operator(&["--slurm-poll", "1s"]);
    env.apply_manifest("cluster.yaml");

    env.wait_for(
        "statefulset/slurm-controller",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    env.wait_for(
        "deployment/slurm-restapi",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );

    // The Token's JWT lists the nodes through the RestApi Service; they are the pods' hostnames.
    let client = slurm(&env);
    let deadline = Instant::now() + LIMIT;
    let names = loop {
        let nodes = client
            .list_nodes(&Default::default())
            .await
            .map(|r| r.value.nodes);
        let mut names: Vec<String> = nodes.iter().flatten().map(|n| n.name.clone()).collect();
        names.sort();
        if names == ["slinky-0", "slinky-1", "slinky-2"] || Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(names, ["slinky-0", "slinky-1", "slinky-2"]);
    for n in &names {
        wait_node(&client, n, "idle", |n| {
            n.state.as_str() == "IDLE" && !n.is_drain()
        })
        .await;
    }

    // Each Slurm node's comment names its pod, as Slinky writes it.
    let uid = ground().get(env.name(), &format!("nodeset/{NODESET}"), "{.metadata.uid}");
    for (i, n) in names.iter().enumerate() {
        let pod = format!("{NODESET}-{i}");
        let k8s_node = ground().get(env.name(), &format!("pod/{pod}"), "{.spec.nodeName}");
        let want = format!(
            r#"{{"namespace":"{}","podName":"{pod}","node":"{k8s_node}","nodeSetName":"{NODESET}","nodeSetUID":"{uid}"}}"#,
            env.name()
        );
        wait_node(&client, n, "commented with its pod", |n| {
            n.comment.as_deref() == Some(want.as_str())
        })
        .await;
    }

    // sbatch from inside the cluster runs on all three workers.
    let (code, out) = env.run_in_cluster(
        "slurm",
        "sbatch --wait -N3 -o /dev/null --wrap 'srun hostname' && sinfo",
    );
    assert_eq!(code, 0, "{out}");

    // Slurm state reaches the pods as conditions and the NodeSet status as counters.
    env.wait_for(
        &format!("pod/{NODESET}-0"),
        "{.status.conditions[?(@.type==\"SlurmNodeStateIdle\")].status}",
        LIMIT,
        |s| s == "True",
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.slurmIdle}",
        LIMIT,
        |s| s == "3",
    );

    // Scale-in 3 → 1 while a job runs on slinky-2 (the first victim: highest ordinal) and an
    // admin has drained slinky-0 for maintenance.
    let (code, out) = env.run_in_cluster(
        "slurm",
        "sbatch -w slinky-2 -o /dev/null --parsable --wrap 'sleep 600'",
    );
    assert_eq!(code, 0, "{out}");
    let job: u32 = out
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no job id in {out:?}"));
    wait_node(&client, "slinky-2", "allocated", |n| n.is_busy()).await;
    client
        .drain_node("slinky-0", "admin: disk check")
        .await
        .expect("admin drain");

    // A running job gives slinky-2 a pod-deadline, which puts it after idle pods in the scale-in
    // order; a deletion cost makes it the first victim again, so that the busy case is tested.
    ground().ok(&[
        "annotate",
        "-n",
        env.name(),
        &format!("pod/{NODESET}-2"),
        "nodeset.slinky.slurm.net/pod-deletion-cost=-100",
    ]);
    scale(&env, 1);
    // slinky-1 is idle: drained, then deleted.
    wait_pods(&env, &[&format!("{NODESET}-0"), &format!("{NODESET}-2")]);
    // slinky-2 runs a job: drained with Slinky's reason, and its pod stays.
    let busy = wait_node(&client, "slinky-2", "draining", |n| n.is_drain()).await;
    assert_eq!(
        busy.reason.as_deref(),
        Some(
            format!(
                "slurm-operator: Pod ({}/{NODESET}-2) is pending termination for scale-in",
                env.name()
            )
            .as_str()
        )
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pods(&env),
        [format!("{NODESET}-0"), format!("{NODESET}-2")],
        "a busy node's pod was deleted"
    );
    env.wait_for(
        &format!("pod/{NODESET}-2"),
        "{.metadata.labels.nodeset\\.slinky\\.slurm\\.net/pod-protect}",
        LIMIT,
        |v| v == "true",
    );
    // The admin's drain on the pod that stays is untouched.
    assert_eq!(
        node(&client, "slinky-0").await.reason.as_deref(),
        Some("admin: disk check")
    );

    // The job ends: the pod goes.
    client.cancel_job(job).await.expect("scancel");
    wait_pods(&env, &[&format!("{NODESET}-0")]);

    // Slurm unreachable (slurmrestd scaled away): a scale-in deletes nothing.
    scale(&env, 3);
    wait_pods(
        &env,
        &[
            &format!("{NODESET}-0"),
            &format!("{NODESET}-1"),
            &format!("{NODESET}-2"),
        ],
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        "deployment/slurm-restapi",
        "--replicas=0",
    ]);
    env.wait_for(
        "deployment/slurm-restapi",
        "{.status.replicas}",
        LIMIT,
        |r| r == "0" || r.is_empty(),
    );
    scale(&env, 2);
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.conditions[?(@.type==\"Synced\")].status}",
        LIMIT,
        |s| s == "False",
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        pods(&env).len(),
        3,
        "a pod was deleted while Slurm could not be asked"
    );
    // Back: the scale-in proceeds through a drain. The admin's drain on slinky-0 still stands.
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        "deployment/slurm-restapi",
        "--replicas=1",
    ]);
    wait_pods(&env, &[&format!("{NODESET}-0"), &format!("{NODESET}-1")]);
    let client = slurm(&env);
    assert_eq!(
        node(&client, "slinky-0").await.reason.as_deref(),
        Some("admin: disk check")
    );
    common::end_state::assert_full_service(&env, &client, "the scale-ins", &[]).await;
}
