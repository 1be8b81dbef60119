//! Workload kinds and Slurm's side on the test ground against a real Slurm 26.05: a batch Job, a
//! JobSet and a LeaderWorkerSet group each become one job with the fields of their root
//! object's annotations; a job Slurm refuses is reported on its pod and retried with back-off;
//! a Slurm node deleted and a reconfigure, then a slurmctld restart, leave running pods and their
//! jobs alone.

use crate::common;

use std::time::Duration;

use std::collections::BTreeSet;

use common::{EXTERNAL, TestEnv, eventually, external_nodes, ground, install_crd};
use slurm_client::JobState;

const JOB_ID: &str = "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}";

/// A pod spec (indented for a template) run by the bridge; Jobs need `restartPolicy: Never`.
fn pod_spec(indent: usize) -> String {
    common::pod_spec(indent, "restartPolicy: Never\n")
}

fn uid(env: &TestEnv, what: &str) -> String {
    env.get(what, "{.metadata.uid}")
}

/// The name of the one pod with `selector`, once it exists.
async fn pod_with(env: &TestEnv, selector: &str) -> String {
    eventually(
        &format!("a pod with {selector}"),
        Duration::from_secs(30),
        || async {
            let out = ground().kubectl(
                &[
                    "get",
                    "pods",
                    "-n",
                    &env.ns.name,
                    "-l",
                    selector,
                    "-o",
                    "jsonpath={.items[*].metadata.name}",
                ],
                None,
            );
            let names = String::from_utf8_lossy(&out.stdout).to_string();
            let names: Vec<&str> = names.split_whitespace().collect();
            (names.len() == 1).then(|| names[0].to_owned())
        },
    )
    .await
}

fn running(env: &TestEnv, pod: &str) -> u32 {
    env.wait_for(
        &format!("pod/{pod}"),
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    env.get(&format!("pod/{pod}"), JOB_ID)
        .parse()
        .expect("the pod carries its job id")
}

#[tokio::test(flavor = "multi_thread")]
async fn workload_kinds_refusals_and_a_slurmctld_restart() {
    install_crd("jobset-crd.yaml");
    install_crd("leaderworkerset-crd.yaml");
    let mut env = TestEnv::new("workloads");
    let slurm = env.slurm();
    env.label_nodes();
    env.start_bridge("exclusive: false\n");
    external_nodes(&env, &slurm).await;

    // A batch Job (the ground's Job controller makes its pod): the Job's annotations and its
    // activeDeadlineSeconds shape the job.
    env.apply(&format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: train
  annotations:
    slurmjob.slinky.slurm.net/job-name: train-job
    slurmjob.slinky.slurm.net/account: physics
spec:
  activeDeadlineSeconds: 600
  backoffLimit: 0
  template:
    spec:
{}"#,
        pod_spec(6)
    ));
    let train = pod_with(&env, "job-name=train").await;
    let train_job = running(&env, &train);
    let job = slurm.get_job(train_job).await.unwrap().into_value();
    assert_eq!(job.name, "train-job");
    assert_eq!(job.account.as_deref(), Some("physics"));
    assert_eq!(job.time_limit_minutes.value(), Some(10));

    // A JobSet's Job (made as the JobSet controller would): the JobSet's annotations win.
    env.apply(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: js\n  annotations:\n    slurmjob.slinky.slurm.net/job-name: jobset-job\nspec:\n  replicatedJobs: []\n",
    );
    let js_uid = uid(&env, "jobset/js");
    env.apply(&format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: js-workers-0
  labels: {{jobset.sigs.k8s.io/jobset-name: js}}
  ownerReferences:
  - {{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: js, uid: {js_uid}, controller: true}}
spec:
  backoffLimit: 0
  template:
    metadata:
      labels: {{jobset.sigs.k8s.io/jobset-name: js}}
    spec:
{}"#,
        pod_spec(6)
    ));
    let js_pod = pod_with(&env, "job-name=js-workers-0").await;
    let js_job = running(&env, &js_pod);
    assert_eq!(
        slurm.get_job(js_job).await.unwrap().into_value().name,
        "jobset-job"
    );

    // One LeaderWorkerSet group of two pods (as its controller labels them): one job for both.
    env.apply(
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: lws\n  annotations:\n    slurmjob.slinky.slurm.net/job-name: lws-group\nspec:\n  replicas: 1\n  leaderWorkerTemplate:\n    size: 2\n",
    );
    let lws_uid = uid(&env, "leaderworkerset/lws");
    for (name, worker) in [("lws-0", "0"), ("lws-0-1", "1")] {
        env.apply(&format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    leaderworkerset.sigs.k8s.io/name: lws
    leaderworkerset.sigs.k8s.io/group-index: "0"
    leaderworkerset.sigs.k8s.io/worker-index: "{worker}"
  ownerReferences:
  - {{apiVersion: leaderworkerset.x-k8s.io/v1, kind: LeaderWorkerSet, name: lws, uid: {lws_uid}, controller: true}}
spec:
{}"#,
            pod_spec(2)
        ));
    }
    let lws_job = running(&env, "lws-0");
    assert_eq!(running(&env, "lws-0-1"), lws_job, "one job for the group");
    let job = slurm.get_job(lws_job).await.unwrap().into_value();
    assert_eq!(
        (job.name.as_str(), job.state),
        ("lws-group", JobState::Running)
    );

    // A job Slurm refuses: said on the pod, retried with back-off rather than in a loop.
    env.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lost\n  annotations: {{slurmjob.slinky.slurm.net/partition: nowhere}}\nspec:\n{}",
        pod_spec(2)
    ));
    common::assert_refused_with_back_off(&env, "lost", "partition", Duration::from_secs(15), 2..=7)
        .await;

    // A node leaves Slurm (its external-node label goes, so the bridge deletes its Slurm node)
    // and slurmctld reconfigures: the jobs on the other nodes stay (Slinky's #43 lost them all).
    let busy: BTreeSet<String> = [train.as_str(), js_pod.as_str(), "lws-0", "lws-0-1"]
        .iter()
        .map(|p| env.get(&format!("pod/{p}"), "{.spec.nodeName}"))
        .collect();
    let gone = env
        .nodes
        .iter()
        .find(|n| !busy.contains(*n))
        .unwrap_or_else(|| panic!("every node runs a pod ({busy:?}): none to delete"))
        .clone();
    ground().ok(&["label", "node", &gone, &format!("{EXTERNAL}-")]);
    eventually(
        &format!("Slurm node {gone} deleted"),
        Duration::from_secs(60),
        || async {
            let nodes = common::slurm_nodes(&slurm).await?;
            nodes.iter().all(|n| n.name != gone).then_some(())
        },
    )
    .await;
    slurm.reconfigure().await.expect("scontrol reconfigure");
    tokio::time::sleep(Duration::from_secs(3)).await;
    for id in [train_job, js_job, lws_job] {
        let job = slurm.get_job(id).await.unwrap().into_value();
        assert_eq!(
            job.state,
            JobState::Running,
            "after the reconfigure: {job:?}"
        );
    }
    env.label_nodes();

    // slurmctld restarts (its state kept on its volume): running pods and their jobs stay, and
    // new pods still run.
    let before = env.get("pod/slurm-controller-0", "{.metadata.uid}");
    env.ground_delete("pod/slurm-controller-0");
    env.wait_for(
        "pod/slurm-controller-0",
        "{.metadata.uid}",
        Duration::from_secs(60),
        |u| !u.is_empty() && u != before,
    );
    env.wait_for(
        "pod/slurm-controller-0",
        "{.status.conditions[?(@.type==\"Ready\")].status}",
        Duration::from_secs(120),
        |s| s == "True",
    );
    for id in [train_job, js_job, lws_job] {
        eventually(
            &format!("job {id} running after the restart"),
            Duration::from_secs(60),
            || async {
                let job = slurm.get_job(id).await.ok()?.into_value();
                (job.state == JobState::Running).then_some(())
            },
        )
        .await;
    }
    env.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: after-restart\nspec:\n{}",
        pod_spec(2)
    ));
    running(&env, "after-restart");
    for pod in [train.as_str(), js_pod.as_str(), "lws-0", "lws-0-1"] {
        let what = format!("pod/{pod}");
        assert_eq!(env.get(&what, "{.status.phase}"), "Running", "{pod}");
        assert_eq!(
            env.get(&what, "{.metadata.deletionTimestamp}"),
            "",
            "{pod} was deleted after the slurmctld restart:\n{}",
            env.bridge_log()
        );
    }
}
