//! End to end on the test ground, on one Slurm 26.05 cluster (Controller + RestApi + NodeSet of 2
//! + Token) built once: what happens to it over its life.
//!
//! 1. `kubectl cordon` of a Kubernetes node drains the Slurm nodes of the worker pods on it (with
//!    Slinky's reason, or the node's `node-cordon-reason` annotation), `uncordon` resumes them.
//! 2. At rest the operator writes nothing to the API server (read from the audit log).
//! 3. The operator is killed in the middle of a scale-in (the victim, made first by its
//!    deletion cost, runs a job); the new one keeps the busy pod drained and deletes it once its
//!    job ended.
//! 4. `kubectl scale nodeset --replicas=0` and back to 2, as an HPA would do it through the scale
//!    subresource: pods drain and go, come back, and their Slurm nodes are idle again.
//! 5. A scale-in from 2 to 1 right after a job started on the highest ordinal: the job completes,
//!    and the node that stays is usable after it (issue 27), then back to 2.
//! 6. A change of the Controller's `extraConf` rolls slurmctld, and the cluster works after.
//! 7. A RollingUpdate of the slurmd template (`maxUnavailable` 25% of 2: one pod at a time)
//!    while a job runs on slinky-1: that pod is not deleted before the job completed, never more
//!    than one pod is unavailable (a pod watch sees every change), and every pod ends on the
//!    update revision (`controller-revision-hash` = `status.nodeSetHash`).
//! 8. Another rollout, and the operator killed as soon as it cordoned or deleted the first old
//!    pod: the new operator finishes it within `maxUnavailable`.
//! 9. `inplaceReconfigure`: a change of `extraConf` reaches slurmctld through the `reconfigure`
//!    sidecar (`scontrol reconfigure`) without replacing its pod or its process.
//! 10. An eviction through the API (`pods/{name}/eviction`, as `kubectl drain` does it) while a
//!     job runs on slinky-1: the workers' PodDisruptionBudget refuses it for the busy pod (which
//!     carries `pod-protect`), and lets the idle pod go; the operator brings that one back.
//!
//! Every step ends with [`assert_full_service`]: desired pods ready, every Slurm node usable,
//! no cordon or drain of the operator's left, no job lost.
//!
//! The ground has no disruption controller, so no budget's `status` is ever computed: the API
//! server refuses every eviction of a pod that a budget selects, as a real cluster does for the
//! operator's budget (`maxUnavailable: 0`) once its controller has computed 0 disruptions allowed.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::end_state::assert_full_service;
use common::workers::{
    LIMIT, NODESET, node, pod_uid, pods, sbatch, scale, slurm, wait_node, wait_pods,
};
use common::{TestEnv, ground};
use slurm_client::Client;
use slurm_client::model::{JobState, Node, NodeState};
use slurm_operator::keys::{ANNOTATION_POD_CORDON, LABEL_POD_PROTECT};

const CORDON_REASON_ANNOTATION: &str = "nodeset.slinky.slurm.net/node-cordon-reason";
/// How long the cluster is watched at rest.
const QUIET: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn one_cluster_through_cordon_quiet_restart_scale_to_zero_and_config_change() {
    let start = Instant::now();
    let mut env = TestEnv::new("op-lifecycle");
    env.start_operator(&[
        "--slurm-poll",
        "1s",
        "--propagated-node-conditions",
        PROBLEM,
    ]);
    env.apply_manifest("lifecycle.yaml");

    for (what, want) in [
        ("statefulset/slurm-controller", "1"),
        ("deployment/slurm-restapi", "1"),
        ("nodeset/slurm-worker-slinky", "2"),
    ] {
        env.wait_for(what, "{.status.readyReplicas}", LIMIT, |r| r == want);
    }
    let client = slurm(&env);
    for host in ["slinky-0", "slinky-1"] {
        wait_node(&client, host, "idle", is_idle).await;
    }
    phase("cluster up", start);

    let t = Instant::now();
    cordon_drains_and_uncordon_resumes(&env, &client).await;
    assert_full_service(&env, &client, "cordon and uncordon", &[]).await;
    phase("cordon", t);

    // Findings that do not stop the later scenarios; reported at the end.
    let mut findings: Vec<String> = Vec::new();
    let t = Instant::now();
    if let Err(writes) = no_writes_at_rest(&env, &client).await {
        findings.push(writes);
    }
    phase("quiet", t);

    let t = Instant::now();
    let job = restart_mid_scale_in_keeps_the_busy_pod(&mut env, &client).await;
    assert_full_service(&env, &client, "a restart mid-scale-in", &[job]).await;
    phase("restart mid-scale-in", t);

    let t = Instant::now();
    scale_to_zero_and_back(&env, &client).await;
    assert_full_service(&env, &client, "scale to 0 and back", &[]).await;
    phase("scale 0 and back", t);

    let t = Instant::now();
    scale_in_beside_a_running_job(&env, &client).await;
    phase("scale-in beside a running job", t);

    let t = Instant::now();
    config_change_rolls_slurmctld(&env).await;
    assert_full_service(&env, &client, "a config change", &[]).await;
    phase("config change", t);

    let t = Instant::now();
    let job = rolling_update_waits_for_the_busy_node(&env, &client).await;
    assert_full_service(&env, &client, "a rolling update beside a job", &[job]).await;
    phase("rolling update", t);

    let t = Instant::now();
    restart_mid_rolling_update(&mut env, &client).await;
    assert_full_service(&env, &client, "a restart mid-rolling-update", &[]).await;
    phase("restart mid-rolling-update", t);

    let t = Instant::now();
    inplace_reconfigure_keeps_slurmctld(&env).await;
    assert_full_service(&env, &client, "an in-place reconfigure", &[]).await;
    phase("in-place reconfigure", t);

    let t = Instant::now();
    let job = eviction_refused_for_the_busy_pod(&env, &client).await;
    assert_full_service(&env, &client, "evictions beside a job", &[job]).await;
    phase("eviction", t);

    phase("total", start);
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
}

fn phase(what: &str, since: Instant) {
    eprintln!("lifecycle: {what}: {:.1?}", since.elapsed());
}

// --- 1. cordon ---------------------------------------------------------------------------------

/// A Kubernetes node this test cordoned (and maybe annotated): uncordoned and stripped of the
/// annotation when dropped, also when the test fails.
struct CordonGuard {
    node: String,
}

impl CordonGuard {
    fn cordon(&self) {
        ground().ok(&["cordon", &self.node]);
    }

    fn uncordon(&self) {
        ground().ok(&["uncordon", &self.node]);
    }

    fn annotate(&self, reason: &str) {
        ground().ok(&[
            "annotate",
            "--overwrite",
            "node",
            &self.node,
            &format!("{CORDON_REASON_ANNOTATION}={reason}"),
        ]);
    }

    fn remove_annotation(&self) {
        ground().ok(&[
            "annotate",
            "node",
            &self.node,
            &format!("{CORDON_REASON_ANNOTATION}-"),
        ]);
    }

    /// Sets (`Some`: reason and message) or removes the node condition [`PROBLEM`], as a
    /// node-problem-detector would.
    fn problem(&self, problem: Option<(&str, &str)>) {
        let args = self.problem_patch(problem);
        ground().ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The kubectl arguments of [`CordonGuard::problem`].
    fn problem_patch(&self, problem: Option<(&str, &str)>) -> Vec<String> {
        let condition = match problem {
            Some((reason, message)) => serde_json::json!({
                "type": PROBLEM, "status": "True", "reason": reason, "message": message,
            }),
            None => serde_json::json!({"type": PROBLEM, "$patch": "delete"}),
        };
        let patch = serde_json::json!({"status": {"conditions": [condition]}});
        [
            "patch",
            "node",
            &self.node,
            "--subresource=status",
            "--type=strategic",
            "-p",
            &patch.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }
}

/// The node condition type the operator of this test propagates.
const PROBLEM: &str = "SlurmRsTestProblem";

impl Drop for CordonGuard {
    fn drop(&mut self) {
        let g = ground();
        let _ = g.kubectl(&["uncordon", &self.node], None);
        let _ = g.kubectl(
            &[
                "annotate",
                "node",
                &self.node,
                &format!("{CORDON_REASON_ANNOTATION}-"),
            ],
            None,
        );
        let args = self.problem_patch(None);
        let _ = g.kubectl(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
    }
}

/// The Kubernetes node under one of this test's worker pods that hosts the fewest worker pods of
/// other tests (a cordon drains theirs too) and that nobody else has cordoned; with the pods of
/// ours on it (pod name, Slurm node name).
fn pick_node(env: &TestEnv) -> (String, Vec<(String, String)>) {
    let g = ground();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mine = g.get(
            env.name(),
            "pods",
            "{range .items[*]}{.metadata.name} {.spec.nodeName} {.spec.hostname}{\"\\n\"}{end}",
        );
        let mut by_node: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for line in mine.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [pod, node, host] = f[..]
                && pod.starts_with(NODESET)
            {
                by_node
                    .entry(node.to_owned())
                    .or_default()
                    .push((pod.to_owned(), host.to_owned()));
            }
        }
        let all = g.ok(&[
            "get",
            "pods",
            "-A",
            "-l",
            "nodeset.slinky.slurm.net/pod-name",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace} {.spec.nodeName}{\"\\n\"}{end}",
        ]);
        let foreign = |node: &str| {
            all.lines()
                .filter(|l| {
                    let mut f = l.split_whitespace();
                    f.next() != Some(env.name()) && f.next() == Some(node)
                })
                .count()
        };
        let cordoned = |node: &str| {
            g.ok(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]) == "true"
        };
        let best = by_node
            .into_iter()
            .filter(|(node, _)| !cordoned(node))
            .min_by_key(|(node, _)| foreign(node));
        if let Some((node, pods)) = best {
            eprintln!(
                "lifecycle: cordoning {node} ({} worker pods of other tests on it)",
                foreign(&node)
            );
            return (node, pods);
        }
        assert!(
            Instant::now() < deadline,
            "every node under this test's worker pods stayed cordoned by someone else"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

async fn cordon_drains_and_uncordon_resumes(env: &TestEnv, client: &Client) {
    let (node, pods) = pick_node(env);
    let guard = CordonGuard { node: node.clone() };

    // Without a reason annotation: Slinky's reason, and the pod marked cordoned.
    guard.cordon();
    for (pod, host) in &pods {
        let want = format!(
            "slurm-operator: Node ({node}) was cordoned, Pod ({}/{pod}) must be cordoned",
            env.name()
        );
        let n = wait_node(client, host, "drained for the cordon", |n| {
            n.is_drain() && n.reason.as_deref() == Some(want.as_str())
        })
        .await;
        assert!(!n.is_busy(), "{host}: {:?}", n.state);
        env.wait_for(
            &format!("pod/{pod}"),
            "{.metadata.annotations.nodeset\\.slinky\\.slurm\\.net/pod-cordon}",
            LIMIT,
            |v| v == "true",
        );
    }
    guard.uncordon();
    for (pod, host) in &pods {
        wait_node(client, host, "resumed after uncordon", is_idle).await;
        env.wait_for(
            &format!("pod/{pod}"),
            "{.metadata.annotations.nodeset\\.slinky\\.slurm\\.net/pod-cordon}",
            LIMIT,
            str::is_empty,
        );
    }

    // With the node's reason annotation (as a drainer sets it before it cordons): its text,
    // sanitised, under the operator's prefix.
    guard.annotate("  GPU 3 fell off the bus\tticket 42 ");
    cordoned_drains_with(
        &guard,
        client,
        &pods,
        "slurm-operator: GPU 3 fell off the bus ticket 42",
    )
    .await;
    guard.remove_annotation();
    uncordoned_resumes(client, &pods).await;

    // With a node condition the operator propagates (`--propagated-node-conditions`), as a
    // node-problem-detector sets it: the condition's reason and message.
    guard.problem(Some(("XidError", "Xid 79 on GPU 3")));
    cordoned_drains_with(
        &guard,
        client,
        &pods,
        "slurm-operator: (XidError: Xid 79 on GPU 3)",
    )
    .await;
    guard.problem(None);
    uncordoned_resumes(client, &pods).await;
    drop(guard);
}

/// Cordons the guard's node, waits for every pod's Slurm node to be drained with `reason`, and
/// uncordons it again.
async fn cordoned_drains_with(
    guard: &CordonGuard,
    client: &Client,
    pods: &[(String, String)],
    reason: &str,
) {
    guard.cordon();
    for (_, host) in pods {
        wait_node(client, host, "drained with the cordon's reason", |n| {
            n.is_drain() && n.reason.as_deref() == Some(reason)
        })
        .await;
    }
    guard.uncordon();
}

/// Waits for every pod's Slurm node to be idle again.
async fn uncordoned_resumes(client: &Client, pods: &[(String, String)]) {
    for (_, host) in pods {
        wait_node(client, host, "resumed after uncordon", is_idle).await;
    }
}

// --- 2. no writes at rest ----------------------------------------------------------------------

/// Watches the API server's audit log for [`QUIET`] while the test itself does nothing, and
/// returns the writes in the test's namespace that the operator made (events and leases aside).
/// Writes of the ground itself (kubelet, scheduler, its workload controllers) are told apart by
/// their field manager: every patch of the operator names `slurm-operator`, the ground's apply
/// patches name `kube-ground-*`, and the ground's status patches name none.
async fn no_writes_at_rest(env: &TestEnv, client: &Client) -> Result<(), String> {
    // Settled: Slurm nodes idle, the NodeSet's counters and the pods' conditions written.
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.slurmIdle}",
        LIMIT,
        |v| v == "2",
    );
    for pod in [format!("{NODESET}-0"), format!("{NODESET}-1")] {
        env.wait_for(
            &format!("pod/{pod}"),
            "{.status.conditions[?(@.type==\"SlurmNodeStateIdle\")].status}",
            LIMIT,
            |s| s == "True",
        );
    }
    for host in ["slinky-0", "slinky-1"] {
        wait_node(client, host, "idle", is_idle).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let audit = AuditTail::now();
    tokio::time::sleep(QUIET).await;
    let writes: Vec<String> = audit
        .events()
        .into_iter()
        .filter(|e| is_operator_write(e, env.name()))
        .map(|e| describe(&e))
        .collect();
    if writes.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the operator wrote to the API server at rest ({} writes in {QUIET:?}):\n{}",
        writes.len(),
        writes.join("\n")
    ))
}

/// The audit log from one moment on, across a rotation.
struct AuditTail {
    path: PathBuf,
    inode: u64,
    offset: u64,
}

impl AuditTail {
    fn now() -> AuditTail {
        let path = audit_log_path();
        let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        AuditTail {
            path,
            inode: meta.ino(),
            offset: meta.len(),
        }
    }

    /// Every audit event logged since [`AuditTail::now`].
    fn events(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        let current = std::fs::metadata(&self.path).map(|m| m.ino()).ok();
        if current == Some(self.inode) {
            read_events(&self.path, self.offset, &mut out);
            return out;
        }
        // Rotated: the old file was renamed beside the new one (same inode).
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let old = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .find(|e| e.metadata().is_ok_and(|m| m.ino() == self.inode));
        match old {
            Some(old) => read_events(&old.path(), self.offset, &mut out),
            None => panic!(
                "{}: rotated and the old file is gone; cannot read the quiet window",
                self.path.display()
            ),
        }
        read_events(&self.path, 0, &mut out);
        out
    }
}

fn audit_log_path() -> PathBuf {
    let file = std::env::var("KUBE_GROUND_ENV_FILE")
        .unwrap_or_else(|_| "/run/slurm-dev/kube/kube.env".into());
    let raw = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    raw.lines()
        .find_map(|l| l.strip_prefix("KUBE_GROUND_AUDIT_LOG="))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("KUBE_GROUND_AUDIT_LOG missing in {file}"))
}

fn read_events(path: &Path, offset: u64, out: &mut Vec<serde_json::Value>) {
    let mut file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.seek(SeekFrom::Start(offset)).unwrap();
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        // The last line may be half written; what does not parse is skipped.
        if let Ok(v) = serde_json::from_str(&line) {
            out.push(v);
        }
    }
}

fn is_operator_write(e: &serde_json::Value, namespace: &str) -> bool {
    let s = |p: &str| e.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
    if s("/stage") != "ResponseComplete"
        || !matches!(
            s("/verb"),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
        || s("/objectRef/namespace") != namespace
        || matches!(s("/objectRef/resource"), "events" | "leases")
    {
        return false;
    }
    let manager = field_manager(s("/requestURI"));
    if manager.starts_with("kube-ground-") {
        return false;
    }
    // The kubelet's pod status, the scheduler's binding, the workload controllers' status.
    let subresource = s("/objectRef/subresource");
    !(matches!(subresource, "status" | "binding") && manager != "slurm-operator")
}

fn field_manager(uri: &str) -> &str {
    uri.split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("fieldManager="))
        .unwrap_or_default()
}

fn describe(e: &serde_json::Value) -> String {
    let s = |p: &str| e.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
    let sub = s("/objectRef/subresource");
    format!(
        "{} {} {}{}{} {} (fieldManager={:?})",
        s("/requestReceivedTimestamp"),
        s("/verb"),
        s("/objectRef/resource"),
        if sub.is_empty() { "" } else { "/" },
        sub,
        s("/objectRef/name"),
        field_manager(s("/requestURI")),
    )
}

// --- 3. operator restart mid-scale-in ----------------------------------------------------------

/// Returns the job it cancelled.
async fn restart_mid_scale_in_keeps_the_busy_pod(env: &mut TestEnv, client: &Client) -> u32 {
    let victim = format!("{NODESET}-1");
    let job = sbatch(
        env,
        "sbatch -w slinky-1 -o /dev/null --parsable --wrap 'sleep 600'",
    );
    wait_node(client, "slinky-1", "allocated", Node::is_busy).await;
    let uid = pod_uid(env, &victim);
    // The busy pod goes first: a lower deletion cost outranks its running job's deadline, which
    // would otherwise make the idle pod the first victim.
    ground().ok(&[
        "annotate",
        "-n",
        env.name(),
        &format!("pod/{victim}"),
        "nodeset.slinky.slurm.net/pod-deletion-cost=-100",
    ]);

    scale(env, 1);
    let reason = format!(
        "slurm-operator: Pod ({}/{victim}) is pending termination for scale-in",
        env.name()
    );
    wait_node(client, "slinky-1", "drained for the scale-in", |n| {
        n.is_drain() && n.reason.as_deref() == Some(reason.as_str())
    })
    .await;

    // A crash, then a new operator with no memory of the old one.
    env.operator().kill_now();
    env.start_operator(&["--slurm-poll", "1s"]);
    env.operator()
        .wait_for_log("watching", Duration::from_secs(30));
    // Long enough for the new operator to list, reconcile and poll Slurm several times.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        pod_uid(env, &victim),
        uid,
        "the busy pod was deleted or replaced after the restart"
    );
    let n = node(client, "slinky-1").await;
    assert!(
        n.is_drain() && n.is_busy() && n.reason.as_deref() == Some(reason.as_str()),
        "slinky-1 after the restart: {:?} {:?} {:?}",
        n.state,
        n.state_flags,
        n.reason
    );

    // The job ends: the new operator deletes the pod.
    client.cancel_job(job).await.expect("scancel");
    wait_pods(env, &[&format!("{NODESET}-0")]);
    job
}

// --- 4. scale to zero and back -----------------------------------------------------------------

async fn scale_to_zero_and_back(env: &TestEnv, client: &Client) {
    let nodeset = format!("nodeset/{NODESET}");
    scale(env, 0);
    wait_pods(env, &[]);
    // Drained before it went (the slurmd's preStop hook rewrites the reason as the pod stops,
    // so the operator's own drain is read from its events).
    let events = ground().ok(&[
        "get",
        "-n",
        env.name(),
        "events.events.k8s.io",
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.note}{\"\\n\"}{end}",
    ]);
    let want = format!(
        "drained Slurm node slinky-0: slurm-operator: Pod ({}/{NODESET}-0) is pending termination for scale-in",
        env.name()
    );
    assert!(
        events.contains(&want),
        "no {want:?} in the events:\n{events}"
    );
    let n = node(client, "slinky-0").await;
    assert!(
        n.is_draining()
            && n.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("slurm-operator: ")),
        "slinky-0 after its pod went: {:?} {:?} {:?}",
        n.state,
        n.state_flags,
        n.reason
    );
    env.wait_for(&nodeset, "{.status.replicas}", LIMIT, |r| r == "0");
    assert_eq!(
        ground().get(env.name(), &nodeset, "{.status.readyReplicas}"),
        "0"
    );
    assert_eq!(scale_status(env), "0");

    scale(env, 2);
    wait_pods(env, &[&format!("{NODESET}-0"), &format!("{NODESET}-1")]);
    env.wait_for(&nodeset, "{.status.readyReplicas}", LIMIT, |r| r == "2");
    // The new slurmd registers under the old name; the operator lifts its own drain.
    for host in ["slinky-0", "slinky-1"] {
        wait_node(client, host, "idle again", is_idle).await;
    }
    env.wait_for(&nodeset, "{.status.slurmIdle}", LIMIT, |v| v == "2");
    assert_eq!(
        ground().get(env.name(), &nodeset, "{.status.replicas}"),
        "2"
    );
    assert_eq!(scale_status(env), "2");
}

/// `status.replicas` of the NodeSet's scale subresource, as an HPA reads it.
fn scale_status(env: &TestEnv) -> String {
    ground().ok(&[
        "get",
        "-n",
        env.name(),
        &format!("nodeset/{NODESET}"),
        "--subresource=scale",
        "-o",
        "jsonpath={.status.replicas}",
    ])
}

// --- 5. scale-in beside a running job ----------------------------------------------------------

/// Issue 27: the job starts on slinky-1, the first victim while its deadline is not yet known,
/// and the scale-in comes as soon as it runs. Whichever pod goes, the job completes and the node that stays
/// is usable afterwards; then back to 2.
async fn scale_in_beside_a_running_job(env: &TestEnv, client: &Client) {
    let job = sbatch(
        env,
        "sbatch -w slinky-1 -t 2 -o /dev/null --parsable --wrap 'sleep 20'",
    );
    // Started, and the scale-in at once (a job still pending on a node drained for the
    // scale-in would wait for good: it names that node).
    wait_node(client, "slinky-1", "allocated", Node::is_busy).await;
    scale(env, 1);
    let deadline = Instant::now() + LIMIT;
    loop {
        let state = client.get_job(job).await.expect("the job").value.state;
        if state.is_finished() {
            assert_eq!(state, JobState::Completed, "job {job}");
            break;
        }
        assert!(Instant::now() < deadline, "job {job} still {state:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let deadline = Instant::now() + LIMIT;
    while pods(env).len() != 1 {
        assert!(
            Instant::now() < deadline,
            "pods {:?} after the scale-in",
            pods(env)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_full_service(env, client, "a scale-in beside a running job", &[job]).await;

    scale(env, 2);
    wait_pods(env, &[&format!("{NODESET}-0"), &format!("{NODESET}-1")]);
    assert_full_service(env, client, "the scale-out after it", &[job]).await;
}

// --- 6. config change --------------------------------------------------------------------------

async fn config_change_rolls_slurmctld(env: &TestEnv) {
    let cr = "controllers.slinky.slurm.net/slurm";
    let before = pod_uid(env, "slurm-controller-0");
    let conf = ground().get(env.name(), cr, "{.spec.extraConf}");
    let conf = format!("{}\nSchedulerParameters=bf_interval=45\n", conf.trim_end());
    let patch = serde_json::json!([{"op": "replace", "path": "/spec/extraConf", "value": conf}]);
    ground().ok(&[
        "patch",
        "-n",
        env.name(),
        cr,
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
    env.wait_for("pod/slurm-controller-0", "{.metadata.uid}", LIMIT, |uid| {
        !uid.is_empty() && uid != before
    });
    env.wait_for(
        "statefulset/slurm-controller",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    let (code, out) = env.run_in_cluster(
        "slurm",
        "scontrol show config | grep -i '^SchedulerParameters' && \
         sbatch --wait -N2 -o /dev/null --wrap 'srun hostname'",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("bf_interval=45"), "{out}");
}

// --- 7. rolling update ------------------------------------------------------------------------

/// `maxUnavailable` of `lifecycle.yaml`'s NodeSet (25% of 2, rounded up).
const MAX_UNAVAILABLE: u32 = 1;

/// A change of the slurmd container (an env var) rolls every pod while a job runs on slinky-1:
/// the busy pod is not deleted before its job ends, never more than [`MAX_UNAVAILABLE`] pods
/// are unavailable, and every pod ends on the new revision. Returns the job.
async fn rolling_update_waits_for_the_busy_node(env: &TestEnv, client: &Client) -> u32 {
    let watch = PodWatch::start(env, 2).await;
    let slurm_watch = SlurmWatch::start(client);
    let job = sbatch(
        env,
        "sbatch -w slinky-1 -t 2 -o /dev/null --parsable --wrap 'sleep 20'",
    );
    wait_node(client, "slinky-1", "allocated", Node::is_busy).await;
    let busy = pod_uid(env, &format!("{NODESET}-1"));
    let old = roll(env, "1");

    let deadline = Instant::now() + LIMIT;
    loop {
        // Read before the job: a deletion seen here happened while the job below still ran.
        let deleted = watch.gone(&busy);
        let state = client.get_job(job).await.expect("the job").value.state;
        if state.is_finished() {
            assert_eq!(state, JobState::Completed, "job {job}");
            break;
        }
        assert!(
            !deleted,
            "the busy pod {NODESET}-1 was deleted while job {job} was {state:?}"
        );
        assert!(Instant::now() < deadline, "job {job} still {state:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let new = rolled_out(env, &old);
    watch.assert_max_unavailable(MAX_UNAVAILABLE, &format!("the rollout {old} -> {new}"));
    slurm_watch.assert_max_unusable(MAX_UNAVAILABLE, &format!("the rollout {old} -> {new}"));
    assert_ne!(
        pod_uid(env, &format!("{NODESET}-1")),
        busy,
        "the busy pod was not replaced"
    );
    job
}

/// Sets env var `SLURM_RS_ROLLOUT` of the NodeSet's slurmd to `value` (a new pod template);
/// returns the update revision before the change.
fn roll(env: &TestEnv, value: &str) -> String {
    let nodeset = format!("nodeset/{NODESET}");
    let before = ground().get(env.name(), &nodeset, "{.status.nodeSetHash}");
    assert!(!before.is_empty(), "{nodeset} has no status.nodeSetHash");
    let patch = serde_json::json!({"spec": {"slurmd": {"env": [
        {"name": "SLURM_RS_ROLLOUT", "value": value},
    ]}}});
    ground().ok(&[
        "patch",
        "-n",
        env.name(),
        &nodeset,
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    before
}

/// Waits until the NodeSet's update revision is no longer `old` and every pod carries it
/// (`controller-revision-hash` = `status.nodeSetHash`), updated, ready and 2 of them; returns it.
fn rolled_out(env: &TestEnv, old: &str) -> String {
    let nodeset = format!("nodeset/{NODESET}");
    let new = env.wait_for(&nodeset, "{.status.nodeSetHash}", LIMIT, |h| {
        !h.is_empty() && h != old
    });
    env.wait_for(
        &nodeset,
        "{.status.replicas} {.status.updatedReplicas} {.status.readyReplicas}",
        LIMIT,
        |v| v == "2 2 2",
    );
    let deadline = Instant::now() + LIMIT;
    loop {
        let revisions: Vec<String> = pods(env)
            .into_iter()
            .map(|pod| {
                let hash = ground().get(
                    env.name(),
                    &format!("pod/{pod}"),
                    "{.metadata.labels.controller-revision-hash}",
                );
                format!("{pod}={hash}")
            })
            .collect();
        let want = [format!("{NODESET}-0={new}"), format!("{NODESET}-1={new}")];
        if revisions == want {
            return new;
        }
        assert!(
            Instant::now() < deadline,
            "pods {revisions:?} after the rollout to {new}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The NodeSet's pods as a watch sees them, event by event: what a poll would miss between two
/// looks (a pod not ready for a moment, a deletion).
struct PodWatch {
    state: std::sync::Arc<std::sync::Mutex<Watched>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Watched {
    listed: bool,
    /// name → (uid, ready and not terminating)
    pods: BTreeMap<String, (String, bool)>,
    /// UIDs seen terminating or gone.
    gone: std::collections::BTreeSet<String>,
    /// UIDs seen with `pod-cordon`.
    cordoned: std::collections::BTreeSet<String>,
    /// The most pods missing from `desired` ready ones at once, and the pods then.
    worst: (u32, String),
    /// Every change after the listing, for the log: time since the listing, pod, what.
    timeline: Vec<(Duration, String)>,
    since: Option<Instant>,
}

impl PodWatch {
    /// Watches the NodeSet's pods (which should number `desired`) from now on.
    async fn start(env: &TestEnv, desired: u32) -> PodWatch {
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::Pod;
        use kube::ResourceExt;
        use kube::runtime::watcher::{self, Event, watcher};

        let client = ground()
            .kube_client()
            .await
            .expect("a client of the ground");
        let api: kube::Api<Pod> = kube::Api::namespaced(client, env.name());
        let config =
            watcher::Config::default().labels(&format!("app.kubernetes.io/instance={NODESET}"));
        let state = std::sync::Arc::new(std::sync::Mutex::new(Watched::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config));
            while let Some(event) = events.next().await {
                let mut w = shared.lock().unwrap();
                let (pod, gone) = match event {
                    Ok(Event::Apply(p) | Event::InitApply(p)) => (p, false),
                    Ok(Event::Delete(p)) => (p, true),
                    Ok(Event::InitDone) => {
                        w.listed = true;
                        w.since = Some(Instant::now());
                        continue;
                    }
                    Ok(Event::Init) | Err(_) => continue,
                };
                let uid = pod.uid().unwrap_or_default();
                let deleting = gone || pod.metadata.deletion_timestamp.is_some();
                if deleting {
                    w.gone.insert(uid.clone());
                }
                if pod.annotations().contains_key(ANNOTATION_POD_CORDON) {
                    w.cordoned.insert(uid.clone());
                }
                let ready = !deleting
                    && pod
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                let name = pod.name_any();
                if let Some(since) = w.since {
                    let what = match (gone, deleting, ready) {
                        (true, _, _) => "gone",
                        (_, true, _) => "terminating",
                        (_, _, true) => "ready",
                        _ => "not ready",
                    };
                    let cordon = if pod.annotations().contains_key(ANNOTATION_POD_CORDON) {
                        ", cordoned"
                    } else {
                        ""
                    };
                    let line = format!("{name} {}: {what}{cordon}", &uid[..uid.len().min(8)]);
                    if w.timeline.last().map(|(_, l)| l) != Some(&line) {
                        w.timeline.push((since.elapsed(), line));
                    }
                }
                if gone {
                    w.pods.remove(&name);
                } else {
                    w.pods.insert(name, (uid, ready));
                }
                if w.listed {
                    let ready = w.pods.values().filter(|(_, r)| *r).count() as u32;
                    let missing = desired.saturating_sub(ready);
                    if missing > w.worst.0 {
                        w.worst = (missing, format!("{:?}", w.pods));
                    }
                }
            }
        });
        let watch = PodWatch { state, task };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !watch.state.lock().unwrap().listed {
            assert!(Instant::now() < deadline, "the pod watch listed nothing");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        watch
    }

    /// Whether the pod with this UID was seen terminating or gone.
    fn gone(&self, uid: &str) -> bool {
        self.state.lock().unwrap().gone.contains(uid)
    }

    /// Whether any of these pods was seen cordoned, terminating or gone.
    fn touched(&self, uids: &[String]) -> bool {
        let w = self.state.lock().unwrap();
        uids.iter()
            .any(|u| w.gone.contains(u) || w.cordoned.contains(u))
    }

    fn assert_max_unavailable(&self, max: u32, during: &str) {
        let w = self.state.lock().unwrap();
        assert!(
            w.worst.0 <= max,
            "{} pods unavailable at once during {during} (maxUnavailable {max}): {}",
            w.worst.0,
            w.worst.1
        );
        eprintln!(
            "lifecycle: at most {} pod(s) unavailable during {during}:\n  {}",
            w.worst.0,
            w.timeline
                .iter()
                .map(|(t, l)| format!("{:>5.1}s {l}", t.as_secs_f32()))
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Slurm side of a rollout: how many of the two workers' Slurm nodes take no jobs at once
/// (unregistered, down, drained or draining, not responding), polled every 250 ms. A pod that
/// Kubernetes calls ready may not take jobs yet: its replacement must wait for that.
struct SlurmWatch {
    state: std::sync::Arc<std::sync::Mutex<Unusable>>,
    task: tokio::task::JoinHandle<()>,
}

/// The most Slurm nodes that took no jobs at once, and every change: time since the start, the
/// nodes that took no jobs.
type Unusable = (u32, Vec<(Duration, String)>);

impl SlurmWatch {
    fn start(client: &Client) -> SlurmWatch {
        let client = client.clone();
        let state = std::sync::Arc::new(std::sync::Mutex::new((0, Vec::new())));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let since = Instant::now();
            loop {
                if let Ok(r) = client.list_nodes(&Default::default()).await {
                    let mut unusable = Vec::new();
                    for host in ["slinky-0", "slinky-1"] {
                        match r.value.nodes.iter().find(|n| n.name == host) {
                            Some(n) if n.is_available() => {}
                            Some(n) => unusable.push(format!(
                                "{host} {:?} {:?} {:?}",
                                n.state, n.state_flags, n.reason
                            )),
                            None => unusable.push(format!("{host} not registered")),
                        }
                    }
                    let line = if unusable.is_empty() {
                        "all take jobs".to_owned()
                    } else {
                        unusable.join("; ")
                    };
                    let mut w = shared.lock().unwrap();
                    w.0 = w.0.max(unusable.len() as u32);
                    if w.1.last().map(|(_, l)| l) != Some(&line) {
                        w.1.push((since.elapsed(), line));
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        SlurmWatch { state, task }
    }

    fn assert_max_unusable(&self, max: u32, during: &str) {
        let w = self.state.lock().unwrap();
        let timeline =
            w.1.iter()
                .map(|(t, l)| format!("{:>5.1}s {l}", t.as_secs_f32()))
                .collect::<Vec<_>>()
                .join("\n  ");
        assert!(
            w.0 <= max,
            "{} Slurm nodes took no jobs at once during {during} (maxUnavailable {max}):\n  {timeline}",
            w.0
        );
        eprintln!(
            "lifecycle: at most {} Slurm node(s) took no jobs during {during}:\n  {timeline}",
            w.0
        );
    }
}

impl Drop for SlurmWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// --- 8. operator restart mid-rolling-update ----------------------------------------------------

/// Another rollout, and the operator killed as soon as it cordoned or deleted its first old pod;
/// the new operator finishes the update within `maxUnavailable`.
async fn restart_mid_rolling_update(env: &mut TestEnv, client: &Client) {
    let watch = PodWatch::start(env, 2).await;
    let slurm_watch = SlurmWatch::start(client);
    let old_pods = [0, 1].map(|o| pod_uid(env, &format!("{NODESET}-{o}")));
    let old = roll(env, "2");
    let deadline = Instant::now() + LIMIT;
    while !watch.touched(&old_pods) {
        assert!(
            Instant::now() < deadline,
            "the operator did not start the rollout"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.operator().kill_now();
    env.start_operator(&["--slurm-poll", "1s"]);
    env.operator()
        .wait_for_log("watching", Duration::from_secs(30));
    let new = rolled_out(env, &old);
    watch.assert_max_unavailable(
        MAX_UNAVAILABLE,
        &format!("the rollout {old} -> {new} across a restart"),
    );
    for host in ["slinky-0", "slinky-1"] {
        wait_node(client, host, "idle after the rollout", is_idle).await;
    }
    slurm_watch.assert_max_unusable(
        MAX_UNAVAILABLE,
        &format!("the rollout {old} -> {new} across a restart"),
    );
}

// --- 9. config change with inplaceReconfigure -------------------------------------------------

/// `inplaceReconfigure: true` (slurmctld rolls once, for the `reconfigure` sidecar), then a
/// change of `extraConf`: the pod is not replaced, slurmctld keeps its process (Slurm re-execs a
/// foreground slurmctld in place), and `scontrol show config` shows the new value once the
/// kubelet has written the new slurm.conf into the pod and the sidecar has run
/// `scontrol reconfigure`.
async fn inplace_reconfigure_keeps_slurmctld(env: &TestEnv) {
    let cr = "controllers.slinky.slurm.net/slurm";
    let before = pod_uid(env, CONTROLLER_POD);
    patch_json(
        env,
        cr,
        serde_json::json!([{"op": "add", "path": "/spec/inplaceReconfigure", "value": true}]),
    );
    let uid = env.wait_for(
        &format!("pod/{CONTROLLER_POD}"),
        "{.metadata.uid}",
        LIMIT,
        |uid| !uid.is_empty() && uid != before,
    );
    env.wait_for(
        &format!("pod/{CONTROLLER_POD}"),
        "{.status.conditions[?(@.type==\"Ready\")].status}",
        LIMIT,
        |s| s == "True",
    );
    let process = slurmctld_process(env);
    let restarts = slurmctld_restarts(env);

    let conf = ground().get(env.name(), cr, "{.spec.extraConf}");
    // Phase 6 set bf_interval=45.
    let conf = if conf.contains("bf_interval=45") {
        conf.replace("bf_interval=45", "bf_interval=55")
    } else {
        format!("{}\nSchedulerParameters=bf_interval=55\n", conf.trim_end())
    };
    patch_json(
        env,
        cr,
        serde_json::json!([{"op": "replace", "path": "/spec/extraConf", "value": conf}]),
    );
    let deadline = Instant::now() + LIMIT;
    loop {
        let (ok, out) = exec(
            env,
            "reconfigure",
            "scontrol show config | grep -i '^SchedulerParameters'",
        );
        if ok && out.contains("bf_interval=55") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slurmctld does not run the new config after {LIMIT:?}: {out}\nreconfigure sidecar:\n{}",
            ground().log(env.name(), CONTROLLER_POD, "reconfigure")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        pod_uid(env, CONTROLLER_POD),
        uid,
        "slurmctld's pod was replaced"
    );
    assert_eq!(
        slurmctld_process(env),
        process,
        "slurmctld's process (pid, start time) changed"
    );
    assert_eq!(slurmctld_restarts(env), restarts, "slurmctld restarted");
    let log = ground().log(env.name(), CONTROLLER_POD, "reconfigure");
    assert!(log.contains("reconfigured"), "reconfigure sidecar:\n{log}");
}

const CONTROLLER_POD: &str = "slurm-controller-0";

fn patch_json(env: &TestEnv, what: &str, patch: serde_json::Value) {
    ground().ok(&[
        "patch",
        "-n",
        env.name(),
        what,
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// `kubectl exec` of `sh -c script` in container `container` of slurmctld's pod: whether it
/// exited 0, and its output.
fn exec(env: &TestEnv, container: &str, script: &str) -> (bool, String) {
    let out = ground().kubectl(
        &[
            "exec",
            "-n",
            env.name(),
            CONTROLLER_POD,
            "-c",
            container,
            "--",
            "sh",
            "-c",
            script,
        ],
        None,
    );
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// slurmctld's process as its container sees it: "<pid> <start time in clock ticks>" (field 22
/// of its stat, counted after the command name), found by its command line: Slurm renames its
/// threads, the main one included, so `comm` will not do.
fn slurmctld_process(env: &TestEnv) -> String {
    let (ok, out) = exec(
        env,
        "slurmctld",
        r#"for d in /proc/[0-9]*; do
             cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
             case "$cmd" in
               slurmctld\ *|*/slurmctld\ *) echo "found ${d#/proc/} $(sed 's/.*) //' "$d/stat" | cut -d' ' -f20)" ;;
               *) echo "other ${d#/proc/} $(cat "$d/comm" 2>/dev/null): $cmd" ;;
             esac
           done"#,
    );
    let found: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("found "))
        .collect();
    assert!(ok && found.len() == 1, "slurmctld's process: {out}");
    found[0].to_owned()
}

fn slurmctld_restarts(env: &TestEnv) -> String {
    ground().get(
        env.name(),
        &format!("pod/{CONTROLLER_POD}"),
        "{.status.containerStatuses[?(@.name==\"slurmctld\")].restartCount}",
    )
}

// --- 10. eviction through the API --------------------------------------------------------------

/// A job on slinky-1; once the operator labelled its pod `pod-protect`, an eviction of that pod
/// is refused by the workers' PodDisruptionBudget (429) and leaves the pod as it was, while the
/// idle pod's eviction deletes it and the operator brings it back under its name. Returns the
/// job, which completes.
async fn eviction_refused_for_the_busy_pod(env: &TestEnv, client: &Client) -> u32 {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::EvictParams;

    let (busy, idle) = (format!("{NODESET}-1"), format!("{NODESET}-0"));
    // Without kube's default retry, which answers a 429 by waiting its Retry-After and asking
    // again (15 times): the refused eviction would be retried until the job ended.
    let kubeconfig =
        kube::config::Kubeconfig::read_from(ground().kubeconfig()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the ground's kubeconfig");
    config.default_retry = false;
    let kube = kube::Client::try_from(config).expect("a client of the ground");
    let pods: kube::Api<Pod> = kube::Api::namespaced(kube.clone(), env.name());
    let pdb: PodDisruptionBudget = kube::Api::namespaced(kube, env.name())
        .get("slurm-workers-pdb-slurm")
        .await
        .expect("the workers' PodDisruptionBudget");
    let selector = pdb
        .spec
        .and_then(|s| s.selector)
        .and_then(|s| s.match_labels);
    assert_eq!(
        selector.as_ref().and_then(|l| l.get(LABEL_POD_PROTECT)),
        Some(&"true".to_owned()),
        "the PDB's selector: {selector:?}"
    );

    let job = sbatch(
        env,
        "sbatch -w slinky-1 -t 2 -o /dev/null --parsable --wrap 'sleep 15'",
    );
    wait_node(client, "slinky-1", "allocated", Node::is_busy).await;
    let protect = format!(
        "{{.metadata.labels.{}}}",
        LABEL_POD_PROTECT.replace('.', "\\.")
    );
    env.wait_for(&format!("pod/{busy}"), &protect, LIMIT, |v| v == "true");
    let uid = pod_uid(env, &busy);

    match pods.evict(&busy, &EvictParams::default()).await {
        Err(kube::Error::Api(e)) if e.code == 429 => assert!(
            e.message
                .contains("Cannot evict pod as it would violate the pod's disruption budget"),
            "{e:?}"
        ),
        other => {
            let pod = pods.get(&busy).await.ok();
            let budgets = ground().ok(&["get", "-n", env.name(), "pdb", "-o", "yaml"]);
            panic!(
                "the eviction of the busy pod {busy} was not refused: {other:?}\nits labels: {:?}, phase {:?}\n{budgets}",
                pod.as_ref().map(|p| &p.metadata.labels),
                pod.as_ref()
                    .and_then(|p| p.status.as_ref())
                    .and_then(|s| s.phase.as_ref()),
            )
        }
    }
    let after = pods.get(&busy).await.expect("the busy pod");
    assert_eq!(
        after.metadata.uid.as_deref(),
        Some(uid.as_str()),
        "{busy} replaced"
    );
    assert!(
        after.metadata.deletion_timestamp.is_none(),
        "{busy} terminating after a refused eviction"
    );

    let before = pod_uid(env, &idle);
    pods.evict(&idle, &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("the eviction of the idle pod {idle}: {e}"));
    env.wait_for(&format!("pod/{idle}"), "{.metadata.uid}", LIMIT, |u| {
        !u.is_empty() && u != before
    });
    wait_node(client, "slinky-0", "idle after its pod came back", is_idle).await;
    let deadline = Instant::now() + LIMIT;
    loop {
        let state = client.get_job(job).await.expect("the job").value.state;
        if state.is_finished() {
            assert_eq!(state, JobState::Completed, "job {job}");
            break;
        }
        assert!(Instant::now() < deadline, "job {job} still {state:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        pod_uid(env, &busy),
        uid,
        "{busy} replaced while its job ran"
    );
    job
}

// --- helpers -----------------------------------------------------------------------------------

fn is_idle(n: &Node) -> bool {
    n.state == NodeState::Idle && !n.is_draining() && !n.is_not_responding()
}
