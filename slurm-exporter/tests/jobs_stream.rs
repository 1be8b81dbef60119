//! The jobs source counts a streamed listing: a body cut in the middle is a failed
//! collection (so the collector keeps serving the last snapshot), and the next collection
//! asks for the full listing again. Served by a raw TCP listener on 127.0.0.1: a real
//! slurmrestd does not cut its answers on demand.

use std::time::Duration;

use slurm_client::{ApiVersion, Client, RetryPolicy, StaticToken};
use slurm_exporter::sources::jobs::Jobs;
use slurm_exporter::sources::refresh::Refresh;
use slurm_exporter::sources::{Collected, Ctx, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PING: &str = r#"{"pings": [], "meta": {"slurm": {"release": "26.05.0"}}, "errors": []}"#;

/// Answers each connection with the next of `bodies` (`(body, promised length)`), then stops.
async fn raw_server(bodies: Vec<(String, usize)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for (body, length) in bodies {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 8192];
            let _ = stream.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    });
    format!("http://{addr}")
}

fn job(id: u32, state: &str) -> String {
    format!(
        r#"{{"job_id": {id}, "name": "j{id}", "user_name": "alice", "partition": "debug",
            "account": "science", "job_state": ["{state}"], "cpus": {{"set": true, "infinite": false, "number": 2}}}}"#
    )
}

fn listing(jobs: &[String]) -> String {
    format!(
        r#"{{"jobs": [{}], "last_update": {{"set": true, "infinite": false, "number": 100}}, "errors": [], "warnings": []}}"#,
        jobs.join(",")
    )
}

fn whole(body: String) -> (String, usize) {
    let n = body.len();
    (body, n)
}

#[tokio::test]
async fn a_cut_listing_fails_the_collection_and_the_next_one_is_full() {
    let jobs: Vec<String> = (1..=3).map(|i| job(i, "PENDING")).collect();
    let full = listing(&jobs);
    let cut = full[..full.len() / 2].to_string();
    let url = raw_server(vec![
        whole(PING.into()),
        (cut, full.len()),
        whole(full.clone()),
        // The partition names asked after a changed listing (none here: an empty list).
        whole(r#"{"partitions": [], "errors": []}"#.into()),
    ])
    .await;
    let client = Client::builder(url)
        .token(StaticToken::new("test.token.value"))
        .version(ApiVersion::V0_0_42)
        .retry_policy(RetryPolicy::none())
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ctx = Ctx::new(client, 2);
    let mut source = Jobs::new(Refresh::new(Duration::from_secs(300)));

    let failure = source.collect(&ctx).await.unwrap_err();
    assert_eq!(failure.kind, "transport", "{}", failure.message);

    // Not treated as answered: the next collection is a full listing and counts every job.
    let Collected::Families(families) = source.collect(&ctx).await.unwrap() else {
        panic!("expected families")
    };
    let jobs = families
        .iter()
        .find(|f| f.name() == "slurm_jobs")
        .unwrap()
        .get(&["debug", "science", "alice", "", "pending"]);
    assert_eq!(jobs, Some(3.0));
    let cpus = families
        .iter()
        .find(|f| f.name() == "slurm_jobs_cpus")
        .unwrap()
        .get(&["debug", "science", "alice", "", "pending"]);
    assert_eq!(cpus, Some(6.0));
}
