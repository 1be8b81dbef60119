//! Against the real Slurm 26.05 of `cargo xtask slurm up`, whose slurm.conf has no `MCSPlugin`
//! (the setup the README calls optional): a bridge that starts again finds its own placeholder
//! jobs through their admin comment ([`JobBook::load`]) and leaves everything else alone: another
//! bridge's external job, and a batch job that carries a bridge's comment. The ground tests run
//! Slurm with `MCSPlugin=mcs/label`; this is the other setup. CI runs this file with the Slurm
//! clusters, not on the test ground.

use k8s_openapi::api::core::v1::Pod;
use slurm_bridge::jobs::JobBook;
use slurm_bridge::translate::AdminComment;
use slurm_client::{ClientBuilder, JobSubmission, StaticToken};

fn pod(namespace: &str, name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.namespace = Some(namespace.into());
    pod.metadata.name = Some(name.into());
    pod
}

#[tokio::test]
async fn a_restarted_bridge_finds_its_own_jobs_without_mcs_plugin() {
    let clusters = test_support::clusters();
    let Some(cluster) = clusters
        .iter()
        .find(|c| c.release().is_some_and(|r| r.starts_with("26.05")))
    else {
        panic!("no Slurm 26.05 among SLURM_TEST_ENV_FILES: cargo xtask slurm up --release 26.05");
    };
    let client = ClientBuilder::new(cluster.url())
        .token(StaticToken::new(cluster.jwt().to_owned()))
        .user_name(cluster.user())
        .build()
        .expect("a client");
    let tag = std::process::id();
    let (ours, theirs) = (
        pod("ns", &format!("a-{tag}")),
        pod("ns", &format!("b-{tag}")),
    );
    let placeholder = |pod: &Pod, bridge: &str| {
        JobSubmission::external_job()
            .name(format!("own-jobs-{tag}"))
            .partition("debug")
            .min_nodes(1)
            .working_directory("/tmp")
            .hold(true)
            .admin_comment(AdminComment::new(&[pod], bridge).to_text())
            .mcs_label(bridge)
    };
    let batch = JobSubmission::wrap("sleep 60")
        .name(format!("own-jobs-{tag}"))
        .partition("debug")
        .working_directory("/tmp")
        .hold(true)
        .admin_comment(AdminComment::new(&[&ours], "kubernetes").to_text());
    let mut ids = Vec::new();
    for job in [
        placeholder(&ours, "kubernetes"),
        placeholder(&theirs, "other"),
        batch,
    ] {
        let id = client
            .submit_job(&job)
            .await
            .unwrap_or_else(|e| panic!("submit {:?}: {e}", job.name))
            .value
            .job_id;
        ids.push(id);
    }

    let book = JobBook::load(&client, "kubernetes").await;
    for id in &ids {
        let _ = client.cancel_job(*id).await;
    }
    let book = book.expect("listing the jobs");
    let found: Vec<(u32, Vec<String>)> = book
        .active()
        .into_iter()
        .filter(|(id, _)| ids.contains(id))
        .collect();
    assert_eq!(
        found,
        vec![(ids[0], vec![format!("ns/a-{tag}")])],
        "of jobs {ids:?} (ours, another bridge's, a batch job with our comment), only ours"
    );
}
