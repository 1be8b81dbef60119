//! The userspace Service proxy: one listener per ClusterIP:port in the ground namespace; each
//! connection goes to the endpoint [`RoundRobin`] picks (connected from the ground namespace), or
//! to the API server on the host's loopback for the `kubernetes` Service, and bytes are copied both
//! ways. A connection with nowhere to go is reset at once, as kube-proxy rejects it.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::netns_socket::NetnsSockets;
use super::routes::{RoundRobin, Routes, Target};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Proxy {
    sockets: NetnsSockets,
    routes: watch::Receiver<Arc<Routes>>,
    turns: Arc<RoundRobin>,
    listeners: HashMap<SocketAddrV4, JoinHandle<()>>,
}

impl Proxy {
    pub fn new(sockets: NetnsSockets, routes: watch::Receiver<Arc<Routes>>) -> Self {
        Self {
            sockets,
            routes,
            turns: Arc::default(),
            listeners: HashMap::new(),
        }
    }

    /// Stops the listeners of ClusterIP:ports no longer routed (before their addresses go).
    pub fn stop_unrouted(&mut self) {
        let routes = self.routes.borrow().clone();
        self.listeners.retain(|at, task| {
            let keep = routes.0.contains_key(at);
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
        for (at, route) in &routes.0 {
            if self.listeners.contains_key(at) {
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
            let (at, sockets, routes, turns) = (
                *at,
                self.sockets.clone(),
                self.routes.clone(),
                self.turns.clone(),
            );
            let task = tokio::spawn(async move {
                loop {
                    match listener.accept().await {
                        Ok((conn, _)) => {
                            let target = routes.borrow().0.get(&at).map(|r| r.target.clone());
                            tokio::spawn(forward(conn, at, target, sockets.clone(), turns.clone()));
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

async fn forward(
    mut conn: TcpStream,
    at: SocketAddrV4,
    target: Option<Target>,
    sockets: NetnsSockets,
    turns: Arc<RoundRobin>,
) {
    let (to, upstream) = match target {
        Some(Target::Host(addr)) => (addr, connect(TcpStream::connect(addr)).await),
        Some(Target::Endpoints(eps)) => match turns.pick(at, &eps) {
            Some(ep) => {
                let addr = SocketAddr::V4(ep);
                (addr, connect(sockets.tcp_connect(addr)).await)
            }
            None => return reject(conn, at, "no ready endpoint"),
        },
        None => return reject(conn, at, "no such service"),
    };
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
