//! The HTTP side: TLS, basic auth, probes, readiness only after the first collection, gzip
//! when the scraper accepts it, and a slow slurmrestd (wiremock: a real one cannot be made
//! slow on demand) hitting the source time limit.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use common::{Exporter, Metrics, clusters};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tls")
        .join(name)
}

fn basic(user: &str, password: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {b64}")
}

#[tokio::test]
async fn tls_and_basic_auth_guard_metrics_but_not_probes() {
    let c = clusters().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret pass\n").unwrap();
    let (cert, key) = (fixture("server.pem"), fixture("server.key"));
    let exporter = Exporter::start_with(
        &c.exporter_env(),
        &[
            "--sources",
            "diag",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--basic-auth-user",
            "prometheus",
            "--basic-auth-password-file",
            password.to_str().unwrap(),
        ],
        Some(&fixture("ca.pem")),
    );
    exporter.wait_ready().await;
    assert_eq!(exporter.get("/healthz", &[]).await.0, 200);
    assert_eq!(exporter.get("/readyz", &[]).await.0, 200);
    let (status, _, _) = exporter.get("/metrics", &[]).await;
    assert_eq!(status, 401);
    let wrong = basic("prometheus", "nope");
    assert_eq!(
        exporter
            .get("/metrics", &[("Authorization", &wrong)])
            .await
            .0,
        401
    );
    let right = basic("prometheus", "s3cret pass");
    let (status, ct, body) = exporter.get("/metrics", &[("Authorization", &right)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(ct.starts_with("text/plain"), "{ct}");
    let m = Metrics::parse_prometheus(&body);
    assert!(m.get("slurm_up", &[]).is_some());
    assert!(!exporter.logs().join("\n").contains("s3cret"));
}

/// The body without the one line computed per scrape (its value changes between scrapes).
fn without_age(body: &[u8]) -> String {
    String::from_utf8(body.to_vec())
        .expect("UTF-8 body")
        .lines()
        .filter(|l| !l.starts_with("slurm_exporter_snapshot_age_seconds "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `/metrics` asked for as `accept`, with `Accept-Encoding: encoding`.
async fn metrics(
    exporter: &Exporter,
    accept: &str,
    encoding: &str,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    exporter
        .get_raw(
            "/metrics",
            &[("Accept", accept), ("Accept-Encoding", encoding)],
        )
        .await
}

fn gunzip(body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    // A single-member decoder, as curl and some clients use.
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .expect("a valid gzip body");
    out
}

#[tokio::test]
async fn gzip_when_accepted_identity_otherwise() {
    let c = clusters().remove(0);
    // One collection only, so every scrape below serves the same snapshot.
    let exporter = Exporter::start(
        &c.exporter_env(),
        &["--sources", "diag,nodes,partitions", "--interval", "1h"],
    );
    exporter.wait_ready().await;
    for accept in ["text/plain", "application/openmetrics-text; version=1.0.0"] {
        let identity = exporter.get_raw("/metrics", &[("Accept", accept)]).await;
        assert_eq!(identity.0, 200);
        assert!(identity.1.get("content-encoding").is_none(), "{accept}");
        assert_eq!(identity.1["vary"], "Accept-Encoding");
        let text = String::from_utf8(identity.2.clone()).unwrap();
        assert!(
            text.contains("\nslurm_exporter_snapshot_age_seconds "),
            "{text}"
        );
        assert!(text.contains("slurm_up 1\n"), "{text}");
        for encoding in ["gzip", "deflate, GZIP;q=0.5", "*", "br;q=1, x-gzip"] {
            let (status, headers, body) = metrics(&exporter, accept, encoding).await;
            assert_eq!(status, 200);
            assert_eq!(headers["content-encoding"], "gzip", "{encoding}");
            assert_eq!(headers["vary"], "Accept-Encoding");
            assert_eq!(headers["content-type"], identity.1["content-type"]);
            assert!(
                body.len() < identity.2.len() / 3,
                "{encoding}: {}",
                body.len()
            );
            let plain = gunzip(&body);
            assert_eq!(without_age(&plain), without_age(&identity.2), "{encoding}");
            let age = String::from_utf8(plain).unwrap();
            assert!(age.contains("\nslurm_exporter_snapshot_age_seconds "));
            if accept.starts_with("application/openmetrics-text") {
                assert!(age.ends_with("\n# EOF\n"), "{age}");
            }
        }
        for encoding in [
            "identity",
            "gzip;q=0",
            "*;q=0",
            "br, deflate",
            "*, gzip;q=0",
        ] {
            let (status, headers, body) = metrics(&exporter, accept, encoding).await;
            assert_eq!(status, 200);
            assert!(headers.get("content-encoding").is_none(), "{encoding}");
            assert_eq!(without_age(&body), without_age(&identity.2), "{encoding}");
        }
    }
}

#[tokio::test]
async fn slow_slurmrestd_hits_the_time_limit_and_readiness_waits_for_the_first_round() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_body_string("{}")
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let env = vec![
        ("SLURM_REST_URL".to_string(), server.uri()),
        ("SLURM_JWT".to_string(), "a.b.c".to_string()),
    ];
    let started = Instant::now();
    let exporter = Exporter::start(
        &env,
        &[
            "--sources",
            "diag,nodes",
            "--timeout",
            "2s",
            // Longer than the time limit: the first round ends at the limit, before a second
            // tick would ping slurmrestd and mark the sources down early.
            "--interval",
            "5s",
        ],
    );
    let (status, _, _) = exporter.get("/readyz", &[]).await;
    assert_eq!(status, 503, "ready before the first collection finished");
    let (status, _, body) = exporter.get("/metrics", &[]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(exporter.get("/healthz", &[]).await.0, 200);
    exporter.wait_ready().await;
    assert!(started.elapsed() >= Duration::from_millis(1900));
    let m = exporter.scrape().await;
    assert_eq!(m.get("slurm_up", &[]), Some(0.0));
    assert_eq!(
        m.get(
            "slurm_exporter_collect_errors_total",
            &[("source", "nodes"), ("kind", "timeout")]
        ),
        Some(1.0),
        "{}",
        m.text
    );
    let took = m
        .get(
            "slurm_exporter_collect_duration_seconds",
            &[("source", "diag")],
        )
        .unwrap();
    assert!((1.9..5.0).contains(&took), "{took}");
}
