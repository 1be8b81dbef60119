//! The client's limits against servers a real slurmrestd cannot be made to be: one that
//! accepts connections and never answers (the call's deadline, retries included), and ones
//! that send bodies without end (the body limits, with memory staying near them). Served by
//! a raw TCP listener on 127.0.0.1.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::loopback::fast_retries;
use serde_json::Value;
use slurm_client::{ApiVersion, Client, ClientBuilder, Error, ErrorKind, JobQuery, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PING: &str = r#"{"pings": [], "meta": {"slurm": {"release": "26.05.0"}}, "errors": []}"#;

/// What the server sends after the head of an answer to anything but a ping.
#[derive(Clone, Copy)]
enum Serve {
    /// Nothing, ever (the connection stays open).
    Hang,
    /// An answer with this status and, as its body, `start` and then `fill` without end.
    Endless {
        status: u16,
        start: &'static str,
        fill: u8,
    },
    /// A 200 answer promising this many bytes, then nothing.
    Promise(u64),
}

/// A server doing `serve` on every connection; returns its URL and the connections count.
async fn server(serve: Serve) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(connection(stream, serve));
        }
    });
    (url, accepted)
}

async fn connection(mut stream: TcpStream, serve: Serve) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if String::from_utf8_lossy(&head).contains("/ping") {
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PING}",
            PING.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        return;
    }
    match serve {
        Serve::Hang => {
            // Keeps the connection open (and the request unanswered) until the client leaves.
            let _ = stream.read(&mut buf).await;
        }
        Serve::Endless {
            status,
            start,
            fill,
        } => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{start}"
            );
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![fill; 64 * 1024];
            // Gigabytes if the client keeps reading: it stops when it goes away.
            while stream.write_all(&chunk).await.is_ok() {}
        }
        Serve::Promise(length) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.read(&mut buf).await;
        }
    }
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .version(ApiVersion::V0_0_42)
        .retry_policy(fast_retries())
}

/// The resident set of this process, from /proc (Linux).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn a_server_that_never_answers_costs_one_call_deadline_retries_included() {
    let (url, accepted) = server(Serve::Hang).await;
    let client = builder(&url)
        .request_timeout(Duration::from_secs(1))
        .call_timeout(Duration::from_millis(2500))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = client
        .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("call deadline of 2.5s"), "{err}");
    assert!(
        (Duration::from_millis(2400)..Duration::from_millis(3500)).contains(&took),
        "{took:?}"
    );
    // Two attempts timed out on their own and were retried; the third was cut off.
    assert_eq!(accepted.load(Ordering::SeqCst), 3);

    // Per request, and for a streamed listing too.
    let started = Instant::now();
    let err = client
        .request::<Value>(
            Request::get("/slurm/v0.0.42/jobs").call_timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_millis(1000));
    let client = builder(&url)
        .call_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = client
        .for_each_job(&JobQuery::new(), |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_millis(2500));
}

/// Runs `call` and checks that it fails with `TooLarge` at `limit`, quickly, with the
/// resident set growing by no more than a few times the limit.
async fn too_large<F: Future<Output = Result<(), Error>>>(limit: u64, call: F) -> Error {
    let before = rss_bytes();
    let started = Instant::now();
    let err = call.await.unwrap_err();
    let grew = rss_bytes().saturating_sub(before);
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    let Error::TooLarge { limit: named, .. } = &err else {
        unreachable!()
    };
    assert_eq!(*named, limit);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Other tests of this binary may allocate at the same time: a wide bound, still far
    // below the gigabytes the server would send.
    assert!(grew < 4 * limit + (32 << 20), "RSS grew by {grew} bytes");
    err
}

#[tokio::test]
async fn an_endless_body_stops_at_the_limit() {
    let limit = 16 << 20;
    let (url, _) = server(Serve::Endless {
        status: 200,
        start: r#"{"jobs": ""#,
        fill: b'x',
    })
    .await;
    let client = builder(&url).max_body_bytes(limit).build().unwrap();
    let err = too_large(limit, async {
        client
            .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
            .await
            .map(drop)
    })
    .await;
    assert!(
        err.to_string()
            .contains("answer body larger than the limit of 16777216 bytes"),
        "{err}"
    );
    assert_eq!(err.status(), Some(200));

    // A streamed listing holds one element at a time: an element without end is too large.
    let (url, _) = server(Serve::Endless {
        status: 200,
        start: r#"{"jobs": [{"name": ""#,
        fill: b'x',
    })
    .await;
    let client = builder(&url).max_body_bytes(limit).build().unwrap();
    let err = too_large(limit, async {
        client
            .for_each_job(&JobQuery::new(), |_| {})
            .await
            .map(drop)
    })
    .await;
    assert!(err.to_string().contains("jobs[]"), "{err}");
}

#[tokio::test]
async fn a_promised_length_past_the_limit_fails_before_reading() {
    let (url, _) = server(Serve::Promise(10 << 30)).await;
    let client = builder(&url).build().unwrap();
    let err = too_large(ClientBuilder::DEFAULT_MAX_BODY_BYTES, async {
        client
            .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
            .await
            .map(drop)
    })
    .await;
    assert!(err.to_string().contains("536870912 bytes"), "{err}");
}

#[tokio::test]
async fn an_error_answer_is_held_to_its_own_lower_limit() {
    let (url, _) = server(Serve::Endless {
        status: 500,
        start: r#"{"errors": [{"description": ""#,
        fill: b'e',
    })
    .await;
    let client = builder(&url).build().unwrap();
    let limit = ClientBuilder::MAX_ERROR_BODY_BYTES;
    let err = too_large(limit, async {
        client
            .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
            .await
            .map(drop)
    })
    .await;
    assert!(err.to_string().contains("error answer body"), "{err}");
    assert_eq!(err.status(), Some(500));
    assert!(!err.is_transient());
    let err = too_large(limit, async {
        client
            .for_each_job(&JobQuery::new(), |_| {})
            .await
            .map(drop)
    })
    .await;
    assert_eq!(err.status(), Some(500));
}

#[tokio::test]
async fn a_streamed_listing_is_limited_in_what_it_holds_not_in_its_length() {
    // 4,000 small jobs (~100 KiB) under a 16 KiB limit: every element fits.
    let jobs: Vec<String> = (1..=4000)
        .map(|id| format!(r#"{{"job_id": {id}, "name": "job-{id}"}}"#))
        .collect();
    let body = format!(
        r#"{{"jobs": [{}], "meta": {{"slurm": {{"release": "26.05.0"}}}}, "errors": []}}"#,
        jobs.join(", ")
    );
    let server = mock_listing(body).await;
    let client = builder(&server.uri())
        .max_body_bytes(16 << 10)
        .build()
        .unwrap();
    let mut seen = 0;
    client
        .for_each_job(&JobQuery::new(), |_| seen += 1)
        .await
        .unwrap();
    assert_eq!(seen, 4000);
    // Read whole, the same answer is too large.
    let err = client.list_jobs(&JobQuery::new()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
}

/// A wiremock server answering pings and `GET …/jobs/` with `body`.
async fn mock_listing(body: String) -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/ping"))
        .respond_with(ResponseTemplate::new(200).set_body_string(PING))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/jobs/"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(body),
        )
        .mount(&server)
        .await;
    server
}
