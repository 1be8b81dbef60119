//! The accept loop: a connection slot before each accept (at the cap, clients wait in the
//! kernel's backlog), TLS handshakes under a deadline in their own tasks, HTTP/1.1 with
//! keep-alive and hyper's header read timeout, and on shutdown a drain: stop accepting, let each
//! connection finish its request and close, cut what is left at the drain deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::{Limits, fd_limit, stack};

/// Serves `router` on `listener` (over TLS with `tls`) under `limits` until `shutdown`
/// completes, then drains: no new connections, in-flight requests finish (for at most
/// `limits.drain_deadline`), and it returns.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let app = stack::limited(router, limits);
    let max_connections = fd_limit::connection_cap(limits.max_connections);
    let slots = Arc::new(Semaphore::new(max_connections));
    let (drain_tx, drain_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let local = listener.local_addr().ok();
    tokio::pin!(shutdown);
    loop {
        // Finished connections' results, so that the set does not grow with every client.
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            biased;
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors (EMFILE) or a connection reset before accept:
                    // pause rather than spin.
                    tracing::warn!(addr = ?local, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (tls, app, limits, drain) =
            (tls.clone(), app.clone(), limits.clone(), drain_rx.clone());
        connections.spawn(async move {
            let _slot = slot;
            connection(tcp, peer, tls, app, &limits, drain).await;
        });
    }
    drop(listener);
    let open = connections.len();
    let _ = drain_tx.send(true);
    tracing::info!(addr = ?local, open, "server draining");
    let drained = tokio::time::timeout(limits.drain_deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            addr = ?local,
            cut = connections.len(),
            deadline = ?limits.drain_deadline,
            "connections still open at the drain deadline are cut"
        );
    }
    // Dropping the set aborts what is left.
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: &Limits,
    mut drain: watch::Receiver<bool>,
) {
    // Small writes go out at once: with Nagle's algorithm the tail of a response waited for
    // the client's delayed ACK (up to 40 ms, measured on the exporter's /metrics).
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let Some(acceptor) = tls else {
        return http(tcp, peer, app, limits, drain).await;
    };
    let handshake = tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(tcp));
    let stream = tokio::select! {
        () = draining(&mut drain) => return,
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
        },
    };
    http(stream, peer, app, limits, drain).await;
}

async fn http<I>(
    io: I,
    peer: SocketAddr,
    app: Router,
    limits: &Limits,
    mut drain: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = draining(&mut drain) => {
            // Finishes the request in progress, if any, then closes.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Resolves once the server drains (the guard `wait_for` returns is not `Send`, so it ends here).
async fn draining(drain: &mut watch::Receiver<bool>) {
    let _ = drain.wait_for(|d| *d).await;
}
