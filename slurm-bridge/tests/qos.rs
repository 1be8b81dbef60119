//! Slurm's policy over Kubernetes pods, with accounting: the account and QoS named by a pod's
//! annotations become its job's, the QoS's limit holds the second pod back (its condition says
//! why) until the first ends, and an account Slurm does not know is reported on the pod and
//! retried with back-off, not in a loop. The bridge's own identity policy: a pod asking for a
//! user id its namespace may not use gets a condition naming the annotation and no job, and
//! so does a pod asking for a GPU through Dynamic Resource Allocation.

use crate::common;

use std::time::Duration;

use common::{TestEnv, eventually, external_nodes};
use slurm_client::{AccountSpec, QosSpec, UserSpec};

const JOB_ID: &str = "{.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid}";
const SLURM_JOB: &str = "{.status.conditions[?(@.type==\"SlurmJob\")].message}";

fn pod(name: &str, account: &str, qos: &str) -> String {
    common::pod(
        name,
        &format!(
            "slurmjob.slinky.slurm.net/account: {account}, slurmjob.slinky.slurm.net/qos: {qos}"
        ),
        "",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_qos_limit_holds_pods_back() {
    let mut env = TestEnv::with_accounting("qos");
    let slurm = env.slurm();
    eventually(
        "slurmctld to register its cluster in slurmdbd",
        Duration::from_secs(60),
        || async {
            let clusters = slurm.list_clusters().await.ok()?.into_value();
            clusters.iter().any(|c| c.name == "bridge").then_some(())
        },
    )
    .await;
    // The bridge's jobs are the token user's (`slurm`): it needs an association.
    slurm
        .create_account(&AccountSpec::new("kubernetes"))
        .await
        .expect("an account");
    slurm
        .create_user(&UserSpec::new("slurm", "kubernetes"))
        .await
        .expect("an association for the bridge's user");
    slurm
        .put_qos(&QosSpec::new("one-at-a-time").max_jobs_per_user(1))
        .await
        .expect("a QoS");
    env.label_nodes();
    // No pod of this namespace may choose its job's user or priority (the webhook is off here:
    // the scheduler's own check is what refuses).
    env.start_bridge(
        "exclusive: false\nidentityPolicy: {default: {userIds: [], maxPriority: forbidden}}\n",
    );
    external_nodes(&env, &slurm).await;

    env.apply(&pod("first", "kubernetes", "one-at-a-time"));
    env.wait_for(
        "pod/first",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    let first: u32 = env.get("pod/first", JOB_ID).parse().expect("a job id");
    let job = slurm.get_job(first).await.unwrap().into_value();
    assert_eq!(job.qos.as_deref(), Some("one-at-a-time"), "{job:?}");
    assert_eq!(job.account.as_deref(), Some("kubernetes"), "{job:?}");

    // The QoS allows one running job per user: the second waits, and says so.
    env.apply(&pod("second", "kubernetes", "one-at-a-time"));
    env.wait_for("pod/second", SLURM_JOB, Duration::from_secs(60), |m| {
        m.contains("QOSMaxJobsPerUserLimit")
    });
    assert_eq!(env.get("pod/second", "{.spec.nodeName}"), "", "not bound");

    env.ground_delete("pod/first");
    env.wait_for(
        "pod/second",
        "{.status.phase}",
        Duration::from_secs(90),
        |p| p == "Running",
    );
    let second: u32 = env.get("pod/second", JOB_ID).parse().expect("a job id");
    eventually("the first job to end", Duration::from_secs(30), || async {
        let job = slurm.get_job(first).await.ok()?.into_value();
        job.state.is_finished().then_some(())
    })
    .await;
    let job = slurm.get_job(second).await.unwrap().into_value();
    assert_eq!(job.qos.as_deref(), Some("one-at-a-time"), "{job:?}");

    // An account Slurm does not know: the pod says so, and the bridge backs off.
    env.apply(&pod("stray", "no-such-account", "normal"));
    common::assert_refused_with_back_off(&env, "stray", "account", Duration::from_secs(10), 1..=5)
        .await;

    // A user id the policy does not allow: refused before Slurm sees it, naming the annotation.
    env.apply(&common::pod(
        "as-root",
        "slurmjob.slinky.slurm.net/user-id: '0'",
        "",
    ));
    let message = env.wait_for("pod/as-root", SLURM_JOB, Duration::from_secs(60), |m| {
        !m.is_empty()
    });
    assert_eq!(
        message,
        format!(
            "cannot make a Slurm job: slurmjob.slinky.slurm.net/user-id: user id 0 is not allowed \
             in namespace {:?} (identityPolicy.default.userIds is empty: none may be asked for)",
            env.get("pod/as-root", "{.metadata.namespace}")
        )
    );
    assert_eq!(
        env.get(
            "pod/as-root",
            "{.status.conditions[?(@.type==\"SlurmJob\")].reason}"
        ),
        "InvalidJob"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(env.get("pod/as-root", JOB_ID), "", "never submitted");

    // A GPU through DRA's extended resource, as Slinky's bridge examples ask for one, in a pod
    // that reached the bridge without its webhook: the bridge allocates no DRA devices, so the
    // pod waits with the field named, never submitted, never bound without its device.
    env.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dra-gpu\nspec:\n  schedulerName: {}\n  containers:\n  - name: cuda\n    image: {}\n    command: [sleep, '60']\n    resources:\n      limits: {{deviceclass.resource.kubernetes.io/gpu.nvidia.com: '1'}}\n",
        common::SCHEDULER,
        common::IMAGE
    ));
    let message = env.wait_for("pod/dra-gpu", SLURM_JOB, Duration::from_secs(60), |m| {
        !m.is_empty()
    });
    assert!(
        message.contains(
            "containers[cuda].resources.limits[deviceclass.resource.kubernetes.io/gpu.nvidia.com]: a DRA extended resource"
        ),
        "{message}"
    );
    assert_eq!(
        env.get(
            "pod/dra-gpu",
            "{.status.conditions[?(@.type==\"SlurmJob\")].reason}"
        ),
        "InvalidJob"
    );
    assert_eq!(env.get("pod/dra-gpu", JOB_ID), "", "never submitted");
    assert_eq!(
        env.get("pod/dra-gpu", "{.spec.nodeName}"),
        "",
        "never bound"
    );
}
