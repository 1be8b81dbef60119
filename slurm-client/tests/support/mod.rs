//! Shared helpers for the version-neutral API tests: one client per REST version that a
//! cluster serves and this build compiles in, job names of our own, and polling.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use slurm_client::{ApiVersion, Client, Job, JobState, JobSubmission};

use crate::common::{self, Cluster, ClusterClient as _};

/// One target: a cluster and a client pinned to one REST version it serves.
pub struct Target {
    pub cluster: Cluster,
    pub version: ApiVersion,
    pub client: Client,
}

impl Target {
    /// `"24.11 v0.0.42"`, for assertion messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.cluster.release().unwrap_or("?"), self.version)
    }

    /// A job name unique to this test, target and process.
    pub fn job_name(&self, test: &str) -> String {
        format!(
            "api-{test}-{}-{}",
            self.version.as_str().replace('.', ""),
            std::process::id()
        )
    }

    /// A short batch job that ends by itself.
    pub fn quick_job(&self, test: &str, seconds: u32) -> JobSubmission {
        JobSubmission::wrap(format!("sleep {seconds}"))
            .name(self.job_name(test))
            .partition("debug")
            .working_directory("/tmp")
            .time_limit_minutes(5)
    }
}

/// Every (cluster, served and compiled version) pair.
pub async fn targets() -> Vec<Target> {
    let mut out = Vec::new();
    for cluster in common::clusters() {
        let served = cluster
            .client()
            .served_versions()
            .await
            .expect("ping the cluster");
        for version in served.into_iter().filter(|v| v.is_compiled()) {
            let client = cluster
                .builder()
                .version(version)
                .build()
                .expect("pinned client");
            out.push(Target {
                cluster: cluster.clone(),
                version,
                client,
            });
        }
    }
    assert!(
        !out.is_empty(),
        "no REST version is both served and compiled in"
    );
    out
}

/// Polls `check` every 500 ms until it returns `Some`, for at most `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until job `id` is in one of `states`, returning it.
pub async fn wait_for_state(target: &Target, id: u32, states: &[JobState]) -> Job {
    let what = format!("{}: job {id} to reach {states:?}", target.label());
    wait_for(&what, Duration::from_secs(90), || async {
        let job = target.client.get_job(id).await.expect("get job").value;
        states.contains(&job.state).then_some(job)
    })
    .await
}
