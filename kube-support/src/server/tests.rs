//! The hardened server against raw TCP clients: each limit answered as documented, and a
//! graceful shutdown that finishes the request in progress and refuses new connections.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::{Limits, serve};

fn app() -> Router {
    Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route(
            "/len",
            post(|body: bytes::Bytes| async move { body.len().to_string() }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "slow done"
            }),
        )
}

/// A server with `limits` on a free port; the sender shuts it down, the handle ends with it.
async fn start(limits: Limits) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        serve(listener, None, app(), &limits, async {
            let _ = rx.await;
        })
        .await
    });
    (addr, tx, task)
}

async fn roundtrip(addr: SocketAddr, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn fast() -> Limits {
    Limits {
        header_read_timeout: Duration::from_secs(1),
        ..Limits::WEBHOOK
    }
}

#[tokio::test]
async fn a_slow_head_is_closed_after_the_header_timeout() {
    let (addr, _stop, _task) = start(fast()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "still open after 5 s");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // hyper answers 408 to a head it gave up on.
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_serves_requests_then_closes() {
    let (addr, _stop, _task) = start(fast()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    for _ in 0..2 {
        tcp.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = tcp.read(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("ok"),
            "{text}"
        );
    }
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut rest))
        .await
        .expect("idle connection closed")
        .unwrap();
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413() {
    let limits = Limits {
        max_body_bytes: 1000,
        ..fast()
    };
    let (addr, _stop, _task) = start(limits).await;
    // Announced: refused before the body is read.
    let r = roundtrip(
        addr,
        b"POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
    // Chunked: cut at the cap.
    let mut req =
        b"POST /len HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            .to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"200\r\n");
        req.extend_from_slice(&[b'a'; 0x200]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = roundtrip(addr, &req).await;
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
    // At the cap: served.
    let mut req =
        b"POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
            .to_vec();
    req.extend_from_slice(&[b'a'; 1000]);
    let r = roundtrip(addr, &req).await;
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("1000"), "{r}");
}

/// The first 64 KiB of a body are not charged to the budget.
const FREE: usize = 64 * 1024;

#[tokio::test]
async fn bodies_beyond_the_shared_budget_get_503_and_the_budget_comes_back() {
    let limits = Limits {
        max_body_bytes: FREE + 1000,
        max_body_bytes_in_flight: 1500,
        ..fast()
    };
    let (addr, _stop, _task) = start(limits).await;
    // One body announced and held open takes 1000 of the 1500 (its first 64 KiB are free).
    let big = FREE + 1000;
    let head = format!(
        "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\nConnection: close\r\n\r\n"
    );
    let mut holder = TcpStream::connect(addr).await.unwrap();
    holder.write_all(head.as_bytes()).await.unwrap();
    holder.write_all(b"aaaa").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut req = head.clone().into_bytes();
    req.extend_from_slice(&vec![b'a'; big]);
    let r = roundtrip(addr, &req).await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(r.contains("memory budget"), "{r}");
    // A small body is not charged: the holder does not lock it out.
    let small =
        b"POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
    let r = roundtrip(addr, small).await;
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with('3'), "{r}");
    // The holder finishes; its charge is returned.
    holder.write_all(&vec![b'a'; big - 4]).await.unwrap();
    let mut out = String::new();
    holder.read_to_string(&mut out).await.unwrap();
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with(&big.to_string()),
        "{out}"
    );
    let r = roundtrip(addr, &req).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[tokio::test]
async fn requests_over_the_concurrency_cap_get_503_at_once() {
    let limits = Limits {
        max_concurrent_requests: 1,
        ..fast()
    };
    let (addr, _stop, _task) = start(limits).await;
    let slow = tokio::spawn(roundtrip(
        addr,
        b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let r = roundtrip(
        addr,
        b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(slow.await.unwrap().ends_with("slow done"));
}

#[tokio::test]
async fn the_request_deadline_answers_503() {
    let limits = Limits {
        request_deadline: Duration::from_millis(300),
        ..fast()
    };
    let (addr, _stop, _task) = start(limits).await;
    let r = roundtrip(
        addr,
        b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight_and_refuses_new_connections() {
    let (addr, stop, task) = start(fast()).await;
    // An idle keep-alive connection must not hold the drain up.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let _ = idle.read(&mut buf).await.unwrap();
    let in_flight = tokio::spawn(roundtrip(addr, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    stop.send(()).unwrap();
    let answer = in_flight.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("slow done"), "{answer}");
    // Kept alive by the client, the connection is closed after the answer all the same.
    tokio::time::timeout(Duration::from_secs(3), task)
        .await
        .expect("serve returned after the drain")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}

#[tokio::test]
async fn the_drain_deadline_cuts_what_does_not_finish() {
    let limits = Limits {
        drain_deadline: Duration::from_millis(300),
        ..fast()
    };
    let (addr, stop, task) = start(limits).await;
    let in_flight = tokio::spawn(roundtrip(addr, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).unwrap();
    let started = Instant::now();
    task.await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert_eq!(in_flight.await.unwrap(), "");
}
