//! Pod sandboxes on the ground's bridge, with containers in them (root required; see `common`).

use crate::common;

use std::time::Instant;

use common::{container, network, pod, runtime, shell, stdout, wait_for_line};
use kube_ground::net::Network;
use kube_ground::runtime::ContainerSpec;

#[tokio::test]
async fn two_sandboxes_reach_each_other_by_ip() {
    let rt = runtime().await;
    let net = network();
    let (server_pod, client_pod) = (pod("server"), pod("client"));
    let start = Instant::now();
    let server_box = net.create(&server_pod).await.unwrap();
    eprintln!(
        "timing: sandbox creation (first, may include the ground namespace): {:?}",
        start.elapsed()
    );
    let start = Instant::now();
    let client_box = net.create(&client_pod).await.unwrap();
    eprintln!("timing: sandbox creation: {:?}", start.elapsed());
    assert_ne!(server_box.ip, client_box.ip);
    for b in [&server_box, &client_box] {
        assert!(b.ip.octets()[..2] == [10, 244], "{b:?}");
        assert!(b.netns_path.exists(), "{b:?}");
    }

    let in_box = |b: &kube_ground::net::Sandbox, script: &str| ContainerSpec {
        netns: Some(b.netns_path.clone()),
        ..shell(script)
    };
    let server = container(&server_pod, "listen");
    rt.start(
        &server,
        &in_box(
            &server_box,
            // busybox nc ends when its input ends: each side keeps its input open a while
            // after its line, so that it reads the other's before it goes (CI run15 lost the
            // client's line, run16 the answer).
            "ip -4 -o addr show dev eth0 | grep -q ' 10.244.' && echo listening; \
             { echo pong; sleep 3; } | nc -l -p 8080",
        ),
    )
    .await
    .unwrap();
    wait_for_line(&rt, &server, "listening").await;

    let client = container(&client_pod, "connect");
    let script = format!(
        "ip route | grep -q '^default via 10.244.0.1 ' || exit 2; \
         for i in $(seq 20); do {{ echo ping-from-client; sleep 1; }} | nc -w 2 {} 8080 && exit 0; sleep 0.1; done; \
         exit 1",
        server_box.ip
    );
    rt.start(&client, &in_box(&client_box, &script))
        .await
        .unwrap();
    assert_eq!(
        rt.wait(&client).await.unwrap(),
        0,
        "client log: {:?}",
        common::log_lines(&rt, &client).await
    );
    assert_eq!(rt.wait(&server).await.unwrap(), 0);
    // The log writer may hand over the last line a moment after the container exited.
    wait_for_line(&rt, &server, "ping-from-client").await;
    assert_eq!(
        stdout(&rt, &server).await,
        ["listening", "ping-from-client"]
    );
    assert_eq!(stdout(&rt, &client).await, ["pong"]);

    for (p, b) in [(&server_pod, &server_box), (&client_pod, &client_box)] {
        rt.remove_pod(p).await.unwrap();
        net.destroy(&p.uid).await.unwrap();
        assert!(!b.netns_path.exists());
    }
    let veths = net.veths().await.unwrap();
    for b in [&server_box, &client_box] {
        let short = &b.netns["kubetest-".len()..];
        assert!(!veths.iter().any(|v| v.ends_with(short)), "{veths:?}");
    }
}

#[tokio::test]
async fn the_bridge_keeps_its_address_as_pods_come_and_go() {
    let net = network();
    let cfg = common::net_config();
    let mac = || {
        let out = std::process::Command::new("ip")
            .args(["-n", &cfg.ground_netns, "-br", "link", "show", &cfg.bridge])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .to_owned()
    };
    let pods = [pod("mac-a"), pod("mac-b"), pod("mac-c")];
    for p in &pods {
        net.create(p).await.unwrap();
        assert_eq!(mac(), kube_ground::net::mac_of(cfg.gateway));
    }
    for p in &pods {
        net.destroy(&p.uid).await.unwrap();
        assert_eq!(mac(), "02:00:0a:f4:00:01");
    }
}

#[tokio::test]
async fn sandboxes_are_idempotent_and_their_addresses_survive_a_restart() {
    let net = network();
    let a = pod("a");
    let first = net.create(&a).await.unwrap();
    assert_eq!(net.create(&a).await.unwrap(), first);

    // A new Network, as after a kubelet restart, knows the address is taken.
    let restarted = Network::new(common::net_config());
    let b = pod("b");
    let second = restarted.create(&b).await.unwrap();
    assert_ne!(second.ip, first.ip);
    let recorded = restarted.recorded().unwrap();
    assert!(
        recorded.iter().any(|r| r.uid == a.uid && r.ip == first.ip),
        "{recorded:?}"
    );

    // A sandbox whose namespace vanished (a reboot) is rebuilt on its recorded address.
    std::process::Command::new("ip")
        .args(["netns", "delete", &first.netns])
        .status()
        .unwrap();
    assert_eq!(restarted.create(&a).await.unwrap(), first);

    // A pod's MAC is a function of its IP, so a new pod on a freed address has the old pod's
    // MAC: what its peers remember of it is true. (Which address it gets is not asserted: the
    // other tests of this file allocate from the same pool at the same time.)
    restarted.destroy(&b.uid).await.unwrap();
    let c = pod("c");
    let third = restarted.create(&c).await.unwrap();
    let out = std::process::Command::new("ip")
        .args(["-n", &third.netns, "-br", "link", "show", "eth0"])
        .output()
        .unwrap();
    let eth0 = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(eth0.contains(&kube_ground::net::mac_of(third.ip)), "{eth0}");

    for p in [&a, &b, &c] {
        restarted.destroy(&p.uid).await.unwrap();
        restarted.destroy(&p.uid).await.unwrap();
    }
    let recorded = restarted.recorded().unwrap();
    assert!(
        !recorded
            .iter()
            .any(|r| [&a.uid, &b.uid, &c.uid].contains(&&r.uid)),
        "{recorded:?}"
    );
    assert!(!first.netns_path.exists() && !second.netns_path.exists());
}

#[tokio::test]
async fn a_pod_reaches_the_ground_namespace_at_the_gateway_and_nothing_beyond() {
    let rt = runtime().await;
    let net = network();
    net.ensure_ground().await.unwrap();
    let ground = std::path::Path::new("/run/netns").join(&net.config().ground_netns);

    // A container in the ground namespace itself stands for an API server listening for pods.
    let (server_pod, client_pod) = (pod("in-ground"), pod("to-ground"));
    let server = container(&server_pod, "listen");
    let spec = ContainerSpec {
        netns: Some(ground.clone()),
        ..shell("echo listening; echo hello-pod | nc -l -p 8081")
    };
    rt.start(&server, &spec).await.unwrap();
    wait_for_line(&rt, &server, "listening").await;

    let sandbox = net.create(&client_pod).await.unwrap();
    let client = container(&client_pod, "connect");
    let spec = ContainerSpec {
        netns: Some(sandbox.netns_path.clone()),
        ..shell(
            "for i in $(seq 50); do echo hi | nc -w 2 10.244.0.1 8081 && exit 0; sleep 0.1; done; \
             exit 1",
        )
    };
    rt.start(&client, &spec).await.unwrap();
    assert_eq!(rt.wait(&client).await.unwrap(), 0);
    assert_eq!(stdout(&rt, &client).await, ["hello-pod"]);
    assert_eq!(rt.wait(&server).await.unwrap(), 0);

    // The ground namespace has no route off the bridge: pod traffic cannot leave it.
    let route = std::process::Command::new("ip")
        .args([
            "-n",
            &net.config().ground_netns,
            "route",
            "get",
            "192.0.2.1",
        ])
        .output()
        .unwrap();
    assert!(
        !route.status.success(),
        "{}",
        String::from_utf8_lossy(&route.stdout)
    );

    rt.remove_pod(&server_pod).await.unwrap();
    rt.remove_pod(&client_pod).await.unwrap();
    net.destroy(&client_pod.uid).await.unwrap();
}
