//! A Slurm 26.05 cluster built only from the test ground's images and plain manifests
//! (tests/manifests/slurm.yaml: a slurmctld StatefulSet, configless slurmd pods started with
//! `-Z` that register as dynamic nodes, slurmrestd): `sbatch` runs a 3-node job from a pod, and
//! `slurm_client::Client` lists the nodes through slurmrestd. What the operator's tests stand on.

use std::time::Duration;

use test_support::ground::{self, Ground};

const NS: &str = "slurm";

#[tokio::test(flavor = "multi_thread")]
async fn slurm_from_plain_manifests_runs_a_job_and_answers_the_client() {
    let g = Ground::connect();
    let _ = g.kubectl(&["delete", "namespace", NS, "--wait=true"], None);
    g.ok(&["create", "namespace", NS]);
    let slurm_key: Vec<u8> = (0..1024).map(|i| (i * 7 + 13) as u8).collect();
    let jwt_key: Vec<u8> = (0..64).map(|i| (i * 11 + 5) as u8).collect();
    let dir = std::env::temp_dir().join(format!("kg-slurm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("slurm.key"), &slurm_key).unwrap();
    std::fs::write(dir.join("jwt.key"), &jwt_key).unwrap();
    for (secret, file) in [
        ("slurm-auth-slurm", "slurm.key"),
        ("slurm-auth-jwt", "jwt.key"),
    ] {
        g.ok(&[
            "create",
            "secret",
            "generic",
            "-n",
            NS,
            secret,
            &format!("--from-file={file}={}", dir.join(file).display()),
        ]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    g.apply(NS, include_str!("manifests/slurm.yaml"));
    let limit = Duration::from_secs(180);
    g.wait_for(
        NS,
        "statefulset/slurm-controller",
        "{.status.readyReplicas}",
        limit,
        |r| r == "1",
    );
    g.wait_for(
        NS,
        "statefulset/slurm-worker",
        "{.status.readyReplicas}",
        limit,
        |r| r == "3",
    );
    g.wait_for(
        NS,
        "deployment/slurm-restapi",
        "{.status.readyReplicas}",
        limit,
        |r| r == "1",
    );

    g.apply(NS, include_str!("manifests/sbatch.yaml"));
    let phase = g.wait_for(NS, "pod/sbatch", "{.status.phase}", limit, |p| {
        p == "Succeeded" || p == "Failed"
    });
    let log = g.log(NS, "sbatch", "sbatch");
    assert_eq!(phase, "Succeeded", "sbatch pod log:\n{log}");

    let ip = g.get(
        NS,
        "pods",
        "{.items[?(@.metadata.labels.app\\.kubernetes\\.io/name==\"slurmrestd\")].status.podIP}",
    );
    let port = ground::forward_into_ground(format!("{ip}:6820").parse().unwrap());
    let client = slurm_client::Client::builder(format!("http://{port}"))
        .token(slurm_client::MintedToken::new(jwt_key, "slurm"))
        .build()
        .unwrap();
    let nodes = client
        .list_nodes(&Default::default())
        .await
        .expect("listing nodes through slurmrestd")
        .value;
    let names: Vec<String> = nodes.nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for i in 0..3 {
        assert!(names.contains(&format!("slurm-worker-{i}")), "{names:?}");
    }
    let _ = g.kubectl(&["delete", "namespace", NS, "--wait=false"], None);
}
