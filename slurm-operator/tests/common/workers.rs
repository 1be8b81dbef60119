//! The worker side of the cluster of `manifests/cluster.yaml` as the tests look at it: the Slurm
//! client through the RestApi Service with the Token's JWT, Slurm nodes, and the NodeSet's pods.

use std::time::{Duration, Instant};

use base64::Engine;
use slurm_client::model::Node;
use slurm_client::{Client, StaticToken};

use super::{TestEnv, ground};

/// The NodeSet of `cluster.yaml`.
pub const NODESET: &str = "slurm-worker-slinky";
/// How long one step of a cluster's life may take on a loaded 2-core machine.
pub const LIMIT: Duration = Duration::from_secs(240);

/// The JWT the Token `slurm-token` minted into its Secret.
pub fn token(env: &TestEnv) -> String {
    let b64 = env.wait_for(
        "secret/slurm-token-jwt-slurm",
        "{.data.SLURM_JWT}",
        LIMIT,
        |v| !v.is_empty(),
    );
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("SLURM_JWT is base64"),
    )
    .expect("a JWT is text")
}

/// A client through the RestApi Service, with the Token's JWT.
pub fn slurm(env: &TestEnv) -> Client {
    let ip = env.wait_for("service/slurm-restapi", "{.spec.clusterIP}", LIMIT, |ip| {
        ip.starts_with("10.")
    });
    let port = test_support::ground::forward_into_ground(format!("{ip}:6820").parse().unwrap());
    Client::builder(format!("http://{port}"))
        .token(StaticToken::new(token(env)))
        .build()
        .unwrap()
}

/// Slurm node `name`, which must exist.
pub async fn node(client: &Client, name: &str) -> Node {
    client
        .get_node(name)
        .await
        .unwrap_or_else(|e| panic!("node {name}: {e}"))
        .value
}

/// Polls `check` on Slurm node `name` until it holds.
pub async fn wait_node(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&Node) -> bool,
) -> Node {
    let deadline = Instant::now() + LIMIT;
    loop {
        match client.get_node(name).await {
            Ok(n) if check(&n.value) => return n.value,
            Ok(n) if Instant::now() > deadline => panic!(
                "Slurm node {name}: not {what} after {LIMIT:?}: {:?} {:?} {:?}",
                n.value.state, n.value.state_flags, n.value.reason
            ),
            Err(e) if Instant::now() > deadline => {
                panic!("Slurm node {name}: not readable after {LIMIT:?}: {e}")
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `sbatch …` from inside the cluster; its job id.
pub fn sbatch(env: &TestEnv, command: &str) -> u32 {
    let (code, out) = env.run_in_cluster("slurm", command);
    assert_eq!(code, 0, "{out}");
    out.lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no job id in {out:?}"))
}

/// The NodeSet's pods, by name.
pub fn pods(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = ground()
        .get(
            env.name(),
            "pods",
            &format!(
                "{{.items[?(@.metadata.labels.app\\.kubernetes\\.io/instance==\"{NODESET}\")].metadata.name}}"
            ),
        )
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// Waits until the NodeSet's pods are exactly `want`.
pub fn wait_pods(env: &TestEnv, want: &[&str]) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = pods(env);
        if now == want {
            return;
        }
        if Instant::now() > deadline {
            panic!("pods {now:?}, want {want:?}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `kubectl scale nodeset` (the scale subresource, as an HPA uses it).
pub fn scale(env: &TestEnv, replicas: u32) {
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        &format!("nodeset/{NODESET}"),
        &format!("--replicas={replicas}"),
    ]);
}

/// The UID of pod `pod` ("" when it does not exist).
pub fn pod_uid(env: &TestEnv, pod: &str) -> String {
    ground().get(env.name(), &format!("pod/{pod}"), "{.metadata.uid}")
}
