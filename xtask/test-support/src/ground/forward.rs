//! Host loopback ports that lead into the ground's network namespace. One copy for two users:
//! the tests (through test-support) and `cargo xtask demo`'s Prometheus, which includes this file
//! with `#[path]` beside [`super::netns`]. Standard library and nix only.

use std::net::{SocketAddr, TcpListener, TcpStream};

/// A loopback port on the host whose connections are forwarded to `target` inside the ground's
/// network namespace (where pod IPs and ClusterIPs are).
#[allow(dead_code)]
pub fn forward_into_ground(target: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || forward(listener, target));
    addr
}

/// Forwards every connection `listener` accepts to `target` inside the ground's network
/// namespace, until the listener fails: a connecting thread joins the namespace first, and a
/// socket stays in the namespace it was made in.
pub fn forward(listener: TcpListener, target: SocketAddr) {
    for conn in listener.incoming() {
        let Ok(inbound) = conn else { continue };
        std::thread::spawn(move || {
            let Ok(ns) = std::fs::File::open(super::netns::NETNS_PATH) else {
                return;
            };
            if nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).is_err() {
                return;
            }
            let Ok(outbound) = TcpStream::connect(target) else {
                return;
            };
            let (Ok(mut a), Ok(mut b)) = (inbound.try_clone(), outbound.try_clone()) else {
                return;
            };
            let up = std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
            let (mut a, mut b) = (outbound, inbound);
            let _ = std::io::copy(&mut a, &mut b);
            let _ = b.shutdown(std::net::Shutdown::Write);
            let _ = up.join();
        });
    }
}
