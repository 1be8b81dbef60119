//! NodeSet `scalingMode: DaemonSet` end to end on the test ground: the main manifest with its
//! NodeSet switched to DaemonSet mode makes one worker per Kubernetes node, named after the
//! node in Slurm; a nodeSelector that leaves a node out drains its worker in Slurm before the
//! pod is deleted; a cordoned node keeps its worker, drained through the cordon sync; with
//! `pruneSlurmNodeRecords: NodeNotFound`, the Slurm record a renamed node's worker left behind
//! is deleted once slurmctld calls it down and not responding, and the record of a node that is
//! merely no longer selected is kept.
//!
//! The nodes are shared with other tests: the label key is this test's own and every label
//! and cordon is removed when the test ends, failed or not.

use crate::common;

use std::time::{Duration, Instant};

use common::workers::{slurm, wait_node};
use common::{TestEnv, ground};
use slurm_client::model::Node;

const NODESET: &str = "slurm-worker-slinky";
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const LIMIT: Duration = Duration::from_secs(180);

/// `cluster.yaml` with the NodeSet in DaemonSet mode pruning defunct node records, OnDelete so
/// that the nodeSelector change below does not also roll the pods, and slurmctld calling a
/// silent slurmd not responding after 10 s instead of 300.
fn manifest() -> String {
    let yaml = common::manifest("cluster.yaml");
    let conf = "    PartitionName=all Nodes=ALL";
    let prune = "pruneSlurmNodeRecords: Never";
    for needle in [
        "scalingMode: StatefulSet",
        "type: RollingUpdate",
        conf,
        prune,
    ] {
        assert_eq!(yaml.matches(needle).count(), 1, "cluster.yaml: {needle}");
    }
    yaml.replace("scalingMode: StatefulSet", "scalingMode: DaemonSet")
        .replace(prune, "pruneSlurmNodeRecords: NodeNotFound")
        .replace("type: RollingUpdate", "type: OnDelete")
        .replace(conf, &format!("    SlurmdTimeout=10\n{conf}"))
}

/// Removes this test's node label and hostname overrides and uncordons what it cordoned, also
/// on failure.
struct NodeGuard {
    label: String,
    cordoned: Vec<&'static str>,
    renamed: Vec<&'static str>,
}

const HOSTNAME_OVERRIDE: &str = "nodeset.slinky.slurm.net/hostname-override";

impl Drop for NodeGuard {
    fn drop(&mut self) {
        for node in &self.renamed {
            let unset = format!("{HOSTNAME_OVERRIDE}-");
            let _ = ground().kubectl(&["annotate", "node", node, &unset], None);
        }
        for node in &self.cordoned {
            let _ = ground().kubectl(&["uncordon", node], None);
        }
        let unlabel = format!("{}-", self.label);
        for node in NODES {
            let _ = ground().kubectl(&["label", "node", node, &unlabel], None);
        }
    }
}

fn pods(env: &TestEnv) -> Vec<(String, String, String)> {
    let out = ground().ok(&[
        "get",
        "pods",
        "-n",
        env.name(),
        "-l",
        &format!("app.kubernetes.io/instance={NODESET}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.spec.hostname}{\"\\n\"}{end}",
    ]);
    let mut pods: Vec<(String, String, String)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().map(str::to_owned);
            Some((f.next()?, f.next().unwrap_or_default(), f.next()?))
        })
        .collect();
    pods.sort_by(|a, b| a.1.cmp(&b.1));
    pods
}

/// The notes of the events with `reason` in the namespace.
fn events(env: &TestEnv, reason: &str) -> Vec<String> {
    let out = ground().ok(&[
        "get",
        "events.events.k8s.io",
        "-n",
        env.name(),
        "-o",
        "jsonpath={range .items[*]}{.reason}|{.note}{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(r, _)| *r == reason)
        .map(|(_, note)| note.to_owned())
        .collect()
}

/// Waits until the pods' `(node, hostname)` pairs are `want`.
fn wait_pods(env: &TestEnv, want: &[&str]) -> Vec<(String, String, String)> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = pods(env);
        let placed: Vec<&str> = now.iter().map(|p| p.1.as_str()).collect();
        let named = now.iter().all(|p| p.1 == p.2);
        if placed == want && named {
            return now;
        }
        if Instant::now() > deadline {
            panic!("pods {now:?}, want one on each of {want:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn daemonset_mode_follows_the_nodes_and_drains_before_delete() {
    let started = Instant::now();
    let mut env = TestEnv::new("op-daemon");
    let mut guard = NodeGuard {
        label: format!("test.slurm-rs.dev/{}", env.name()),
        cordoned: Vec::new(),
        renamed: Vec::new(),
    };
    env.start_operator(&["--slurm-poll", "1s"]);
    ground().apply(env.name(), &manifest());

    // One pod per node, named after the node in Slurm.
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );
    let before = wait_pods(&env, &NODES);
    assert_eq!(
        env.wait_for(
            &format!("nodeset/{NODESET}"),
            "{.status.desired}",
            LIMIT,
            |d| d == "3"
        ),
        "3"
    );
    let client = slurm(&env);
    for n in NODES {
        wait_node(&client, n, "idle", |n| {
            n.state.as_str() == "IDLE" && !n.is_drain()
        })
        .await;
    }

    // Select node-1 and node-2 only: node-3's worker is drained in Slurm, then deleted.
    for node in ["node-1", "node-2"] {
        ground().ok(&["label", "node", node, &format!("{}=yes", guard.label)]);
    }
    let patch = format!(
        r#"{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"{}":"yes"}}}}}}}}}}"#,
        guard.label
    );
    env.merge_patch(&format!("nodeset/{NODESET}"), &patch);
    let after = wait_pods(&env, &["node-1", "node-2"]);
    assert_eq!(after[..], before[..2], "the selected nodes keep their pods");
    // It was drained (the operator's event) before it was deleted; the pod's preStop then
    // marks the Slurm node down, so the drain itself is not what Slurm shows now.
    let drains = events(&env, "NodeDrain");
    assert!(
        drains.iter().any(
            |n| n.starts_with("drained Slurm node node-3: slurm-operator: Pod (")
                && n.ends_with(") is pending termination for scale-in")
        ),
        "{drains:?}"
    );
    let n3 = wait_node(&client, "node-3", "drained or down", |n| {
        n.is_drain() || n.state.as_str() == "DOWN"
    })
    .await;
    assert!(
        n3.reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("slurm-operator: "),
        "{:?}",
        n3.reason
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.desired}",
        LIMIT,
        |d| d == "2",
    );

    // Cordon node-1 (one short window; the guard uncordons): its pod stays and is drained.
    guard.cordoned.push("node-1");
    ground().ok(&["cordon", "node-1"]);
    let n1 = wait_node(&client, "node-1", "drained for the cordon", Node::is_drain).await;
    assert!(
        n1.reason
            .as_deref()
            .unwrap_or_default()
            .contains("Node (node-1) was cordoned"),
        "{:?}",
        n1.reason
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pods(&env), after, "a cordoned node keeps its worker");
    ground().ok(&["uncordon", "node-1"]);
    guard.cordoned.clear();
    wait_node(&client, "node-1", "undrained", |n| !n.is_drain()).await;
    assert_eq!(pods(&env), after);

    // node-2 is renamed in Slurm: its worker is replaced by one with the new hostname, and the
    // old record, once down and not responding, is pruned. node-3's record stays: node-3 still
    // exists and would give a worker the same name.
    guard.renamed.push("node-2");
    ground().ok(&[
        "annotate",
        "node",
        "node-2",
        &format!("{HOSTNAME_OVERRIDE}=renamed-2"),
    ]);
    let deadline = Instant::now() + LIMIT;
    while !pods(&env)
        .iter()
        .any(|(_, node, host)| node == "node-2" && host == "renamed-2")
    {
        assert!(
            Instant::now() < deadline,
            "no renamed-2 worker: {:?}",
            pods(&env)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = Instant::now() + LIMIT;
    loop {
        match client.get_node("node-2").await {
            Err(e) if e.kind() == slurm_client::ErrorKind::NotFound => break,
            other => assert!(
                Instant::now() < deadline,
                "Slurm node node-2 still there: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pruned = events(&env, "DefunctSlurmNodePruned");
    assert!(
        pruned
            .iter()
            .any(|n| n.starts_with("deleted Slurm node node-2: ")),
        "{pruned:?}"
    );
    assert!(
        client.get_node("node-3").await.is_ok(),
        "node-3's record is kept"
    );
    assert!(pruned.iter().all(|n| !n.contains("node-3")), "{pruned:?}");
    eprintln!("daemonset test took {:?}", started.elapsed());
}
