//! The streamed job listing (`Client::for_each_job`) against real clusters, for every REST
//! version each serves: it hands out exactly the jobs `list_jobs` returns and says the same
//! about the listing; an unchanged poll hands out nothing; an error answer is an error.
//!
//! Other tests change the clusters at the same time, so two listings are compared a few
//! times until nothing changed in between.

mod common;
mod support;

use std::time::Duration;

use slurm_client::{Job, JobQuery, StaticToken, StreamedJobs};
use support::{Target, targets};

async fn stream(t: &Target, query: &JobQuery) -> (Vec<Job>, StreamedJobs) {
    let mut jobs = Vec::new();
    let streamed = t
        .client
        .for_each_job(query, |job| jobs.push(job))
        .await
        .unwrap_or_else(|e| panic!("{}: streamed listing: {e}", t.label()))
        .value;
    (jobs, streamed)
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
        let all = JobQuery {
            all: true,
            ..JobQuery::default()
        };
        let mut same = false;
        for _ in 0..5 {
            let listed = t.client.list_jobs(&all).await.unwrap().value;
            let (jobs, streamed) = stream(&t, &all).await;
            if jobs != listed.jobs || streamed.last_update != listed.last_update {
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
            "{label}: the streamed listing never equalled list_jobs"
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
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let (_, first) = stream(&t, &JobQuery::new()).await;
            let since = first.last_update.expect("last_update");
            let (jobs, again) = stream(&t, &JobQuery::new().update_time(since)).await;
            if again.unchanged {
                assert!(jobs.is_empty() && again.listed == 0, "{label}: {again:?}");
                break;
            }
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
