//! Persistent volumes on the test ground against a real Slurm 26.05: a `WaitForFirstConsumer`
//! claim is provisioned where Slurm placed its pod (kube-scheduler's handshake: the
//! `volume.kubernetes.io/selected-node` annotation, then the pod bound once the claim is); the
//! volume's node affinity then keeps every later pod of that claim on its node (the job's
//! `excluded_nodes` names the others); a pod whose claim does not exist waits, saying so, and
//! runs once it does.

use crate::common;

use std::time::{Duration, Instant};

use common::{IMAGE, SCHEDULER, TestEnv, external_nodes, ground};

/// A StorageClass that binds late, as a local-volume provisioner's does (cluster-scoped: named
/// for the test's namespace).
fn storage_class(name: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\nprovisioner: example.com/local\nvolumeBindingMode: WaitForFirstConsumer\nreclaimPolicy: Delete\n"
    )
}

fn claim(name: &str, class: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\nspec:\n  storageClassName: {class}\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {{storage: 1Gi}}\n"
    )
}

/// A 1-CPU pod of the bridge that mounts `claim` at /data and writes its node's name there.
fn pod_with_claim(name: &str, claim: &str) -> String {
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
    command: [sh, -c, "echo {name} >> /data/log; sleep 3600"]
    resources:
      requests: {{cpu: "1", memory: 64Mi}}
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - name: data
    persistentVolumeClaim: {{claimName: {claim}}}
"#
    )
}

/// Checks that `claim` was given `node` and is bound to a volume of that node; gives the volume.
fn assert_provisioned_on(env: &TestEnv, claim: &str, node: &str) -> String {
    let what = format!("pvc/{claim}");
    assert_eq!(
        env.get(
            &what,
            "{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}"
        ),
        node,
        "{claim} was given the pod's node"
    );
    assert_eq!(env.get(&what, "{.status.phase}"), "Bound");
    let volume = env.get(&what, "{.spec.volumeName}");
    let affinity = ground().ok(&[
        "get",
        "pv",
        &volume,
        "-o",
        "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}",
    ]);
    assert_eq!(affinity.trim(), node, "{volume}'s node affinity");
    volume
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_follow_slurms_choice() {
    let mut env = TestEnv::new("volumes");
    let slurm = env.slurm();
    env.label_nodes();
    env.start_bridge("exclusive: false\n");
    external_nodes(&env, &slurm).await;
    let class = format!("late-{}", env.ns.name);
    env.apply(&storage_class(&class));

    // A WaitForFirstConsumer claim waits for its first pod; Slurm places the pod, the claim
    // is provisioned there, and then the pod is bound.
    let start = Instant::now();
    env.apply(&claim("data", &class));
    std::thread::sleep(Duration::from_secs(2));
    // (The test ground's API server leaves a new claim's phase empty, Kubernetes' says Pending.)
    assert_eq!(
        env.get("pvc/data", "{.status.phase} {.spec.volumeName}")
            .trim(),
        "",
        "a WaitForFirstConsumer claim waits for its pod"
    );
    env.apply(&pod_with_claim("first", "data"));
    let node = env.running_on("first", Duration::from_secs(90));
    let volume = assert_provisioned_on(&env, "data", &node);
    let job = slurm
        .get_job(env.job_id("first"))
        .await
        .unwrap()
        .into_value();
    assert_eq!(job.nodes.as_deref(), Some(node.as_str()));
    // Events are published without waiting for them.
    env.wait_for(
        "events.events.k8s.io",
        "{.items[*].reason}",
        Duration::from_secs(15),
        |r| r.contains("SelectedNode"),
    );
    eprintln!(
        "WaitForFirstConsumer: {node} ({volume}) in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    // The claim is the node's now: a second pod of it goes only there.
    let start = Instant::now();
    env.apply(&pod_with_claim("second", "data"));
    assert_eq!(
        env.running_on("second", Duration::from_secs(90)),
        node,
        "second follows its volume"
    );
    let job = slurm
        .get_job(env.job_id("second"))
        .await
        .unwrap()
        .into_value();
    let excluded =
        slurm_client::hostlist::expand(job.excluded_nodes.as_deref().unwrap_or_default()).unwrap();
    let others: Vec<&String> = env.nodes.iter().filter(|n| **n != node).collect();
    for other in &others {
        assert!(
            excluded.contains(other),
            "{excluded:?} lacks {other}, which the volume rules out"
        );
    }
    assert!(!excluded.contains(&node), "{excluded:?}");
    let log = ground().ok(&[
        "exec",
        "-n",
        &env.ns.name,
        "second",
        "--",
        "cat",
        "/data/log",
    ]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["first", "second"],
        "one volume"
    );
    eprintln!(
        "node affinity: second on {node} in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    // A claim that does not exist: the pod waits, saying so, and no job is submitted.
    let start = Instant::now();
    env.apply(&pod_with_claim("waiter", "later"));
    let message = env.wait_for(
        "pod/waiter",
        "{.status.conditions[?(@.type==\"SlurmJob\")].reason} {.status.conditions[?(@.type==\"SlurmJob\")].message}",
        Duration::from_secs(30),
        |c| c.starts_with("WaitingForVolume "),
    );
    assert!(
        message.contains("persistentvolumeclaim \"later\" not found"),
        "{message}"
    );
    assert_eq!(
        env.get(
            "pod/waiter",
            "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}"
        ),
        "",
        "no job while the claim is missing"
    );
    env.apply(&claim("later", &class));
    let there = env.running_on("waiter", Duration::from_secs(90));
    assert_provisioned_on(&env, "later", &there);
    eprintln!(
        "missing claim: the pod waited, then ran; {:.1} s from its creation",
        start.elapsed().as_secs_f64()
    );

    drop(env);
    ground().ok(&["delete", "storageclass", &class, "--ignore-not-found"]);
}
