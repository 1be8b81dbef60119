//! Cleanup after a crashed kubelet leaves no namespace, veth or container behind (root required;
//! see `common`). A test binary of its own, named to sort last so that cargo (which runs test
//! binaries one by one, in name order) runs it after the others: it removes everything of the
//! tests' ground, including its network namespace, and leaves the machine as it found it.

use crate::common;

use std::process::Command;

use common::{container, network, pod, runtime, shell, wait_for_line};
use kube_ground::net::Network;
use kube_ground::runtime::{ContainerSpec, Runtime, RuntimeConfig};

#[tokio::test]
async fn cleanup_leaves_no_namespace_veth_or_container_behind() {
    let rt = runtime().await;
    let net = network();
    let mut names = Vec::new();
    for name in ["left-0", "left-1"] {
        let p = pod(name);
        let sandbox = net.create(&p).await.unwrap();
        let id = container(&p, "main");
        let spec = ContainerSpec {
            netns: Some(sandbox.netns_path.clone()),
            ..shell("echo ready; exec sleep 600")
        };
        rt.start(&id, &spec).await.unwrap();
        wait_for_line(&rt, &id, "ready").await;
        names.push((sandbox, id.podman_name()));
    }
    assert!(net.sandbox_namespaces().await.unwrap().len() >= 2);
    assert!(net.veths().await.unwrap().len() >= 2);
    drop((rt, net));

    // What a restarted kubelet, or `kube-ground cleanup --teardown`, does: new handles, no memory.
    let rt = Runtime::new(RuntimeConfig::under(
        "/var/lib/slurm-dev/kube-test".as_ref(),
        "/run/slurm-dev/kube-test".as_ref(),
        "slurm-dev-kube-test",
    ))
    .await
    .unwrap();
    let net = Network::new(common::net_config());
    assert!(rt.remove_all().await.unwrap() >= 2);
    net.teardown().await.unwrap();

    assert!(rt.list().await.unwrap().is_empty());
    assert_eq!(
        net.sandbox_namespaces().await.unwrap(),
        Vec::<String>::new()
    );
    assert!(net.recorded().unwrap().is_empty());
    let ground = &common::net_config().ground_netns;
    let netns = String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        !netns
            .lines()
            .any(|l| l.starts_with("kubetest-") || l.starts_with(ground.as_str())),
        "{netns}"
    );
    let links = String::from_utf8(
        Command::new("ip")
            .args(["-o", "link"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let ps = String::from_utf8(
        Command::new("podman")
            .args(["ps", "--all", "--format={{.Names}}"])
            .env(
                "CONTAINERS_CONF",
                "/var/lib/slurm-dev/kube-test/podman/containers.conf",
            )
            .env(
                "CONTAINERS_STORAGE_CONF",
                "/var/lib/slurm-dev/kube-test/podman/storage.conf",
            )
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for (sandbox, container) in &names {
        assert!(!sandbox.netns_path.exists());
        let short = &sandbox.netns["kubetest-".len()..];
        assert!(!links.contains(short), "{links}");
        assert!(!ps.contains(container.as_str()), "{ps}");
    }
}
