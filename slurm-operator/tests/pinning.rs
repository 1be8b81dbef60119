//! Node pinning (`pinToNode`) on the test ground, as Slinky's nodeset-operations guide describes
//! it, against real Slurm 26.05 daemons: the worker's node is recorded in
//! `status.ordinalToNode`; deleted and made again while other nodes are free, it comes back to
//! its node (a required node affinity) and finds what a job left on its claim there; a node
//! the template no longer selects loses its pin, and the next pod goes where the scheduler puts
//! it.
//!
//! The nodes are shared with other tests: the label key is this test's own and is removed from
//! every node when the test ends, failed or not. No node is cordoned.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::end_state::assert_full_service;
use common::workers::{LIMIT, NODESET, pod_uid, slurm};
use common::{TestEnv, ground};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

/// Removes this test's label from every node, also on failure.
struct Labels(String);

impl Labels {
    fn set(&self, node: &str, on: bool) {
        let arg = if on {
            format!("{}=yes", self.0)
        } else {
            format!("{}-", self.0)
        };
        ground().ok(&["label", "node", node, &arg, "--overwrite"]);
    }
}

impl Drop for Labels {
    fn drop(&mut self) {
        let unlabel = format!("{}-", self.0);
        for node in NODES {
            let _ = ground().kubectl(&["label", "node", node, &unlabel], None);
        }
    }
}

/// `cluster.yaml` with one pinned worker selecting `label`, with a claim mounted at `/scratch`
/// in slurmd. One: the ground's scheduler knows no pod anti-affinity, so two workers could
/// share a node and make the placements below a matter of chance.
fn manifest(label: &str) -> String {
    let yaml = common::manifest("cluster.yaml");
    let (head, nodeset) = yaml.split_at(yaml.find("kind: NodeSet").expect("a NodeSet"));
    let edits = [
        ("  replicas: 3\n", "  replicas: 1\n".to_owned()),
        ("  pinToNode: false\n", "  pinToNode: true\n  volumeClaimTemplates:\n  - metadata: {name: scratch}\n    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}\n".to_owned()),
        (
            "    volumeMounts: []\n",
            "    volumeMounts: [{name: scratch, mountPath: /scratch}]\n".to_owned(),
        ),
        (
            "        kubernetes.io/os: linux\n",
            format!("        kubernetes.io/os: linux\n        {label}: \"yes\"\n"),
        ),
    ];
    let mut nodeset = nodeset.to_owned();
    for (from, to) in edits {
        assert!(nodeset.contains(from), "cluster.yaml's NodeSet: {from:?}");
        nodeset = nodeset.replacen(from, &to, 1);
    }
    format!("{head}{nodeset}")
}

fn pins(env: &TestEnv) -> BTreeMap<String, String> {
    let raw = ground().get(
        env.name(),
        &format!("nodeset/{NODESET}"),
        "{.status.ordinalToNode}",
    );
    serde_json::from_str(&raw).unwrap_or_default()
}

fn wait_pins(env: &TestEnv, what: &str, check: impl Fn(&BTreeMap<String, String>) -> bool) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = pins(env);
        if check(&now) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "status.ordinalToNode {now:?}: not {what} after {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The node of pod `N-<ordinal>` once it runs again, its UID no longer `old_uid`.
fn running_again(env: &TestEnv, ordinal: u32, old_uid: &str) -> String {
    let pod = format!("pod/{NODESET}-{ordinal}");
    env.wait_for(&pod, "{.metadata.uid} {.status.phase}", LIMIT, |v| {
        v.ends_with(" Running") && !v.starts_with(old_uid)
    });
    ground().get(env.name(), &pod, "{.spec.nodeName}")
}

/// The node names a pod's required node affinity pins it to (`metadata.name In [...]`).
fn pinned_to(env: &TestEnv, ordinal: u32) -> String {
    ground().get(
        env.name(),
        &format!("pod/{NODESET}-{ordinal}"),
        "{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchFields[?(@.key==\"metadata.name\")].values[*]}",
    )
}

fn delete_pod(env: &TestEnv, ordinal: u32) {
    ground().ok(&[
        "delete",
        "pod",
        "-n",
        env.name(),
        &format!("{NODESET}-{ordinal}"),
        "--wait=false",
    ]);
}

/// Runs `command` on Slurm node `node` once it is idle; returns the output.
fn on_node(env: &TestEnv, node: &str, command: &str) -> String {
    let script = format!(
        "until sinfo -h -n {node} -t idle -o %n | grep -qx {node}; do sleep 1; done\nsrun -w {node} sh -c '{command}'"
    );
    let (code, out) = env.run_in_cluster("slurm", &script);
    assert_eq!(code, 0, "{out}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn pinned_workers_come_back_to_their_nodes() {
    let started = Instant::now();
    let mut env = TestEnv::new("op-pinning");
    let labels = Labels(format!("test.slurm-rs.dev/{}", env.name()));
    labels.set(NODES[0], true);
    env.start_operator(&["--slurm-poll", "1s"]);
    ground().apply(env.name(), &manifest(&labels.0));

    // The worker runs on the one labelled node, and the status records it.
    let first = running_again(&env, 0, "-");
    assert_eq!(first, NODES[0]);
    wait_pins(&env, "ordinal 0 recorded", |p| {
        p.get("0").map(String::as_str) == Some(NODES[0])
    });
    assert_eq!(
        pinned_to(&env, 0),
        "",
        "a first pod is placed by the scheduler"
    );

    // A job leaves a file on the worker's claim.
    on_node(&env, "slinky-0", "echo kept > /scratch/marker");

    // Every node becomes eligible, and the worker is deleted: it comes back to its own node.
    labels.set(NODES[1], true);
    labels.set(NODES[2], true);
    let uid = pod_uid(&env, &format!("{NODESET}-0"));
    delete_pod(&env, 0);
    let back = running_again(&env, 0, &uid);
    assert_eq!(back, NODES[0], "the worker pinned to {}", NODES[0]);
    assert_eq!(pinned_to(&env, 0), NODES[0]);
    let out = on_node(&env, "slinky-0", "cat /scratch/marker");
    assert!(out.contains("kept"), "the claim on its node: {out}");

    // Its node is no longer selected by the template: the pin goes (the pod stays), and the
    // next pod of ordinal 0 is placed anew, on one of the nodes still selected.
    labels.set(NODES[0], false);
    wait_pins(&env, "without ordinal 0", |p| p.is_empty());
    let uid = pod_uid(&env, &format!("{NODESET}-0"));
    delete_pod(&env, 0);
    let moved = running_again(&env, 0, &uid);
    assert!(moved == NODES[1] || moved == NODES[2], "placed on {moved}");
    assert_eq!(pinned_to(&env, 0), "", "no pin left to a deselected node");
    wait_pins(&env, "ordinal 0 on its new node", |p| {
        p.get("0") == Some(&moved)
    });

    let client = slurm(&env);
    assert_full_service(&env, &client, "node pinning", &[]).await;
    eprintln!("node pinning: {:?}", started.elapsed());
}
