//! A host loopback port that leads into the ground's network namespace.

/// A loopback port on the host whose connections are forwarded to `target` inside the ground's
/// network namespace (where pod IPs and ClusterIPs are): a connecting thread joins the namespace
/// first, and a socket stays in the namespace it was made in.
pub fn forward_into_ground(target: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inbound) = conn else { continue };
            std::thread::spawn(move || {
                let ns = std::fs::File::open(super::inside::NETNS_PATH)
                    .expect("the ground's network namespace");
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
                    .expect("joining the ground's network namespace");
                let Ok(outbound) = TcpStream::connect(target) else {
                    return;
                };
                let (mut a, mut b) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
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
    });
    addr
}
