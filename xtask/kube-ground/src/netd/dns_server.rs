//! The DNS server: UDP and TCP (two-byte length prefix, RFC 7766) on one address, answering from
//! the current [`Index`]. Authoritative for `cluster.local` only, with no upstream: nothing is
//! ever sent anywhere but back to the client.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

use super::dns::{UDP_MAX, respond};
use super::names::Index;

pub const TTL: u32 = 5;
const TCP_IDLE: Duration = Duration::from_secs(10);

pub type Names = watch::Receiver<Arc<Index>>;

fn answer(names: &Names, msg: &[u8], max_len: usize) -> Option<Vec<u8>> {
    let index = names.borrow().clone();
    respond(msg, |n| index.lookup(n), TTL, max_len)
}

pub async fn serve_udp(socket: UdpSocket, names: Names) {
    let mut buf = vec![0u8; 4096];
    loop {
        let (len, from) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("dns: udp receive: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Some(reply) = answer(&names, &buf[..len], UDP_MAX)
            && let Err(e) = socket.send_to(&reply, from).await
        {
            tracing::debug!(%from, "dns: udp send: {e}");
        }
    }
}

pub async fn serve_tcp(listener: TcpListener, names: Names) {
    loop {
        match listener.accept().await {
            Ok((conn, from)) => {
                let names = names.clone();
                tokio::spawn(async move {
                    if let Err(e) = tcp_connection(conn, names).await {
                        tracing::debug!(%from, "dns: tcp: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("dns: tcp accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn tcp_connection(mut conn: TcpStream, names: Names) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, conn.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            // Idle, or the client closed between messages.
            Err(_) | Ok(Err(_)) => return Ok(()),
        }
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        tokio::time::timeout(TCP_IDLE, conn.read_exact(&mut msg)).await??;
        let Some(reply) = answer(&names, &msg, usize::from(u16::MAX)) else {
            continue;
        };
        let mut out = Vec::with_capacity(reply.len() + 2);
        out.extend_from_slice(&(reply.len() as u16).to_be_bytes());
        out.extend_from_slice(&reply);
        conn.write_all(&out).await?;
    }
}
