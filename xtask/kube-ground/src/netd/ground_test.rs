//! netd's serving half for real (root required), without an API server: a throwaway ground
//! namespace with a bridge, a client and a backend pod namespace on it, and [`Ground`] applying
//! tables built from fixture objects. The client reaches Services by ClusterIP (TCP and UDP) and
//! the backend sees the client's own address; the backend reaches itself through its Service; the
//! API server route reaches a host loopback listener; and glibc's resolver in the pod finds names
//! through the search list.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::dns::testing::{decode_response, encode_query};
use super::dns::{Rcode, TYPE_A};
use super::names::fixtures::{pod, service, slice};
use super::netns_socket::NetnsSockets;
use super::netns_socket::testing::{TestNetns, ip};
use super::*;

/// /etc/netns/<name>/resolv.conf, which `ip netns exec` mounts over /etc/resolv.conf.
struct ResolvConf(std::path::PathBuf);

impl ResolvConf {
    fn new(netns: &str, text: &str) -> Self {
        let dir = Path::new("/etc/netns").join(netns);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("resolv.conf"), text).unwrap();
        Self(dir)
    }
}

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // Only if empty, as it was before (`ip` does not need it).
        let _ = std::fs::remove_dir("/etc/netns");
    }
}

fn getent(netns: &str, name: &str) -> (bool, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "getent", "ahostsv4", name])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn read_all(sockets: &NetnsSockets, addr: &str) -> std::io::Result<String> {
    let mut conn = sockets.tcp_connect(addr.parse().unwrap()).await?;
    let mut got = String::new();
    conn.read_to_string(&mut got).await?;
    Ok(got)
}

/// Accepts connections and writes the peer's IP address to each.
fn serve_peer(listener: tokio::net::TcpListener) {
    tokio::spawn(async move {
        while let Ok((mut conn, peer)) = listener.accept().await {
            let _ = conn.write_all(peer.ip().to_string().as_bytes()).await;
        }
    });
}

/// Answers each datagram with the sender's IP address.
fn serve_peer_udp(socket: tokio::net::UdpSocket) {
    tokio::spawn(async move {
        let mut buf = [0u8; 64];
        while let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(peer.ip().to_string().as_bytes(), peer).await;
        }
    });
}

/// Puts `pod` on the ground's bridge through `veth`, at `addr`/16.
fn attach(ground: &str, pod: &TestNetns, veth: &str, addr: &str) {
    let p = pod.name.as_str();
    ip(&[
        "-n", ground, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", p,
    ]);
    ip(&["-n", ground, "link", "set", veth, "master", "kube0", "up"]);
    if veth == "vethb" {
        // The backend's port is left as a kubelet before hairpin mode made it: netd turns it on.
    } else {
        ip(&[
            "-n",
            ground,
            "link",
            "set",
            veth,
            "type",
            "bridge_slave",
            "hairpin",
            "on",
        ]);
    }
    ip(&["-n", p, "addr", "add", &format!("{addr}/16"), "dev", "eth0"]);
    ip(&["-n", p, "link", "set", "eth0", "up"]);
    ip(&["-n", p, "route", "add", "default", "via", "10.244.0.1"]);
}

fn nft_table(netns: &str) -> String {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            netns,
            "nft",
            "list",
            "table",
            "ip",
            "kube-ground",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Accepts connections and writes `text` to each.
fn serve_text(listener: tokio::net::TcpListener, text: &'static str) {
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn.write_all(text.as_bytes()).await;
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_services_and_names() {
    let ground = TestNetns::new("g");
    let pod_ns = TestNetns::new("p");
    let g = ground.name.as_str();
    ip(&["-n", g, "link", "add", "kube0", "type", "bridge"]);
    ip(&["-n", g, "addr", "add", "10.244.0.1/16", "dev", "kube0"]);
    ip(&["-n", g, "link", "set", "kube0", "up"]);
    let backend_ns = TestNetns::new("b");
    attach(g, &pod_ns, "vethp", "10.244.0.2");
    attach(g, &backend_ns, "vethb", "10.244.0.3");
    let p = pod_ns.name.as_str();

    let in_pod = NetnsSockets::enter(&pod_ns.path()).unwrap();
    let in_backend = NetnsSockets::enter(&backend_ns.path()).unwrap();
    serve_peer(
        in_backend
            .tcp_listener("10.244.0.3:8080".parse().unwrap())
            .await
            .unwrap(),
    );
    serve_peer_udp(
        in_backend
            .udp_socket("10.244.0.3:7007".parse().unwrap())
            .await
            .unwrap(),
    );
    let apiserver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let apiserver_addr = apiserver.local_addr().unwrap();
    serve_text(apiserver, "apiserver");

    let services = [
        service(
            "default",
            "web",
            json!({"clusterIP": "10.96.3.4", "ports": [
                {"name": "http", "port": 80, "targetPort": "web"},
                {"name": "echo", "port": 7, "protocol": "UDP", "targetPort": 7007},
            ]}),
        ),
        service(
            "default",
            "idle",
            json!({"clusterIP": "10.96.3.5", "ports": [{"port": 80}]}),
        ),
        service("slurm", "ctld", json!({"clusterIP": "None"})),
    ];
    let slices = [
        slice(
            "default",
            "web",
            json!([{"name": "http", "port": 8080}, {"name": "echo", "port": 7007, "protocol": "UDP"}]),
            &[("10.244.0.3", Some(true), None)],
        ),
        slice(
            "slurm",
            "ctld",
            json!([]),
            &[("10.244.0.2", Some(true), Some("ctld-0"))],
        ),
    ];
    let pods = [pod("default", "client", "10.244.0.2")];
    let mut netd = Ground::open(g).await.unwrap();
    netd.apply(
        Index::build(&services, &slices, &pods),
        Routes::build(&services, &slices, apiserver_addr),
    )
    .await
    .unwrap();

    // DNAT, from the client pod: the backend sees the client's own address, over TCP and UDP.
    assert_eq!(
        read_all(&in_pod, "10.96.3.4:80").await.unwrap(),
        "10.244.0.2"
    );
    let udp = in_pod
        .udp_socket("10.244.0.2:0".parse().unwrap())
        .await
        .unwrap();
    udp.send_to(b"hi", "10.96.3.4:7").await.unwrap();
    let mut buf = [0u8; 64];
    let (len, from) = tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf))
        .await
        .expect("the UDP reply")
        .unwrap();
    assert_eq!(
        (&buf[..len], from.to_string().as_str()),
        (&b"10.244.0.2"[..], "10.96.3.4:7")
    );
    // Hairpin: the backend through its own Service, masqueraded to the gateway.
    assert_eq!(
        read_all(&in_backend, "10.96.3.4:80").await.unwrap(),
        "10.244.0.1"
    );
    // The userspace proxy to the host's loopback.
    assert_eq!(
        read_all(&in_pod, "10.96.0.1:443").await.unwrap(),
        "apiserver"
    );
    // No ready endpoint: the SYN is answered with a reset, as kube-proxy rejects it.
    let rejected = read_all(&in_pod, "10.96.3.5:80").await;
    assert!(
        matches!(&rejected, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{rejected:?}"
    );

    // DNS over UDP and TCP, from the pod.
    let dns: SocketAddr = "10.96.0.10:53".parse().unwrap();
    let udp = in_pod
        .udp_socket("10.244.0.2:0".parse().unwrap())
        .await
        .unwrap();
    let q = encode_query(42, "web.default.svc.cluster.local", TYPE_A);
    udp.send_to(&q, dns).await.unwrap();
    let mut buf = [0u8; 512];
    let (len, _) = udp.recv_from(&mut buf).await.unwrap();
    let r = decode_response(&buf[..len]);
    assert_eq!((r.id, r.answers.len()), (42, 1), "{r:?}");
    assert_eq!(r.answers[0].2.to_string(), "10.96.3.4");
    let mut tcp = in_pod.tcp_connect(dns).await.unwrap();
    let q = encode_query(43, "nothing.default.svc.cluster.local", TYPE_A);
    tcp.write_all(&(q.len() as u16).to_be_bytes())
        .await
        .unwrap();
    tcp.write_all(&q).await.unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).await.unwrap();
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    tcp.read_exact(&mut msg).await.unwrap();
    let r = decode_response(&msg);
    assert_eq!((r.id, r.rcode), (43, Rcode::NxDomain as u16));

    // glibc's resolver in the pod, with the resolv.conf the kubelet writes.
    let _resolv = ResolvConf::new(
        p,
        "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
    );
    let lookups = [
        ("web", Some("10.96.3.4")),
        ("web.default", Some("10.96.3.4")),
        ("ctld.slurm", Some("10.244.0.2")),
        ("ctld-0.ctld.slurm.svc.cluster.local", Some("10.244.0.2")),
        ("10-244-0-2.default.pod", Some("10.244.0.2")),
        ("nothing", None),
        ("example.com", None),
    ];
    for (name, want) in lookups {
        let (pns, owned) = (p.to_string(), name.to_string());
        let (ok, out) = tokio::task::spawn_blocking(move || getent(&pns, &owned))
            .await
            .unwrap();
        match want {
            Some(ip) => assert!(ok && out.starts_with(&format!("{ip} ")), "{name}: {out:?}"),
            None => assert!(!ok, "{name}: {out:?}"),
        }
    }

    let table = nft_table(g);
    assert!(
        table.contains("10.96.3.4") && table.contains("10.96.3.5"),
        "{table}"
    );

    // Services gone: their rules go; DNS stays.
    let services = [services[1].clone()];
    netd.apply(
        Index::build(&services, &[], &pods),
        Routes::build(&services, &[], apiserver_addr),
    )
    .await
    .unwrap();
    assert!(read_all(&in_pod, "10.96.3.4:80").await.is_err());
    let table = nft_table(g);
    assert!(
        !table.contains("10.96.3.4") && table.contains("10.96.3.5"),
        "{table}"
    );
    let addrs = Command::new("ip")
        .args(["-n", g, "-4", "-o", "addr", "show", "dev", "lo"])
        .output()
        .unwrap();
    let addrs = String::from_utf8_lossy(&addrs.stdout);
    assert!(!addrs.contains("10.96.3.4/32"), "{addrs}");
    assert!(addrs.contains("10.96.0.10/32"), "{addrs}");
    assert!(
        !addrs.contains("10.96.3.5/32"),
        "DNAT needs no address: {addrs}"
    );
    assert!(addrs.contains("10.96.0.1/32"), "{addrs}");
    let pns = p.to_string();
    let (ok, out) = tokio::task::spawn_blocking(move || getent(&pns, "web"))
        .await
        .unwrap();
    assert!(!ok, "{out}");
}

/// Asks the dial endpoint at `socket` for `target`: its answer line, and after `OK` what the
/// far end wrote before closing.
async fn dial(socket: &Path, target: &str) -> (String, String) {
    let mut conn = tokio::net::UnixStream::connect(socket).await.unwrap();
    conn.write_all(format!("{target}\n").as_bytes())
        .await
        .unwrap();
    let mut got = String::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_string(&mut got))
        .await
        .expect("an answer in time")
        .unwrap();
    let (answer, rest) = got.split_once('\n').unwrap_or((&got, ""));
    (answer.to_string(), rest.to_string())
}

/// The API server's way to the ground's Services: through the dial socket, a connection made
/// from inside the ground namespace to a ClusterIP, which DNAT leads to the endpoint; every target
/// that is not a Service with a ready endpoint is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dial_socket_reaches_services_and_nothing_else() {
    let ground = TestNetns::new("dg");
    let g = ground.name.as_str();
    ip(&["-n", g, "link", "add", "kube0", "type", "bridge"]);
    ip(&["-n", g, "addr", "add", "10.244.0.1/16", "dev", "kube0"]);
    ip(&["-n", g, "link", "set", "kube0", "up"]);
    let backend_ns = TestNetns::new("db");
    attach(g, &backend_ns, "vethd", "10.244.0.3");
    let in_backend = NetnsSockets::enter(&backend_ns.path()).unwrap();
    serve_text(
        in_backend
            .tcp_listener("10.244.0.3:9443".parse().unwrap())
            .await
            .unwrap(),
        "webhook",
    );
    let apiserver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let apiserver_addr = apiserver.local_addr().unwrap();
    serve_text(apiserver, "apiserver");

    let services = [
        service(
            "hooks",
            "webhook",
            json!({"clusterIP": "10.96.4.1", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}),
        ),
        service(
            "hooks",
            "idle",
            json!({"clusterIP": "10.96.4.2", "ports": [{"port": 443}]}),
        ),
        // Its endpoint's port has no listener.
        service(
            "hooks",
            "closed",
            json!({"clusterIP": "10.96.4.3", "ports": [{"port": 443, "targetPort": 9444}]}),
        ),
        service(
            "default",
            "kubernetes",
            json!({"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}),
        ),
    ];
    let slices = [
        slice(
            "hooks",
            "webhook",
            json!([{"name": "https", "port": 9443}]),
            &[("10.244.0.3", Some(true), None)],
        ),
        slice(
            "hooks",
            "closed",
            json!([{"name": "", "port": 9444}]),
            &[("10.244.0.3", Some(true), None)],
        ),
    ];
    let mut netd = Ground::open(g).await.unwrap();
    netd.apply(
        Index::build(&services, &slices, &[]),
        Routes::build(&services, &slices, apiserver_addr),
    )
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("netd-dial-socket-{}", std::process::id()));
    let socket = dir.join("dial.sock");
    netd.serve_dial(&socket).unwrap();

    for target in ["webhook.hooks.svc:443", "10.96.4.1:443"] {
        assert_eq!(
            dial(&socket, target).await,
            ("OK".into(), "webhook".into()),
            "{target}"
        );
    }
    // default/kubernetes: through netd's own proxy to the API server on the host.
    for target in ["kubernetes.default.svc:443", "10.96.0.1:443"] {
        assert_eq!(
            dial(&socket, target).await,
            ("OK".into(), "apiserver".into()),
            "{target}"
        );
    }
    let refused = [
        (
            "nothing.hooks.svc:443",
            "ERROR no such Service hooks/nothing",
        ),
        (
            "idle.hooks.svc:443",
            "ERROR Service hooks/idle:443 (10.96.4.2:443) has no ready endpoints",
        ),
        (
            "closed.hooks.svc:443",
            "ERROR connecting to Service hooks/closed:443 at 10.96.4.3:443 from the ground: Connection refused",
        ),
        // Pod addresses, the host, anything else: not Services.
        (
            "10.244.0.3:9443",
            "ERROR 10.244.0.3:9443 is not the ClusterIP and port of a Service of the ground; refused",
        ),
        (
            &apiserver_addr.to_string(),
            "is not the ClusterIP and port of a Service of the ground; refused",
        ),
        ("example.com:443", "is not a Service name"),
    ];
    for (target, want) in refused {
        let (answer, rest) = dial(&socket, target).await;
        assert!(answer.contains(want), "{target}: {answer:?}");
        assert_eq!(rest, "", "{target}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
