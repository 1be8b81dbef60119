//! End to end on the test ground, against real Slurm 26.05 daemons in pods: Slinky-style
//! manifests (Controller + RestApi + NodeSet of 3 + Token) become a working cluster whose Slurm
//! nodes' comments name their pods, and the
//! NodeSet's scale-in drains before it deletes, keeps busy nodes, leaves an admin's drain alone
//! and keeps every pod while Slurm cannot be asked.
//!
//! Beside it, on the same cluster: the NodeSet runs with `ssh.enabled` (its `N-ssh-config`
//! ConfigMap is made and sshd answers in the slurmd container); a second Token with a 40-second
//! lifetime is refreshed twice while a REST client that follows its Secret keeps working
//! ([`token_refresh`]); and the operator's `/metrics` is scraped three times ([`metrics`]):
//! every reconciler (a LoginSet of 0 replicas and an external Accounting are there for the two
//! kinds the cluster does not need) counts successful reconciles, no Slurm call fails while
//! slurmrestd is up, and the NodeSet's failed reconciles count while it is away.

mod metrics;
mod token_refresh;

use crate::common;

use std::time::{Duration, Instant};

use common::workers::{LIMIT, NODESET, node, pods, scale, slurm, wait_node, wait_pods};
use common::{TestEnv, ground};

/// What the cluster test adds to `cluster.yaml`: the sssd.conf Secret that Slinky's chart makes
/// (`<release>-sssd-conf`), a LoginSet of no replicas, an external Accounting (no slurmdbd is
/// made for it, nor does the Controller refer to it) and the short-lived Token.
fn extra_manifest() -> String {
    use base64::Engine;
    let sssd = base64::engine::general_purpose::STANDARD.encode("[sssd]\nservices = nss,pam\n");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: slurm-sssd-conf\ndata:\n  sssd.conf: {sssd}\n\
         ---\n\
         apiVersion: slinky.slurm.net/v1beta1\nkind: LoginSet\nmetadata:\n  name: slurm-login-slinky\n\
         spec:\n  controllerRef: {{name: slurm}}\n  replicas: 0\n  sssdConfRef: {{name: slurm-sssd-conf, key: sssd.conf}}\n\
         ---\n\
         apiVersion: slinky.slurm.net/v1beta1\nkind: Accounting\nmetadata:\n  name: slurm-external\n\
         spec:\n  external: true\n  externalConfig: {{host: slurmdbd.example.com, port: 6819}}\n\
         ---\n{}",
        token_refresh::manifest()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn slinky_manifests_make_a_working_cluster_that_scales_in_safely() {
    let mut env = TestEnv::new("op-cluster");
    env.apply_manifest("cluster.yaml");
    ground().apply(env.name(), &extra_manifest());
    // ssh on the workers, as Slinky's chart renders `nodesets.slinky.ssh.enabled: true`; before
    // the operator starts, so that the first pods have it.
    env.merge_patch(&format!("nodeset/{NODESET}"), r#"{"spec":{"ssh":{"enabled":true,"sssdConfRef":{"name":"slurm-sssd-conf","key":"sssd.conf"}}}}"#);
    env.start_operator(&["--slurm-poll", "1s", "--metrics-addr", metrics::ADDR]);
    let metrics_at = test_support::ground::forward_into_ground(metrics::ADDR.parse().unwrap());

    env.wait_for(
        "statefulset/slurm-controller",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    env.wait_for(
        "deployment/slurm-restapi",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    // The short-lived Token, followed from here on beside the rest of the test.
    let restapi_ip = ground().get(env.name(), "service/slurm-restapi", "{.spec.clusterIP}");
    let tokens = token_refresh::Follower::start(
        &env,
        test_support::ground::forward_into_ground(format!("{restapi_ip}:6820").parse().unwrap()),
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );

    // The Token's JWT lists the nodes through the RestApi Service; they are the pods' hostnames.
    let client = slurm(&env);
    let deadline = Instant::now() + LIMIT;
    let names = loop {
        let nodes = client
            .list_nodes(&Default::default())
            .await
            .map(|r| r.value.nodes);
        let mut names: Vec<String> = nodes.iter().flatten().map(|n| n.name.clone()).collect();
        names.sort();
        if names == ["slinky-0", "slinky-1", "slinky-2"] || Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(names, ["slinky-0", "slinky-1", "slinky-2"]);
    for n in &names {
        wait_node(&client, n, "idle", |n| {
            n.state.as_str() == "IDLE" && !n.is_drain()
        })
        .await;
    }

    // Each Slurm node's comment names its pod, as Slinky writes it.
    let uid = ground().get(env.name(), &format!("nodeset/{NODESET}"), "{.metadata.uid}");
    for (i, n) in names.iter().enumerate() {
        let pod = format!("{NODESET}-{i}");
        let k8s_node = ground().get(env.name(), &format!("pod/{pod}"), "{.spec.nodeName}");
        let want = format!(
            r#"{{"namespace":"{}","podName":"{pod}","node":"{k8s_node}","nodeSetName":"{NODESET}","nodeSetUID":"{uid}"}}"#,
            env.name()
        );
        wait_node(&client, n, "commented with its pod", |n| {
            n.comment.as_deref() == Some(want.as_str())
        })
        .await;
    }

    // ssh.enabled: the NodeSet's sshd_config, owned by it, and sshd answering in the slurmd
    // container beside slurmd (the image starts it when the file is mounted).
    let cm = format!("configmap/{NODESET}-ssh-config");
    let sshd = ground().get(env.name(), &cm, "{.data.sshd_config}");
    assert!(
        sshd.contains("AuthenticationMethods publickey password"),
        "{cm}: {sshd:?}"
    );
    assert_eq!(
        ground().get(env.name(), &cm, "{.metadata.ownerReferences[0].name}"),
        NODESET
    );
    let banner = ground().ok(&[
        "exec",
        "-n",
        env.name(),
        &format!("{NODESET}-0"),
        "-c",
        "slurmd",
        "--",
        "bash",
        "-c",
        "exec 3<>/dev/tcp/127.0.0.1/22; head -c 8 <&3",
    ]);
    assert!(banner.starts_with("SSH-2.0-"), "sshd banner {banner:?}");

    // /metrics: every reconciler ran and succeeded, and is timed. The LoginSet's first reconcile
    // generates an RSA host key (a random prime search, seconds of CPU), so it may still run when
    // the workers are up: waited for.
    let deadline = Instant::now() + LIMIT;
    let first = loop {
        let scrape = metrics::scrape(metrics_at);
        let all_ran = metrics::CONTROLLERS
            .iter()
            .all(|c| scrape.ok_reconciles(c) >= 1.0);
        if all_ran || Instant::now() > deadline {
            break scrape;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for c in metrics::CONTROLLERS {
        assert!(
            first.ok_reconciles(c) >= 1.0,
            "no successful {c} reconcile:\n{}",
            first.lines("slurm_operator_reconciles")
        );
        assert!(
            first.sum(
                "slurm_operator_reconcile_duration_seconds_count",
                &[("controller", c)]
            ) >= 1.0,
            "{c} reconciles not timed"
        );
    }
    // The error counter is there from the start, one series per controller, and counts only
    // what failed while slurmrestd was starting: the NodeSet's reconciles that could not read
    // the Slurm nodes yet.
    assert!(
        first.declares("slurm_operator_reconcile_errors", "counter"),
        "no error counter"
    );
    for c in metrics::CONTROLLERS {
        let series = format!("slurm_operator_reconcile_errors_total{{controller=\"{c}\"}}");
        assert!(!first.lines(&series).is_empty(), "no {series}");
        let errors = first.sum(
            "slurm_operator_reconcile_errors_total",
            &[("controller", c)],
        );
        assert!(
            errors == 0.0 || c == "nodeset",
            "{c}: {errors} failed reconciles:\n{}",
            first.lines("slurm_operator_reconcile")
        );
    }

    // sbatch from inside the cluster runs on all three workers.
    let (code, out) = env.run_in_cluster(
        "slurm",
        "sbatch --wait -N3 -o /dev/null --wrap 'srun hostname' && sinfo",
    );
    assert_eq!(code, 0, "{out}");

    // Slurm state reaches the pods as conditions and the NodeSet status as counters.
    env.wait_for(
        &format!("pod/{NODESET}-0"),
        "{.status.conditions[?(@.type==\"SlurmNodeStateIdle\")].status}",
        LIMIT,
        |s| s == "True",
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.slurmIdle}",
        LIMIT,
        |s| s == "3",
    );

    // Scale-in 3 → 1 while a job runs on slinky-2 (the first victim: highest ordinal) and an
    // admin has drained slinky-0 for maintenance.
    let (code, out) = env.run_in_cluster(
        "slurm",
        "sbatch -w slinky-2 -o /dev/null --parsable --wrap 'sleep 600'",
    );
    assert_eq!(code, 0, "{out}");
    let job: u32 = out
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no job id in {out:?}"));
    wait_node(&client, "slinky-2", "allocated", |n| n.is_busy()).await;
    client
        .drain_node("slinky-0", "admin: disk check")
        .await
        .expect("admin drain");

    // A running job gives slinky-2 a pod-deadline, which puts it after idle pods in the scale-in
    // order; a deletion cost makes it the first victim again, so that the busy case is tested.
    ground().ok(&[
        "annotate",
        "-n",
        env.name(),
        &format!("pod/{NODESET}-2"),
        "nodeset.slinky.slurm.net/pod-deletion-cost=-100",
    ]);
    scale(&env, 1);
    // slinky-1 is idle: drained, then deleted.
    wait_pods(&env, &[&format!("{NODESET}-0"), &format!("{NODESET}-2")]);
    // slinky-2 runs a job: drained with Slinky's reason, and its pod stays.
    let busy = wait_node(&client, "slinky-2", "draining", |n| n.is_drain()).await;
    assert_eq!(
        busy.reason.as_deref(),
        Some(
            format!(
                "slurm-operator: Pod ({}/{NODESET}-2) is pending termination for scale-in",
                env.name()
            )
            .as_str()
        )
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pods(&env),
        [format!("{NODESET}-0"), format!("{NODESET}-2")],
        "a busy node's pod was deleted"
    );
    env.wait_for(
        &format!("pod/{NODESET}-2"),
        "{.metadata.labels.nodeset\\.slinky\\.slurm\\.net/pod-protect}",
        LIMIT,
        |v| v == "true",
    );
    // The admin's drain on the pod that stays is untouched.
    assert_eq!(
        node(&client, "slinky-0").await.reason.as_deref(),
        Some("admin: disk check")
    );

    // The job ends: the pod goes.
    client.cancel_job(job).await.expect("scancel");
    wait_pods(&env, &[&format!("{NODESET}-0")]);

    // The short Token was refreshed while all this ran; whatever is left of it is waited for here.
    let waited = tokens.finish();
    eprintln!(
        "cluster test: the token refresh check added {:.1}s",
        waited.as_secs_f64()
    );

    // The scale-in moved the counters: NodeSet reconciles and drains, and no Slurm call failed.
    let second = metrics::scrape(metrics_at);
    assert!(second.ok_reconciles("nodeset") > first.ok_reconciles("nodeset"));
    assert!(
        second.sum(
            "slurm_operator_slurm_requests_total",
            &[("operation", "drain_node")]
        ) >= 2.0,
        "{}",
        second.lines("slurm_operator_slurm_requests")
    );
    assert_eq!(
        second.sum("slurm_operator_slurm_request_errors_total", &[]),
        0.0,
        "{}",
        second.lines("slurm_operator_slurm_request_errors")
    );

    // Slurm unreachable (slurmrestd scaled away): a scale-in deletes nothing.
    scale(&env, 3);
    wait_pods(
        &env,
        &[
            &format!("{NODESET}-0"),
            &format!("{NODESET}-1"),
            &format!("{NODESET}-2"),
        ],
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        "deployment/slurm-restapi",
        "--replicas=0",
    ]);
    env.wait_for(
        "deployment/slurm-restapi",
        "{.status.replicas}",
        LIMIT,
        |r| r == "0" || r.is_empty(),
    );
    scale(&env, 2);
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.conditions[?(@.type==\"Synced\")].status}",
        LIMIT,
        |s| s == "False",
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        pods(&env).len(),
        3,
        "a pod was deleted while Slurm could not be asked"
    );
    // Back: the scale-in proceeds through a drain. The admin's drain on slinky-0 still stands.
    ground().ok(&[
        "scale",
        "-n",
        env.name(),
        "deployment/slurm-restapi",
        "--replicas=1",
    ]);
    wait_pods(&env, &[&format!("{NODESET}-0"), &format!("{NODESET}-1")]);
    let client = slurm(&env);
    assert_eq!(
        node(&client, "slinky-0").await.reason.as_deref(),
        Some("admin: disk check")
    );
    common::end_state::assert_full_service(&env, &client, "the scale-ins", &[]).await;

    // The outage was counted: the NodeSet's reconciles failed (invalid_reference: the Slurm
    // nodes could not be read) while slurmrestd was away.
    let third = metrics::scrape(metrics_at);
    let failed = |s: &metrics::Scrape| {
        s.sum(
            "slurm_operator_reconciles_total",
            &[("controller", "nodeset"), ("result", "invalid_reference")],
        )
    };
    assert!(
        failed(&third) > failed(&second),
        "{}",
        third.lines("slurm_operator_reconciles")
    );
    let errors = |s: &metrics::Scrape| {
        s.sum(
            "slurm_operator_reconcile_errors_total",
            &[("controller", "nodeset")],
        )
    };
    assert!(errors(&third) - errors(&second) >= failed(&third) - failed(&second));
    assert!(third.ok_reconciles("nodeset") > second.ok_reconciles("nodeset"));
}
