//! The userspace proxy, only for the routes to the host (the `kubernetes` Service, 10.96.0.1:443, to
//! the API server on the host's loopback, which no DNAT in the ground namespace can reach): one
//! listener per such ClusterIP:port in the ground namespace; each connection is made again from
//! the host's namespace and bytes are copied both ways. Pod-backed Services are DNAT ([`super::nft`]).

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::netns_socket::NetnsSockets;
use super::routes::{Protocol, Routes, Target};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Proxy {
    sockets: NetnsSockets,
    routes: watch::Receiver<Arc<Routes>>,
    listeners: HashMap<SocketAddrV4, JoinHandle<()>>,
}

impl Proxy {
    pub fn new(sockets: NetnsSockets, routes: watch::Receiver<Arc<Routes>>) -> Self {
        Self {
            sockets,
            routes,
            listeners: HashMap::new(),
        }
    }

    /// Stops the listeners of ClusterIP:ports no longer routed (before their addresses go).
    pub fn stop_unrouted(&mut self) {
        let routes = self.routes.borrow().clone();
        self.listeners.retain(|at, task| {
            let keep = host_target(&routes, *at).is_some();
            if !keep {
                task.abort();
                tracing::info!(%at, "proxy: stopped listening");
            }
            keep
        });
    }

    /// Listens on every routed ClusterIP:port not listened on yet (their addresses must exist).
    /// A failed bind is logged and tried again at the next call.
    pub async fn start_routed(&mut self) {
        let routes = self.routes.borrow().clone();
        self.listeners.retain(|_, task| !task.is_finished());
        for ((proto, at), route) in &routes.0 {
            if *proto != Protocol::Tcp
                || !matches!(route.target, Target::Host(_))
                || self.listeners.contains_key(at)
            {
                continue;
            }
            let listener = match self.sockets.tcp_listener(SocketAddr::V4(*at)).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(%at, service = %route.service, "proxy: cannot listen: {e}");
                    continue;
                }
            };
            tracing::info!(%at, service = %route.service, "proxy: listening");
            let (at, routes) = (*at, self.routes.clone());
            let task = tokio::spawn(async move {
                loop {
                    match listener.accept().await {
                        Ok((conn, _)) => {
                            let target = host_target(&routes.borrow(), at);
                            tokio::spawn(forward(conn, at, target));
                        }
                        Err(e) => {
                            tracing::warn!(%at, "proxy: accept: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            });
            self.listeners.insert(at, task);
        }
    }
}

/// Where `at` leads on the host, if it is routed there.
fn host_target(routes: &Routes, at: SocketAddrV4) -> Option<SocketAddr> {
    match routes.0.get(&(Protocol::Tcp, at))?.target {
        Target::Host(addr) => Some(addr),
        Target::Endpoints(_) => None,
    }
}

async fn forward(conn: TcpStream, at: SocketAddrV4, target: Option<SocketAddr>) {
    let Some(to) = target else {
        return reject(conn, at, "no such service");
    };
    let upstream = connect(TcpStream::connect(to)).await;
    let mut conn = conn;
    let mut upstream = match upstream {
        Ok(u) => u,
        Err(e) => return reject(conn, at, &format!("connecting to {to}: {e}")),
    };
    if let Err(e) = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await {
        tracing::debug!(%at, %to, "proxy: connection ended: {e}");
    }
}

async fn connect(
    fut: impl Future<Output = std::io::Result<TcpStream>>,
) -> std::io::Result<TcpStream> {
    tokio::time::timeout(CONNECT_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// Closes with a reset, so that the client fails at once instead of reading an empty stream.
fn reject(conn: TcpStream, at: SocketAddrV4, why: &str) {
    tracing::info!(%at, "proxy: rejected: {why}");
    let _ = conn.set_zero_linger();
}
