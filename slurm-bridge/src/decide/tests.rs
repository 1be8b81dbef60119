//! The drift cases, one table row each.

use super::*;

fn pod(name: &str) -> PodView {
    PodView {
        name: name.into(),
        job_id: None,
        assigned_node: None,
        bound_node: None,
        phase: Phase::Pending,
        deleting: None,
        finalizer: false,
        condition: None,
        condition_age: None,
        volumes: Gate::Ready,
        unfit_on: BTreeMap::new(),
    }
}

fn labelled(name: &str, id: u32) -> PodView {
    PodView {
        job_id: Some(id),
        finalizer: true,
        ..pod(name)
    }
}

fn bound(name: &str, id: u32, node: &str) -> PodView {
    PodView {
        bound_node: Some(node.into()),
        assigned_node: Some(node.into()),
        phase: Phase::Running,
        ..labelled(name, id)
    }
}

fn known(id: u32, state: JobState, nodes: &[&str]) -> JobView {
    JobView::Known {
        id,
        state,
        reason: Some("Priority".into()),
        nodes: nodes
            .iter()
            .map(|n| (n.to_string(), Some(n.to_string())))
            .collect(),
    }
}

fn workload(pods: Vec<PodView>, job: JobView, gang: usize) -> Workload {
    Workload {
        pods,
        job,
        gang: Gang::Size(gang),
    }
}

fn kinds(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Submit { pods } => format!("submit {}", pods.join(",")),
            Action::Label { pod, job_id } => format!("label {pod} {job_id}"),
            Action::SelectNode { pod, node, claims } => {
                format!("select {pod} {node} {}", claims.join(","))
            }
            Action::Bind { pod, node, .. } => format!("bind {pod} {node}"),
            Action::Refit {
                job_id, pods, node, ..
            } => format!("refit {job_id} {} {node}", pods.join(",")),
            Action::Cancel { job_id, .. } => format!("cancel {job_id}"),
            Action::Delete { pod, .. } => format!("delete {pod}"),
            Action::Release { pod } => format!("release {pod}"),
            Action::Condition { pod, reason, .. } => format!("condition {pod} {reason}"),
        })
        .collect()
}

#[test]
fn new_pod_is_submitted() {
    let w = workload(vec![pod("a")], JobView::None, 1);
    assert_eq!(kinds(&decide(&w)), ["submit a"]);
}

#[test]
fn gang_waits_for_its_members() {
    let w = workload(vec![pod("a")], JobView::None, 2);
    assert_eq!(kinds(&decide(&w)), ["condition a WaitingForGroup"]);
    let w = workload(vec![pod("a"), pod("b")], JobView::None, 2);
    assert_eq!(kinds(&decide(&w)), ["submit a,b"]);
}

#[test]
fn a_gang_whose_pod_group_is_missing_waits_whole() {
    let missing = |pods, job| Workload {
        pods,
        job,
        gang: Gang::Unknown("PodGroup pg does not exist".into()),
    };
    // Enough pods for any size: still nothing is submitted.
    let w = missing(vec![pod("a"), pod("b"), pod("c")], JobView::None);
    assert_eq!(
        kinds(&decide(&w)),
        [
            "condition a WaitingForPodGroup",
            "condition b WaitingForPodGroup",
            "condition c WaitingForPodGroup"
        ]
    );
    // Its job purged by Slurm, the PodGroup deleted meanwhile: no partial resubmission.
    let w = missing(vec![labelled("a", 7)], JobView::Missing(7));
    assert_eq!(kinds(&decide(&w)), ["condition a WaitingForPodGroup"]);
    // Said once: no write when the pods already show it.
    let mut shown = pod("a");
    shown.condition = Some((
        "False".into(),
        "WaitingForPodGroup".into(),
        "PodGroup pg does not exist".into(),
    ));
    assert!(decide(&missing(vec![shown], JobView::None)).is_empty());
}

#[test]
fn unknown_job_state_does_nothing() {
    let mut ended = bound("c", 7, "n3");
    ended.phase = Phase::Ended;
    let w = workload(
        vec![labelled("a", 7), bound("b", 7, "n1"), ended],
        JobView::Unknown,
        1,
    );
    assert!(decide(&w).is_empty());
}

#[test]
fn pending_job_labels_stragglers_and_shows_the_reason() {
    // A bridge killed between submit and label: the job (found by its admin_comment) is there.
    let w = workload(vec![pod("a")], known(42, JobState::Pending, &[]), 1);
    assert_eq!(kinds(&decide(&w)), ["label a 42", "condition a Pending"]);
    let actions = decide(&w);
    let Action::Condition { message, .. } = &actions[1] else {
        unreachable!()
    };
    assert_eq!(message, "waiting in Slurm: job 42 (Priority)");
    // Already showing it: no write.
    let mut shown = labelled("a", 42);
    shown.condition = Some((
        "False".into(),
        "Pending".into(),
        "waiting in Slurm: job 42 (Priority)".into(),
    ));
    assert!(decide(&workload(vec![shown], known(42, JobState::Pending, &[]), 1)).is_empty());
    // Not looked at by Slurm's scheduler yet: nothing to tell.
    let unseen = JobView::Known {
        id: 42,
        state: JobState::Pending,
        reason: None,
        nodes: Vec::new(),
    };
    assert!(decide(&workload(vec![labelled("a", 42)], unseen, 1)).is_empty());
}

#[test]
fn running_job_binds_each_pod_to_its_own_node() {
    let w = workload(
        vec![labelled("a", 5), labelled("b", 5)],
        known(5, JobState::Running, &["n1", "n2"]),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["bind a n1", "bind b n2"]);
    // One already bound keeps its node; the other gets the free one.
    let w = workload(
        vec![labelled("a", 5), bound("b", 5, "n1")],
        known(5, JobState::Running, &["n1", "n2"]),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["bind a n2", "condition b Running"]);
    // Annotated before a crash, not bound yet: the same node again.
    let mut annotated = labelled("a", 5);
    annotated.assigned_node = Some("n2".into());
    let w = workload(
        vec![annotated, labelled("b", 5)],
        known(5, JobState::Running, &["n1", "n2"]),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["bind a n2", "bind b n1"]);
}

fn unfit_on(mut p: PodView, node: &str) -> PodView {
    p.unfit_on
        .insert(node.into(), "not enough CPU: 3.000 of 4".into());
    p
}

#[test]
fn a_job_started_where_kubernetes_does_not_admit_a_pod_is_refit_before_any_binding() {
    let job = known(5, JobState::Running, &["n1", "n2"]);
    // b would go to n2, which a pod Slurm does not know fills: the whole gang is taken back.
    let w = workload(
        vec![labelled("a", 5), unfit_on(labelled("b", 5), "n2")],
        job.clone(),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["refit 5 a,b n2"]);
    // Unfit on a node it does not go to: bound as usual.
    let w = workload(
        vec![unfit_on(labelled("a", 5), "n2"), labelled("b", 5)],
        job.clone(),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["bind a n1", "bind b n2"]);
    // A member already runs: the allocation is in use, so the other waits for room there.
    let w = workload(
        vec![bound("a", 5, "n1"), unfit_on(labelled("b", 5), "n2")],
        job,
        2,
    );
    assert_eq!(
        kinds(&decide(&w)),
        ["condition a Running", "condition b WaitingForFit"]
    );
    // An unknown or pending job is never refit.
    let w = workload(
        vec![unfit_on(labelled("a", 5), "n1")],
        known(5, JobState::Pending, &[]),
        1,
    );
    assert!(!kinds(&decide(&w)).iter().any(|k| k.starts_with("refit")));
}

#[test]
fn a_slurm_node_without_kubernetes_node_is_reported_not_bound() {
    let w = workload(
        vec![labelled("a", 5)],
        JobView::Known {
            id: 5,
            state: JobState::Running,
            reason: None,
            nodes: vec![("ghost".into(), None)],
        },
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a NoNode"]);
}

#[test]
fn a_member_beyond_the_allocation_waits_for_room_then_joins() {
    let job = known(5, JobState::Running, &["n1", "n2"]);
    let w = workload(
        vec![bound("a", 5, "n1"), bound("b", 5, "n2"), labelled("c", 5)],
        job.clone(),
        2,
    );
    assert_eq!(
        kinds(&decide(&w)),
        [
            "condition a Running",
            "condition b Running",
            "condition c WaitingForRoom"
        ]
    );
    // b left: c takes its node.
    let mut b = bound("b", 5, "n2");
    b.phase = Phase::Ended;
    let w = workload(vec![bound("a", 5, "n1"), b, labelled("c", 5)], job, 2);
    let actions = kinds(&decide(&w));
    assert!(actions.contains(&"bind c n2".to_owned()), "{actions:?}");
}

#[test]
fn ended_job_ends_its_pods() {
    for state in [
        JobState::Cancelled,
        JobState::Preempted,
        JobState::NodeFail,
        JobState::Timeout,
    ] {
        let w = workload(vec![bound("a", 9, "n1")], known(9, state, &["n1"]), 1);
        assert_eq!(
            kinds(&decide(&w)),
            ["condition a JobEnded", "delete a"],
            "{w:?}"
        );
    }
}

#[test]
fn requeued_job_ends_bound_pods() {
    let w = workload(
        vec![bound("a", 9, "n1")],
        known(9, JobState::Pending, &[]),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["delete a"]);
}

#[test]
fn job_unknown_to_slurm_never_deletes_a_running_pod() {
    let w = workload(vec![bound("a", 9, "n1")], JobView::Missing(9), 1);
    assert_eq!(kinds(&decide(&w)), ["condition a JobUnknownToSlurm"]);
    // An unbound pod gets a new job.
    let w = workload(vec![labelled("a", 9)], JobView::Missing(9), 1);
    assert_eq!(kinds(&decide(&w)), ["submit a"]);
}

#[test]
fn pods_ended_cancel_the_job_then_let_go() {
    let mut done = bound("a", 3, "n1");
    done.phase = Phase::Ended;
    let w = workload(vec![done.clone()], known(3, JobState::Running, &["n1"]), 1);
    assert_eq!(kinds(&decide(&w)), ["cancel 3", "release a"]);
    // The job already ended: only let go.
    let w = workload(vec![done], known(3, JobState::Cancelled, &["n1"]), 1);
    assert_eq!(kinds(&decide(&w)), ["release a"]);
}

#[test]
fn a_terminating_pod_keeps_its_job_until_overdue() {
    let mut terminating = bound("a", 3, "n1");
    terminating.deleting = Some((10, 30));
    let w = workload(
        vec![terminating.clone()],
        known(3, JobState::Running, &["n1"]),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a Running"]);
    // No kubelet reported it ended long after its grace period (Slinky #49).
    terminating.deleting = Some((30 + OVERDUE_AFTER_GRACE + 1, 30));
    let w = workload(vec![terminating], known(3, JobState::Running, &["n1"]), 1);
    assert_eq!(kinds(&decide(&w)), ["cancel 3", "release a"]);
}

#[test]
fn deleting_an_unbound_pod_cancels_its_pending_job() {
    let mut deleted = labelled("a", 4);
    deleted.deleting = Some((0, 30));
    let w = workload(vec![deleted], known(4, JobState::Pending, &[]), 1);
    assert_eq!(kinds(&decide(&w)), ["cancel 4", "release a"]);
}

#[test]
fn one_gang_member_ended_keeps_the_job() {
    let mut leader = bound("a", 6, "n1");
    leader.phase = Phase::Ended;
    let w = workload(
        vec![leader, bound("b", 6, "n2")],
        known(6, JobState::Running, &["n1", "n2"]),
        2,
    );
    assert_eq!(kinds(&decide(&w)), ["release a", "condition b Running"]);
}

#[test]
fn an_ended_job_never_ends_a_pod_that_is_not_its_own() {
    let mut old = bound("a", 9, "n1");
    old.phase = Phase::Ended;
    let w = workload(
        vec![old, pod("b")],
        known(9, JobState::Completed, &["n1"]),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["release a"]);
}

fn with_volumes(mut p: PodView, gate: Gate) -> PodView {
    p.volumes = gate;
    p
}

fn blocked(why: &str) -> Gate {
    Gate::Blocked {
        reason: "WaitingForVolume".into(),
        message: why.into(),
    }
}

fn provision(claims: &[(&str, Option<&str>)]) -> Gate {
    Gate::Provision(
        claims
            .iter()
            .map(|(c, n)| (c.to_string(), n.map(String::from)))
            .collect(),
    )
}

#[test]
fn volumes_that_hold_a_pod_back_hold_back_its_submission() {
    let w = workload(
        vec![with_volumes(
            pod("a"),
            blocked("persistentvolumeclaim \"data\" not found"),
        )],
        JobView::None,
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a WaitingForVolume"]);
    // In a gang, the others say whom they wait for.
    let w = workload(
        vec![with_volumes(pod("a"), blocked("x")), pod("b")],
        JobView::None,
        2,
    );
    let actions = decide(&w);
    assert_eq!(
        kinds(&actions),
        [
            "condition a WaitingForVolume",
            "condition b WaitingForGroup"
        ]
    );
    let Action::Condition { message, .. } = &actions[1] else {
        unreachable!()
    };
    assert!(message.contains("volumes of pod(s) a"), "{message}");
    // A job Slurm forgot is not submitted again either.
    let w = workload(
        vec![with_volumes(labelled("a", 3), blocked("x"))],
        JobView::Missing(3),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a WaitingForVolume"]);
    // Claims to provision do not hold back a submission: Slurm chooses their node.
    let w = workload(
        vec![with_volumes(pod("a"), provision(&[("data", None)]))],
        JobView::None,
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["submit a"]);
}

#[test]
fn claims_get_the_node_slurm_chose_then_the_pod_is_bound() {
    let running = || known(5, JobState::Running, &["n1", "n2"]);
    // The job started: the claims get the node, the pod waits for them.
    let w = workload(
        vec![with_volumes(
            labelled("a", 5),
            provision(&[("data", None), ("logs", None)]),
        )],
        running(),
        1,
    );
    assert_eq!(
        kinds(&decide(&w)),
        [
            "select a n1 data,logs",
            "condition a WaitingForVolumeBinding"
        ]
    );
    // Given: no second write, still waiting.
    let mut waiting = with_volumes(labelled("a", 5), provision(&[("data", Some("n1"))]));
    let actions = decide(&workload(vec![waiting.clone()], running(), 1));
    let Action::Condition {
        reason, message, ..
    } = &actions[0]
    else {
        unreachable!()
    };
    assert_eq!(reason, "WaitingForVolumeBinding");
    waiting.condition = Some(("False".into(), reason.clone(), message.clone()));
    waiting.condition_age = Some(30);
    assert!(decide(&workload(vec![waiting.clone()], running(), 1)).is_empty());
    // Bound: the pod is bound.
    let ready = with_volumes(labelled("a", 5), Gate::Ready);
    assert_eq!(
        kinds(&decide(&workload(vec![ready], running(), 1))),
        ["bind a n1"]
    );
    // Not bound in time: said once, and the job keeps its node.
    waiting.condition_age = Some(BIND_TIMEOUT_SECONDS);
    let actions = decide(&workload(vec![waiting.clone()], running(), 1));
    assert_eq!(kinds(&actions), ["condition a VolumeBindingTimeout"]);
    let Action::Condition {
        reason, message, ..
    } = &actions[0]
    else {
        unreachable!()
    };
    waiting.condition = Some(("False".into(), reason.clone(), message.clone()));
    waiting.condition_age = Some(0);
    assert!(decide(&workload(vec![waiting], running(), 1)).is_empty());
}

#[test]
fn a_claim_given_a_node_keeps_its_pod_there() {
    // b's claim is on n1 already: b goes there, a takes the other node.
    let w = workload(
        vec![
            labelled("a", 5),
            with_volumes(labelled("b", 5), provision(&[("data", Some("n1"))])),
        ],
        known(5, JobState::Running, &["n1", "n2"]),
        2,
    );
    assert_eq!(
        kinds(&decide(&w)),
        ["bind a n2", "condition b WaitingForVolumeBinding"]
    );
    // A node outside the allocation (the claim was given it after the submission): said so.
    let w = workload(
        vec![with_volumes(
            labelled("a", 5),
            provision(&[("data", Some("n3"))]),
        )],
        known(5, JobState::Running, &["n1"]),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a VolumeNodeConflict"]);
    // A claim deleted after the submission: the pod waits on its running job.
    let w = workload(
        vec![with_volumes(labelled("a", 5), blocked("gone"))],
        known(5, JobState::Running, &["n1"]),
        1,
    );
    assert_eq!(kinds(&decide(&w)), ["condition a WaitingForVolume"]);
}
