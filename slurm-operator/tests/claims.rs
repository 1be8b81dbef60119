//! `persistentVolumeClaimRetentionPolicy` on the test ground, against real Slurm 26.05 daemons:
//! with `whenScaled: Delete` a scale-in's claim goes with its pod (drained first) while the
//! other stays, owned by nothing; `whenDeleted: Delete` set later makes the NodeSet the
//! remaining claim's owner, and deleting the NodeSet deletes it. Nothing is left at the end.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestEnv, ground, manifest};

const NODESET: &str = "slurm-worker-slinky";
const LIMIT: Duration = Duration::from_secs(180);

fn claim(ordinal: u32) -> String {
    format!("scratch-{NODESET}-{ordinal}")
}

/// The NodeSet's claims in the namespace (not slurmctld's `statesave`), sorted.
fn claims(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = ground()
        .get(env.name(), "pvc", "{.items[*].metadata.name}")
        .split_whitespace()
        .filter(|n| n.starts_with("scratch-"))
        .map(String::from)
        .collect();
    names.sort();
    names
}

/// The kinds of a claim's owners, space-separated.
fn owners(env: &TestEnv, claim: &str) -> String {
    ground().get(
        env.name(),
        &format!("pvc/{claim}"),
        "{.metadata.ownerReferences[*].kind}",
    )
}

async fn wait<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "not {what} after {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_follow_the_retention_policy() {
    let started = Instant::now();
    let mut env = TestEnv::new("op-claims");
    env.start_operator(&["--slurm-poll", "1s"]);
    // Slinky's chart output with two workers, each with a claim.
    let cluster = manifest("cluster.yaml").replace(
        "  replicas: 3\n",
        "  replicas: 2\n  persistentVolumeClaimRetentionPolicy: {whenScaled: Delete, whenDeleted: Retain}\n  volumeClaimTemplates:\n  - metadata: {name: scratch}\n    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}\n",
    );
    assert!(cluster.contains("scratch"), "the NodeSet's replicas line");
    ground().apply(env.name(), &cluster);
    for ordinal in [0, 1] {
        env.wait_for(
            &format!("pod/{NODESET}-{ordinal}"),
            "{.status.phase}",
            LIMIT,
            |p| p == "Running",
        );
    }
    assert_eq!(claims(&env), [claim(0), claim(1)]);
    for ordinal in [0, 1] {
        assert_eq!(owners(&env, &claim(ordinal)), "", "Retain while in range");
    }

    // Scale-in: the pod is drained and deleted, its claim goes after it; the other stays.
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        &format!("nodeset/{NODESET}"),
        "--replicas=1",
    ]);
    wait("the scaled-in claim deleted", || {
        (claims(&env) == [claim(0)]).then_some(())
    })
    .await;
    assert_eq!(owners(&env, &claim(0)), "");
    assert_eq!(
        ground().get(env.name(), &format!("pod/{NODESET}-0"), "{.status.phase}"),
        "Running",
        "the remaining pod keeps running"
    );

    // whenDeleted: Delete, set later: the remaining claim is the NodeSet's from the next pass.
    env.merge_patch(
        &format!("nodeset/{NODESET}"),
        r#"{"spec":{"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete"}}}"#,
    );
    wait("the NodeSet owning the claim", || {
        (owners(&env, &claim(0)) == "NodeSet").then_some(())
    })
    .await;
    ground().ok(&[
        "delete",
        "-n",
        env.name(),
        &format!("nodeset/{NODESET}"),
        "--wait=false",
    ]);
    wait("the NodeSet's claims gone with it", || {
        claims(&env).is_empty().then_some(())
    })
    .await;
    eprintln!("claims: {:?}", started.elapsed());
}
