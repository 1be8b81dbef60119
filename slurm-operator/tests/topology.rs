//! Slinky's topology and node-features guides on the test ground, against real Slurm 26.05
//! daemons with the `topology/tree` plugin (`topology.yaml` in a `configFileRefs` ConfigMap):
//! the Kubernetes nodes' `topology.slinky.slurm.net/spec` and `features.slinky.slurm.net/spec`
//! annotations reach the worker pods and their Slurm nodes (`k8s/<feature>`, the NodeSet's own
//! features kept), a change of an annotation is applied live, a removed one takes only what it
//! gave, and a job constrained to a `k8s/` feature runs where the annotation says.
//!
//! The NodeSet runs in DaemonSet mode, so that each node has exactly one worker, named after
//! it (the ground's scheduler knows no pod anti-affinity: in StatefulSet mode two workers may
//! share a node). It annotates the shared nodes, whose features every cluster with a worker
//! there takes: it runs alone (see `OPERATOR_ALONE` in xtask), and its annotations are removed
//! when it ends, failed or not.

use crate::common;

use std::time::{Duration, Instant};

use common::end_state::assert_full_service;
use common::workers::{LIMIT, NODESET, slurm};
use common::{TestEnv, ground};
use slurm_client::Client;
use slurm_client::model::Node;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const TOPOLOGY: &str = "topology.slinky.slurm.net/spec";
const FEATURES: &str = "features.slinky.slurm.net/spec";

/// A tree with two leaf switches, which the workers join through their nodes' annotations.
const TOPOLOGY_YAML: &str = "  topology.yaml: |
    - topology: topo-switch
      cluster_default: true
      tree:
        switches:
          - switch: sw_root
            children: s[1-2]
          - switch: s1
          - switch: s2
";

/// Removes this test's annotations from every node, also on failure.
struct Annotations;

impl Annotations {
    fn set(&self, node: &str, key: &str, value: Option<&str>) {
        let arg = match value {
            Some(v) => format!("{key}={v}"),
            None => format!("{key}-"),
        };
        ground().ok(&["annotate", "node", node, &arg, "--overwrite"]);
    }
}

impl Drop for Annotations {
    fn drop(&mut self) {
        for node in NODES {
            for key in [TOPOLOGY, FEATURES] {
                let _ = ground().kubectl(&["annotate", "node", node, &format!("{key}-")], None);
            }
        }
    }
}

fn manifest() -> String {
    let yaml = common::manifest("cluster.yaml");
    let cgroup = "  cgroup.conf: |\n    CgroupPlugin=disabled\n";
    let mode = "scalingMode: StatefulSet";
    for needle in [cgroup, mode] {
        assert_eq!(yaml.matches(needle).count(), 1, "cluster.yaml: {needle}");
    }
    yaml.replace(cgroup, &format!("{cgroup}{TOPOLOGY_YAML}"))
        .replace(mode, "scalingMode: DaemonSet")
}

/// The topology annotation of the worker pod on Kubernetes node `kube_node`.
fn pod_topology(env: &TestEnv, kube_node: &str) -> String {
    ground().ok(&[
        "get",
        "pods",
        "-n",
        env.name(),
        "-l",
        &format!("app.kubernetes.io/instance={NODESET}"),
        "-o",
        &format!(
            "jsonpath={{.items[?(@.spec.nodeName==\"{kube_node}\")].metadata.annotations.topology\\.slinky\\.slurm\\.net/spec}}"
        ),
    ])
}

/// The Slurm nodes under switch `switch` in `scontrol show topology`'s output.
fn under_switch(out: &str, switch: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| {
            l.split_whitespace()
                .any(|w| w == format!("SwitchName={switch}"))
        })
        .unwrap_or_else(|| panic!("no switch {switch}:\n{out}"));
    let nodes = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("Nodes="))
        .unwrap_or_default();
    slurm_client::hostlist::expand(nodes).unwrap_or_else(|e| panic!("{nodes:?}: {e}"))
}

fn k8s_features(n: &Node) -> (Vec<String>, Vec<String>) {
    let pick = |v: &[String]| {
        let mut f: Vec<String> = v
            .iter()
            .filter(|f| f.starts_with("k8s/"))
            .cloned()
            .collect();
        f.sort();
        f
    };
    (pick(&n.features), pick(&n.active_features))
}

/// Waits until Slurm node `name` has `topology` and exactly the `k8s/` features `features`
/// (available and active), and still its NodeSet's own feature (the others kept).
async fn wait_slurm_node(client: &Client, name: &str, topology: &str, features: &[&str]) {
    let want: Vec<String> = features.iter().map(|f| format!("k8s/{f}")).collect();
    let deadline = Instant::now() + LIMIT;
    loop {
        let node = client.get_node(name).await.map(|r| r.value);
        if let Ok(n) = &node {
            let (available, active) = k8s_features(n);
            if n.topology.as_deref().unwrap_or_default() == topology
                && available == want
                && active == want
                && n.features.iter().any(|f| !f.starts_with("k8s/"))
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Slurm node {name}: not topology {topology:?} with features {want:?} after {LIMIT:?}: {node:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn node_annotations_reach_the_slurm_nodes() {
    let started = Instant::now();
    let mut env = TestEnv::new("op-topology");
    let a = Annotations;
    let place = [
        (NODES[0], "topo-switch:s1", "nn-1"),
        (NODES[1], "topo-switch:s1", "nn-2"),
        (NODES[2], "topo-switch:s2", "nn-3"),
    ];
    for (node, topology, feature) in place {
        a.set(node, TOPOLOGY, Some(topology));
        a.set(node, FEATURES, Some(feature));
    }
    env.start_operator(&["--slurm-poll", "1s"]);
    ground().apply(env.name(), &manifest());
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );
    let client = slurm(&env);

    // Each worker (named after its node) takes its node's place and features; its pod carries
    // the topology.
    for (node, topology, feature) in place {
        wait_slurm_node(&client, node, topology, &[feature]).await;
        assert_eq!(pod_topology(&env, node), topology, "the pod on {node}");
    }

    // slurmctld's own view: the switches hold the workers, and a constraint finds its node.
    let (code, out) = env.run_in_cluster(
        "slurm",
        &format!(
            "scontrol show topology\nsrun --constraint=k8s/nn-2 hostname\nsinfo -h -N -n {} -o '%N %f'",
            NODES[1]
        ),
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(under_switch(&out, "s1"), [NODES[0], NODES[1]], "{out}");
    assert_eq!(under_switch(&out, "s2"), [NODES[2]], "{out}");
    assert!(
        out.lines().any(|l| l.trim() == NODES[1]),
        "srun --constraint=k8s/nn-2 ran on {}:\n{out}",
        NODES[1]
    );

    // A changed annotation is applied live; a removed one takes only its own features.
    a.set(NODES[2], TOPOLOGY, Some("topo-switch:s1"));
    a.set(NODES[2], FEATURES, Some("nn-x,nn-y"));
    wait_slurm_node(&client, NODES[2], "topo-switch:s1", &["nn-x", "nn-y"]).await;
    assert_eq!(pod_topology(&env, NODES[2]), "topo-switch:s1");
    a.set(NODES[0], FEATURES, None);
    wait_slurm_node(&client, NODES[0], "topo-switch:s1", &[]).await;

    assert_full_service(&env, &client, "topology and features sync", &[]).await;
    drop(a);
    eprintln!("topology and features: {:?}", started.elapsed());
}
