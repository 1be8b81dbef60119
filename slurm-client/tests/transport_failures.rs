//! Failures a real slurmrestd does not produce on demand: gateway errors, slow answers,
//! cut-short bodies and reset connections. Served by wiremock or a raw TCP listener on
//! 127.0.0.1.

use crate::common;

use std::time::Duration;

use common::loopback::{Raw, answer, fast_retries, raw_server};
use serde_json::{Value, json};
use slurm_client::{Client, Error, Request, RetryPolicy, StaticToken};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn client(url: &str, retry: RetryPolicy) -> Client {
    Client::builder(url)
        .token(StaticToken::new("test.token.value"))
        .retry_policy(retry)
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn ok_body() -> Value {
    json!({"pings": [], "meta": {"slurm": {"release": "24.11.5"}}, "errors": [], "warnings": [{"description": "w1"}]})
}

async fn mount_status(server: &MockServer, p: &str, status: u16, times: u64) {
    Mock::given(method("GET"))
        .and(path(p))
        .respond_with(ResponseTemplate::new(status).set_body_string("gateway trouble"))
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn gateway_errors_are_retried_then_succeed() {
    let server = MockServer::start().await;
    let p = "/slurm/v0.0.42/ping";
    for status in [502, 503, 504] {
        mount_status(&server, p, status, 1).await;
    }
    Mock::given(method("GET"))
        .and(path(p))
        .respond_with(ResponseTemplate::new(200).set_body_json(ok_body()))
        .with_priority(2)
        .mount(&server)
        .await;

    let response = client(&server.uri(), fast_retries())
        .request::<Value>(Request::get(p))
        .await
        .unwrap();
    assert_eq!(response.meta.release.as_deref(), Some("24.11.5"));
    assert_eq!(response.warnings[0].description.as_deref(), Some("w1"));
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test]
async fn retries_are_bounded() {
    let server = MockServer::start().await;
    let p = "/slurm/v0.0.42/jobs";
    mount_status(&server, p, 503, 100).await;
    let err = client(&server.uri(), fast_retries())
        .request::<Value>(Request::get(p))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Status { status: 503, .. }), "{err:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test]
async fn non_idempotent_requests_are_never_retried() {
    let server = MockServer::start().await;
    let p = "/slurm/v0.0.42/job/submit";
    Mock::given(method("POST"))
        .and(path(p))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let err = client(&server.uri(), fast_retries())
        .request::<Value>(Request::post(p).json(&json!({"job": {}})))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn slurmdb_auth_502_is_not_retried() {
    let server = MockServer::start().await;
    let p = "/slurmdb/v0.0.42/jobs";
    let body =
        json!({"errors": [{"error_number": 7000, "error": "Unable to connect to database"}]});
    Mock::given(method("GET"))
        .and(path(p))
        .respond_with(ResponseTemplate::new(502).set_body_json(body))
        .mount(&server)
        .await;
    let err = client(&server.uri(), fast_retries())
        .request::<Value>(Request::get(p))
        .await
        .unwrap_err();
    assert_eq!(err.label(), "auth", "{err}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn slow_answer_is_a_timeout() {
    let server = MockServer::start().await;
    let p = "/slurm/v0.0.42/jobs";
    Mock::given(method("GET"))
        .and(path(p))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(ok_body())
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&server)
        .await;
    let c = Client::builder(server.uri())
        .retry_policy(RetryPolicy::none())
        .request_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = c.request::<Value>(Request::get(p)).await.unwrap_err();
    assert_eq!(err.label(), "timeout", "{err}");
    assert!(err.to_string().contains("GET /slurm/v0.0.42/jobs"), "{err}");

    // A per-request timeout overrides the client's.
    let c = client(&server.uri(), RetryPolicy::none());
    let err = c
        .request::<Value>(Request::get(p).timeout(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(err.label(), "timeout", "{err}");
}

#[tokio::test]
async fn connection_reset_is_a_transport_error() {
    let url = raw_server(vec![Raw::Reset]).await;
    let err = client(&url, RetryPolicy::none())
        .request::<Value>(Request::get("/slurm/v0.0.42/ping"))
        .await
        .unwrap_err();
    assert_eq!(err.label(), "transport", "{err}");
}

#[tokio::test]
async fn connection_reset_is_retried_for_idempotent_requests() {
    let body = ok_body().to_string();
    let url = raw_server(vec![Raw::Reset, answer(&body, Some(body.len()))]).await;
    let response = client(&url, fast_retries())
        .request::<Value>(Request::get("/slurm/v0.0.42/ping"))
        .await
        .unwrap();
    assert_eq!(response.meta.release.as_deref(), Some("24.11.5"));
}

#[tokio::test]
async fn body_cut_short_is_a_transport_error() {
    // Promises 500 bytes, sends 30, closes.
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n";
    let bytes = format!("{head}{{\"jobs\": [{{\"job_id\": 1}}, {{\"jo").into_bytes();
    let url = raw_server(vec![Raw::Send(bytes)]).await;
    let err = client(&url, RetryPolicy::none())
        .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
        .await
        .unwrap_err();
    assert_eq!(err.label(), "transport", "{err}");
}

#[tokio::test]
async fn body_cut_short_without_length_is_a_decode_error() {
    // No content-length: the close looks like a normal end, so the JSON is what breaks.
    let bytes = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"jobs\": [{\"job_id\": 1}, {\"jo".to_vec();
    let url = raw_server(vec![Raw::Send(bytes)]).await;
    let err = client(&url, RetryPolicy::none())
        .request::<Value>(Request::get("/slurm/v0.0.42/jobs"))
        .await
        .unwrap_err();
    let Error::Decode { path, excerpt, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, "/slurm/v0.0.42/jobs");
    assert!(excerpt.contains("job_id"), "{excerpt}");
}
