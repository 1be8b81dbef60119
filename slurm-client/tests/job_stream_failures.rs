//! The streamed job listing (`Client::for_each_job`) without a cluster: recorded real
//! listings of every version give the same jobs as `list_jobs`, and the failures a real
//! slurmrestd does not produce on demand (errors[] with 200 after the jobs, a field that
//! does not match, bodies cut short, resets, gateway errors) give clear errors. Served by
//! wiremock or a raw TCP listener on 127.0.0.1.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::loopback::{Raw, answer, fast_retries, raw_server};
use slurm_client::{ApiVersion, Client, Error, Job, JobQuery, RetryPolicy, StaticToken};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PING: &str = r#"{"pings": [], "meta": {"slurm": {"release": "26.05.0"}}, "errors": []}"#;
const JOBS: &str = "/slurm/v0.0.42/jobs/";

fn client(url: &str, version: ApiVersion, retry: RetryPolicy) -> Client {
    Client::builder(url)
        .token(StaticToken::new("test.token.value"))
        .version(version)
        .retry_policy(retry)
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Streams a listing into a `Vec`, returning it with the outcome.
async fn stream(
    client: &Client,
    query: &JobQuery,
) -> (Vec<Job>, Result<slurm_client::StreamedJobs, Error>) {
    let mut jobs = Vec::new();
    let result = client
        .for_each_job(query, |job| jobs.push(job))
        .await
        .map(|r| r.value);
    (jobs, result)
}

async fn mock(version: ApiVersion, status: u16, body: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/slurm/{version}/ping")))
        .respond_with(ResponseTemplate::new(200).set_body_string(PING))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/slurm/{version}/jobs/")))
        .respond_with(
            ResponseTemplate::new(status)
                .insert_header("content-type", "application/json")
                .set_body_string(body),
        )
        .mount(&server)
        .await;
    server
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(release: &str, version: ApiVersion, name: &str) -> String {
    let file = fixtures_dir()
        .join(release)
        .join(version.as_str())
        .join(name);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Every (release, REST version) with a recorded job listing, from the fixtures directory.
fn recorded_listings() -> Vec<(String, ApiVersion)> {
    let subdirs = |dir: PathBuf| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let mut found: Vec<(String, ApiVersion)> = subdirs(fixtures_dir())
        .into_iter()
        .flat_map(subdirs)
        .filter(|dir| dir.join("slurm_jobs.json").is_file())
        .map(|dir| {
            let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
            let version = name(&dir)
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            (name(dir.parent().unwrap()), version)
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn recorded_listings_stream_as_list_jobs_reads_them() {
    let recorded = recorded_listings();
    assert!(recorded.len() >= 7, "{recorded:?}");
    let mut checked = 0;
    for (release, version) in recorded {
        if !version.is_compiled() {
            continue;
        }
        let body = fixture(&release, version, "slurm_jobs.json");
        let server = mock(version, 200, body).await;
        let c = client(&server.uri(), version, RetryPolicy::none());
        let label = format!("{release} {version}");
        let listed = c.list_jobs(&JobQuery::new()).await.unwrap();
        let (jobs, streamed) = stream(&c, &JobQuery::new()).await;
        let streamed = streamed.unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(!jobs.is_empty(), "{label}");
        assert_eq!(jobs, listed.value.jobs, "{label}");
        assert_eq!(streamed.jobs, jobs.len(), "{label}");
        assert_eq!(streamed.listed, jobs.len(), "{label}");
        assert_eq!(streamed.last_update, listed.value.last_update, "{label}");
        assert_eq!(
            streamed.last_backfill, listed.value.last_backfill,
            "{label}"
        );
        assert!(!streamed.unchanged, "{label}");

        // The query's filters apply as for `list_jobs`.
        let name = jobs[0].name.clone();
        let query = JobQuery::new().name(name.clone());
        let (kept, streamed) = stream(&c, &query).await;
        let streamed = streamed.unwrap();
        assert!(kept.iter().all(|j| j.name == name), "{label}");
        assert_eq!(
            kept,
            c.list_jobs(&query).await.unwrap().value.jobs,
            "{label}"
        );
        assert_eq!(
            (streamed.jobs, streamed.listed),
            (kept.len(), jobs.len()),
            "{label}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no recorded version is compiled in");
}

/// A small real job of v0.0.42, from the recordings.
fn one_job() -> serde_json::Value {
    let body = fixture("26.05", ApiVersion::V0_0_42, "slurm_jobs.json");
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    value["jobs"][0].clone()
}

#[tokio::test]
async fn errors_after_the_jobs_make_the_listing_an_error() {
    let body = serde_json::json!({
        "jobs": [one_job(), one_job()],
        "last_update": {"set": true, "infinite": false, "number": 5},
        "errors": [{"error_number": 9001, "error": "Something broke", "description": "late"}],
        "warnings": [{"description": "w"}],
    });
    let server = mock(ApiVersion::V0_0_42, 200, body.to_string()).await;
    let c = client(&server.uri(), ApiVersion::V0_0_42, RetryPolicy::none());
    let (jobs, result) = stream(&c, &JobQuery::new()).await;
    // The jobs came before the errors; the caller learns at the end that they don't count.
    assert_eq!(jobs.len(), 2);
    let err = result.unwrap_err();
    assert_eq!(err.label(), "rejected", "{err}");
    assert!(err.to_string().contains("late"), "{err}");
}

#[tokio::test]
async fn warnings_and_meta_come_back() {
    let body = serde_json::json!({
        "jobs": [one_job()],
        "meta": {"slurm": {"release": "26.05.1", "cluster": "c"}},
        "warnings": [{"description": "w1"}],
        "errors": [],
    });
    let server = mock(ApiVersion::V0_0_42, 200, body.to_string()).await;
    let c = client(&server.uri(), ApiVersion::V0_0_42, RetryPolicy::none());
    let response = c.for_each_job(&JobQuery::new(), |_| {}).await.unwrap();
    assert_eq!(response.meta.release.as_deref(), Some("26.05.1"));
    assert_eq!(response.warnings[0].description.as_deref(), Some("w1"));
    assert_eq!(response.value.jobs, 1);
}

#[tokio::test]
async fn a_field_that_does_not_match_names_its_path() {
    let mut bad = one_job();
    bad["job_id"] = "seven".into();
    let body = serde_json::json!({"jobs": [one_job(), bad, one_job()], "errors": []});
    let server = mock(ApiVersion::V0_0_42, 200, body.to_string()).await;
    let c = client(&server.uri(), ApiVersion::V0_0_42, RetryPolicy::none());
    let (jobs, result) = stream(&c, &JobQuery::new()).await;
    assert_eq!(jobs.len(), 1, "handing out stops at the mismatch");
    let err = result.unwrap_err();
    let Error::Decode {
        json_path, excerpt, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(json_path, "jobs[1].job_id");
    assert!(excerpt.contains("seven"), "{excerpt}");
}

#[tokio::test]
async fn error_statuses_are_classified_and_gateway_errors_retried() {
    let e1007 = r#"{"errors": [{"error_number": 1007, "error": "Protocol authentication error"}]}"#;
    let server = mock(ApiVersion::V0_0_42, 511, e1007.into()).await;
    let c = client(&server.uri(), ApiVersion::V0_0_42, fast_retries());
    let (jobs, result) = stream(&c, &JobQuery::new()).await;
    assert!(jobs.is_empty());
    assert_eq!(result.unwrap_err().label(), "auth");

    let server = mock(
        ApiVersion::V0_0_42,
        200,
        r#"{"jobs": [], "errors": []}"#.into(),
    )
    .await;
    Mock::given(method("GET"))
        .and(path(JOBS))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    let c = client(&server.uri(), ApiVersion::V0_0_42, fast_retries());
    let (_, result) = stream(&c, &JobQuery::new()).await;
    assert_eq!(result.unwrap().listed, 0);
    let jobs_requests = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == JOBS)
        .count();
    assert_eq!(jobs_requests, 3);
}

fn listing(jobs: usize) -> String {
    let job = one_job().to_string();
    let jobs = vec![job; jobs].join(",");
    format!(r#"{{"jobs": [{jobs}], "errors": [], "warnings": []}}"#)
}

#[tokio::test]
async fn a_body_cut_short_is_a_clear_error_and_not_retried_after_a_job() {
    let full = listing(3);
    let cut = &full[..full.len() * 2 / 3];
    // Promises the whole length, sends two thirds, closes: the transport notices.
    let url = raw_server(vec![
        answer(PING, Some(PING.len())),
        answer(cut, Some(full.len())),
        answer(&full, Some(full.len())),
    ])
    .await;
    let c = client(&url, ApiVersion::V0_0_42, fast_retries());
    let (jobs, result) = stream(&c, &JobQuery::new()).await;
    assert!(!jobs.is_empty(), "a job was handed out before the cut");
    let err = result.unwrap_err();
    assert_eq!(
        err.label(),
        "transport",
        "not retried once a job was out: {err}"
    );

    // Without a length the close looks like a normal end: the JSON says it is cut.
    let url = raw_server(vec![answer(PING, None), answer(cut, None)]).await;
    let c = client(&url, ApiVersion::V0_0_42, RetryPolicy::none());
    let (_, result) = stream(&c, &JobQuery::new()).await;
    let err = result.unwrap_err();
    let Error::Decode {
        json_path, message, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(message.contains("ends in the middle"), "{message}");
    assert!(json_path.starts_with("jobs["), "{json_path}");
}

#[tokio::test]
async fn a_reset_before_any_job_is_retried() {
    let full = listing(2);
    let url = raw_server(vec![
        answer(PING, Some(PING.len())),
        Raw::Reset,
        answer(&full, Some(full.len())),
    ])
    .await;
    let c = client(&url, ApiVersion::V0_0_42, fast_retries());
    let (jobs, result) = stream(&c, &JobQuery::new()).await;
    assert_eq!(result.unwrap().jobs, 2);
    assert_eq!(jobs.len(), 2);
}
