//! Gangs and nodes on the test ground against a real Slurm 26.05: a coscheduling PodGroup runs as
//! one job on as many nodes as it has pods, a second one waits in Slurm (its pending reason on the
//! pods) until the first ends, its pending job's excluded nodes following a taint that comes and
//! goes meanwhile; the PodGroups' status follows; a pod whose PodGroup does not exist yet waits
//! for it; a cordon drains the Slurm node and uncordon resumes it; a node that
//! loses the external-node label is drained, and deleted from Slurm once idle; an external
//! node's features and topology follow its annotations; the seed's demo (a pod without requests,
//! then a PodGroup of a ReplicaSet's pods) runs the gang beside that pod.

use crate::common;

use std::time::Duration;

use common::{
    IMAGE, KEEP_OFF, SCHEDULER, TestEnv, eventually, external_nodes, ground, install_crd,
    slurm_nodes,
};
use slurm_client::JobState;

fn member(group: &str, name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{scheduling.x-k8s.io/pod-group: {group}}}
spec:
  schedulerName: {SCHEDULER}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
    resources:
      requests: {{cpu: "3", memory: 64Mi}}
"#
    )
}

fn group(name: &str, min_member: u32) -> String {
    format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: {name}\nspec:\n  minMember: {min_member}\n"
    )
}

fn job_of(env: &TestEnv, pod: &str) -> String {
    env.get(
        &format!("pod/{pod}"),
        "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn gangs_wait_for_each_other_and_cordons_drain() {
    let g = ground();
    install_crd("podgroup-crd.yaml");
    let mut env = TestEnv::new("gang");
    let slurm = env.slurm();
    env.label_nodes();
    env.start_bridge("");
    external_nodes(&env, &slurm).await;
    // Slurm's nodes get the bridge's taint (Slinky's), which keeps other schedulers' pods off.
    for node in &env.nodes {
        let what = format!("node/{node}");
        env.wait_for(&what, TAINT, Duration::from_secs(30), |v| v == SCHEDULER);
    }

    // Gang A: two 3-CPU pods, whole nodes (the default), one job on two nodes.
    env.apply(&group("a", 2));
    env.apply(&member("a", "a-0"));
    env.apply(&member("a", "a-1"));
    for pod in ["a-0", "a-1"] {
        env.wait_for(
            &format!("pod/{pod}"),
            "{.status.phase}",
            Duration::from_secs(60),
            |p| p == "Running",
        );
    }
    let job_a = job_of(&env, "a-0");
    // No webhook here: the bridge gave its pods the toleration of its taint.
    assert_eq!(
        env.get(
            "pod/a-0",
            "{.spec.tolerations[?(@.key==\"slinky.slurm.net/managed-node\")].value}"
        ),
        SCHEDULER
    );
    assert_eq!(job_a, job_of(&env, "a-1"), "one job for the gang");
    assert_ne!(
        env.get("pod/a-0", "{.spec.nodeName}"),
        env.get("pod/a-1", "{.spec.nodeName}")
    );
    let job = slurm
        .get_job(job_a.parse().unwrap())
        .await
        .unwrap()
        .into_value();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(
        slurm_client::hostlist::expand(job.nodes.as_deref().unwrap())
            .unwrap()
            .len(),
        2
    );

    // The bridge writes the PodGroup's status, as scheduler-plugins' controller would.
    env.wait_for(
        "podgroup/a",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    assert_eq!(
        env.get(
            "podgroup/a",
            "{.status.scheduled} {.status.running} {.status.failed}"
        ),
        "2 2 0"
    );

    // Gang B needs two whole nodes; one is left: it waits in Slurm, and the pods say why.
    env.apply(&group("b", 2));
    env.apply(&member("b", "b-0"));
    env.apply(&member("b", "b-1"));
    env.wait_for(
        "pod/b-0",
        "{.status.conditions[?(@.type==\"SlurmJob\")].message}",
        Duration::from_secs(60),
        |m| m.starts_with("waiting in Slurm: job") && m.contains("Resources"),
    );
    assert_eq!(env.get("pod/b-1", "{.spec.nodeName}"), "");

    // A node tainted while gang B waits is excluded from its pending job, and taken out of the
    // exclusions when the taint goes.
    let job_b: u32 = job_of(&env, "b-0").parse().unwrap();
    let busy_a = [
        env.get("pod/a-0", "{.spec.nodeName}"),
        env.get("pod/a-1", "{.spec.nodeName}"),
    ];
    let free = env
        .nodes
        .iter()
        .find(|n| !busy_a.contains(n))
        .unwrap()
        .clone();
    let excluded = |wanted: bool| {
        let (slurm, free) = (slurm.clone(), free.clone());
        async move {
            eventually(
                "the pending job's excluded nodes follow the taint",
                Duration::from_secs(30),
                || async {
                    let job = slurm.get_job(job_b).await.ok()?.into_value();
                    let list = job.excluded_nodes.unwrap_or_default();
                    let has = slurm_client::hostlist::expand(&list)
                        .unwrap_or_default()
                        .contains(&free);
                    (has == wanted).then_some(())
                },
            )
            .await
        }
    };
    let taint = format!("{KEEP_OFF}=b:NoSchedule");
    g.ok(&["taint", "node", &free, &taint]);
    excluded(true).await;
    g.ok(&["taint", "node", &free, &format!("{taint}-")]);
    excluded(false).await;
    // Again, and gang B starts on the nodes gang A leaves, not on the tainted one.
    g.ok(&["taint", "node", &free, &taint]);
    excluded(true).await;

    // Gang A ends; gang B runs.
    env.ground_delete("pod/a-0");
    env.ground_delete("pod/a-1");
    for pod in ["b-0", "b-1"] {
        env.wait_for(
            &format!("pod/{pod}"),
            "{.status.phase}",
            Duration::from_secs(90),
            |p| p == "Running",
        );
        assert_ne!(env.get(&format!("pod/{pod}"), "{.spec.nodeName}"), free);
    }
    g.ok(&["taint", "node", &free, &format!("{taint}-")]);
    env.wait_for(
        "podgroup/b",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );

    // A pod naming a PodGroup that does not exist yet waits whole (its size is unknown), and
    // runs once the PodGroup is made.
    env.apply(&member("c", "c-0"));
    env.wait_for(
        "pod/c-0",
        "{.status.conditions[?(@.type==\"SlurmJob\")].reason}",
        Duration::from_secs(30),
        |r| r == "WaitingForPodGroup",
    );
    assert_eq!(job_of(&env, "c-0"), "", "no job before the PodGroup exists");
    env.apply(&group("c", 1));
    env.wait_for("pod/c-0", "{.status.phase}", Duration::from_secs(60), |p| {
        p == "Running"
    });
    env.wait_for(
        "podgroup/c",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    env.ground_delete("pod/c-0");

    // A cordon drains the Slurm node with the bridge's reason; uncordon resumes it.
    let node = env.nodes.last().unwrap().clone();
    g.ok(&["cordon", &node]);
    let reason = eventually(
        "the cordoned node drained",
        Duration::from_secs(30),
        || async {
            let n = slurm.get_node(&node).await.ok()?.into_value();
            n.is_drain().then(|| n.reason.clone().unwrap_or_default())
        },
    )
    .await;
    g.ok(&["uncordon", &node]);
    assert_eq!(reason, format!("slurm-bridge: Node ({node}) was cordoned"));
    eventually(
        "the uncordoned node resumed",
        Duration::from_secs(30),
        || async {
            let n = slurm.get_node(&node).await.ok()?.into_value();
            (!n.is_drain()).then_some(())
        },
    )
    .await;

    // The label goes from a busy node: drained with the bridge's reason, kept while its job
    // runs, deleted from Slurm once idle.
    let busy = env.get("pod/b-0", "{.spec.nodeName}");
    g.ok(&["label", "node", &busy, &format!("{}-", common::EXTERNAL)]);
    let reason = eventually(
        "the unlabelled node drained",
        Duration::from_secs(30),
        || async {
            let n = slurm.get_node(&busy).await.ok()?.into_value();
            n.is_drain().then(|| n.reason.clone().unwrap_or_default())
        },
    )
    .await;
    assert!(reason.starts_with("slurm-bridge: "), "{reason}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        slurm.get_node(&busy).await.is_ok(),
        "a busy node was deleted from Slurm"
    );
    assert_eq!(env.get("pod/b-0", "{.status.phase}"), "Running");
    env.ground_delete("pod/b-0");
    env.ground_delete("pod/b-1");
    eventually(
        "the idle unlabelled node deleted from Slurm",
        Duration::from_secs(60),
        || async {
            let listed = slurm_nodes(&slurm).await?;
            (!listed.iter().any(|n| n.name == busy)).then_some(())
        },
    )
    .await;
    // No longer a Slurm node: the taint goes.
    env.wait_for(
        &format!("node/{busy}"),
        TAINT,
        Duration::from_secs(30),
        str::is_empty,
    );

    // The seed's demo on the two Slurm nodes left (4 CPUs, 8 GiB each), packing as the demo's
    // bridge does (`exclusive: false`, here by annotation): a pod without requests gets
    // defaultMemPerPod, not the node's memory, so a PodGroup of two 3-CPU pods that a
    // ReplicaSet makes runs beside it.
    let added = std::time::Instant::now();
    let packing = "slurmjob.slinky.slurm.net/exclusive: 'false'";
    env.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: lone
  annotations: {{{packing}}}
spec:
  schedulerName: {SCHEDULER}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
"#
    ));
    env.wait_for(
        "pod/lone",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    let lone = slurm
        .get_job(job_of(&env, "lone").parse().unwrap())
        .await
        .unwrap()
        .into_value();
    assert_eq!(lone.memory_per_node_mb.value(), Some(200), "{lone:?}");
    assert_eq!(lone.tres_allocated.memory_mb(), Some(200), "{lone:?}");
    env.apply(&format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: seed\n  annotations: {{{packing}}}\nspec:\n  minMember: 2\n"
    ));
    env.apply(&format!(
        r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: seed
spec:
  replicas: 2
  selector:
    matchLabels: {{app: seed}}
  template:
    metadata:
      labels: {{app: seed, scheduling.x-k8s.io/pod-group: seed}}
    spec:
      schedulerName: {SCHEDULER}
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {IMAGE}
        command: [sleep, "3600"]
        resources:
          requests: {{cpu: "3", memory: 64Mi}}
"#
    ));
    let seed = |path: &str| {
        let out = g.ok(&[
            "get",
            "pods",
            "-n",
            &env.ns.name,
            "-l",
            "app=seed",
            "-o",
            &format!("jsonpath={{range .items[*]}}{path} {{end}}"),
        ]);
        out.split_whitespace().map(String::from).collect::<Vec<_>>()
    };
    eventually(
        "the gang running beside the pod without requests",
        Duration::from_secs(60),
        || async { (seed("{.status.phase}") == ["Running", "Running"]).then_some(()) },
    )
    .await;
    assert_eq!(env.get("pod/lone", "{.status.phase}"), "Running");
    let mut nodes = seed("{.spec.nodeName}");
    nodes.sort();
    let lone_node = env.get("pod/lone", "{.spec.nodeName}");
    assert!(nodes.contains(&lone_node), "{nodes:?} beside {lone_node}");
    assert_ne!(nodes[0], nodes[1]);
    env.wait_for(
        "podgroup/seed",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    env.ground_delete("replicaset/seed");
    eprintln!(
        "the seed's sequence: {:.1} s",
        added.elapsed().as_secs_f64()
    );
}

/// The value of a node's managed-node taint.
const TAINT: &str = "{.spec.taints[?(@.key==\"slinky.slurm.net/managed-node\")].value}";

/// Two topologies: the default flat one, and a tree of two switches with no nodes yet, which
/// external nodes join by their annotation.
const TOPOLOGY: &str = "- topology: default
  cluster_default: true
  flat: true
- topology: topo-switch
  tree:
    switches:
      - switch: s1
      - switch: s2
";

#[tokio::test(flavor = "multi_thread")]
async fn external_nodes_follow_their_partitions_and_topology() {
    let g = ground();
    let mut env = TestEnv::with_topology("topo", TOPOLOGY);
    let slurm = env.slurm();
    let node = env.nodes[0].clone();
    g.ok(&[
        "annotate",
        "node",
        &node,
        "topology.slinky.slurm.net/spec=topo-switch:s1",
        "--overwrite",
    ]);
    env.label_nodes();
    env.start_bridge("");
    external_nodes(&env, &slurm).await;
    let read = || async { slurm.get_node(&node).await.ok().map(|n| n.into_value()) };
    // Registered in its switch.
    eventually("the node in switch s1", Duration::from_secs(30), || async {
        let n = read().await?;
        (n.topology.as_deref() == Some("topo-switch:s1")).then_some(())
    })
    .await;
    // Moved, and given a second partition (a feature), on the running node.
    g.ok(&[
        "annotate",
        "node",
        &node,
        "topology.slinky.slurm.net/spec=topo-switch:s2",
        "scheduler.slinky.slurm.net/external-node-partitions=slurm-bridge,gpu",
        "--overwrite",
    ]);
    eventually(
        "the node in switch s2 with feature gpu",
        Duration::from_secs(30),
        || async {
            let n = read().await?;
            let mut features = n.features.clone();
            features.sort();
            (n.topology.as_deref() == Some("topo-switch:s2")
                && features == ["gpu", "slurm-bridge"]
                && n.active_features.contains(&"gpu".to_string()))
            .then_some(())
        },
    )
    .await;
    // An empty annotation takes it out of every topology (an absent one leaves Slurm's alone).
    g.ok(&[
        "annotate",
        "node",
        &node,
        "topology.slinky.slurm.net/spec=",
        "--overwrite",
    ]);
    eventually(
        "the node out of the tree",
        Duration::from_secs(30),
        || async {
            let n = read().await?;
            n.topology.is_none().then_some(())
        },
    )
    .await;
    // Still a node Slurm places jobs on. (The annotations go with `env`.)
    assert!(read().await.is_some_and(|n| n.is_available()));
}
