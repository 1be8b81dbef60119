//! The streamed job listing (`Client::for_each_job`) against real clusters, for every REST
//! version each serves: it hands out exactly the jobs `list_jobs` returns and says the same
//! about the listing; an unchanged poll hands out nothing; an error answer is an error.
//!
//! Other tests change the clusters at the same time, so two listings are compared a few
//! times until nothing changed in between.

use crate::common;
use crate::support;

use std::time::Duration;

use common::ClusterClient as _;
use slurm_client::{Client, Job, JobQuery, StaticToken, StreamedJobs};
use support::{Target, targets};

/// The request time limit covers the whole streamed body, decoding included: a cluster with
/// 20,000 jobs (the scale benchmark's) takes longer than the default 30 s in a debug build.
fn patient(t: &Target) -> Client {
    t.cluster
        .builder()
        .version(t.version)
        .request_timeout(Duration::from_secs(600))
        .build()
        .unwrap()
}

async fn stream(t: &Target, query: &JobQuery) -> (Vec<Job>, StreamedJobs) {
    let mut jobs = Vec::new();
    let streamed = patient(t)
        .for_each_job(query, |job| jobs.push(job))
        .await
        .unwrap_or_else(|e| panic!("{}: streamed listing: {e}", t.label()))
        .value;
    (jobs, streamed)
}

/// Listings compared before giving up (the cluster may change between two).
const ATTEMPTS: usize = 5;

/// What differs between a listing and a streamed one (the cluster may have changed between).
fn first_difference(
    listed: &[Job],
    streamed: &[Job],
    listed_update: Option<i64>,
    end: StreamedJobs,
) -> String {
    let counts = format!(
        "{} jobs listed, {} streamed; last_update {listed_update:?} and {:?}",
        listed.len(),
        streamed.len(),
        end.last_update
    );
    match listed.iter().zip(streamed).find(|(a, b)| a != b) {
        Some((a, b)) => format!("{counts}; first different job:\n{a:?}\n{b:?}"),
        None => counts,
    }
}

#[tokio::test]
async fn streamed_listing_equals_list_jobs() {
    for t in targets().await {
        let label = t.label();
        let held = t
            .client
            .submit_job(&t.quick_job("stream", 30).hold(true))
            .await
            .unwrap_or_else(|e| panic!("{label}: submit: {e}"))
            .value
            .job_id;
        let all = JobQuery::new().all(true);
        let mut same = false;
        let mut difference = String::new();
        for _ in 0..ATTEMPTS {
            let listed = patient(&t).list_jobs(&all).await.unwrap().value;
            let (jobs, streamed) = stream(&t, &all).await;
            // slurmctld's last_update may move on between the two without any job changing
            // (seen on the 20,000-job cluster, where each listing takes a minute).
            if jobs != listed.jobs || streamed.last_update < listed.last_update {
                difference = first_difference(&listed.jobs, &jobs, listed.last_update, streamed);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            assert!(jobs.iter().any(|j| j.id == held), "{label}");
            assert_eq!((streamed.jobs, streamed.listed), (jobs.len(), jobs.len()));
            assert_eq!(streamed.last_backfill, listed.last_backfill, "{label}");
            assert!(!streamed.unchanged, "{label}");
            same = true;
            break;
        }
        assert!(
            same,
            "{label}: the streamed listing never equalled list_jobs; last time: {difference}"
        );

        let mine = JobQuery::new().name(t.job_name("stream"));
        let (jobs, streamed) = stream(&t, &mine).await;
        assert_eq!(jobs.len(), 1, "{label}: {jobs:?}");
        assert_eq!(jobs[0].id, held, "{label}");
        assert!(streamed.listed >= 1 && streamed.jobs == 1, "{label}");
        t.client.cancel_job(held).await.unwrap();
    }
}

#[tokio::test]
async fn an_unchanged_poll_hands_out_nothing() {
    for t in targets().await {
        let label = t.label();
        // Each changed answer is a full listing (long on a large cluster), whose time the
        // next poll starts from.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        let (_, first) = stream(&t, &JobQuery::new()).await;
        let mut since = first.last_update.expect("last_update");
        loop {
            let (jobs, again) = stream(&t, &JobQuery::new().update_time(since)).await;
            if again.unchanged {
                assert!(jobs.is_empty() && again.listed == 0, "{label}: {again:?}");
                break;
            }
            since = again.last_update.expect("last_update");
            assert!(
                tokio::time::Instant::now() < deadline,
                "{label}: never unchanged"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[tokio::test]
async fn a_bad_token_is_an_auth_error() {
    for t in targets().await {
        let client = t
            .cluster
            .builder()
            .token(StaticToken::new("not.a.valid-token"))
            .version(t.version)
            .build()
            .unwrap();
        let mut handed = 0;
        let err = client
            .for_each_job(&JobQuery::new(), |_| handed += 1)
            .await
            .unwrap_err();
        assert_eq!(err.label(), "auth", "{}: {err}", t.label());
        assert_eq!(handed, 0);
    }
}
