//! Table tests for the NodeSet plan.

use std::cmp::Ordering;
use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use slurm_client::model::{Node, NodeFlag, NodeState};

use super::plan::{
    AnnotationChange, DRAIN_REQUEUE, DeleteReason, Plan, PlanInput, PodToDelete, RESYNC, plan,
};
use super::victims::{Candidate, deletion_order};
use super::view::*;
use super::{Drain, Undrain};

const CORDON: &str = "nodeset.slinky.slurm.net/pod-cordon";
const DEADLINE: &str = "nodeset.slinky.slurm.net/pod-deadline";
const MARK: &str = "slurm-rs/cordoned-by-operator";

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn now() -> Timestamp {
    t(10_000)
}

pub(super) fn nodeset(replicas: u32) -> NodeSetView {
    NodeSetView {
        namespace: "slurm".into(),
        name: "gpu".into(),
        uid: "uid-gpu".into(),
        replicas,
        ordinal_padding: 0,
        min_ready_seconds: 0,
        update: UpdateStrategy::RollingUpdate {
            max_unavailable: MaxUnavailable::default(),
        },
        workload_disruption_protection: true,
        update_revision: "v2".into(),
        slurm_topology: true,
    }
}

fn pod(ordinal: u32) -> PodView {
    PodView {
        name: format!("gpu-{ordinal}"),
        ordinal: Some(ordinal),
        slurm_node: format!("gpu-{ordinal}"),
        phase: Some(PodPhase::Running),
        ready: true,
        ready_since: Some(t(0)),
        created: Some(t(0)),
        revision: "v2".into(),
        k8s_node: Some(format!("k{ordinal}")),
        ..PodView::default()
    }
}

fn node(name: &str, state: NodeState, flags: &[&str], reason: Option<&str>) -> Node {
    let mut n = Node::default();
    n.name = name.into();
    n.state = state;
    n.state_flags = flags.iter().map(|f| NodeFlag::parse(f)).collect();
    n.reason = reason.map(str::to_string);
    n
}

fn idle(name: &str) -> Node {
    node(name, NodeState::Idle, &[], None)
}

/// Drained and idle with an operator reason: a victim on it is deleted at once.
fn drained(name: &str) -> Node {
    node(name, NodeState::Idle, &["DRAIN"], Some("slurm-operator: x"))
}

fn map(nodes: Vec<Node>) -> HashMap<String, Node> {
    nodes.into_iter().map(|n| (n.name.clone(), n)).collect()
}

fn run(ns: &NodeSetView, pods: &[PodView], slurm: SlurmView<'_>) -> Plan {
    plan(&PlanInput {
        nodeset: ns,
        pods,
        slurm,
        deadlines: None,
        now: now(),
    })
}

fn deleted(plan: &Plan) -> Vec<(&str, DeleteReason)> {
    plan.delete
        .iter()
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

fn cordons(plan: &Plan) -> Vec<(&str, bool)> {
    plan.annotations
        .iter()
        .filter(|a| a.key == CORDON)
        .map(|a| (a.pod.as_str(), a.value.is_some()))
        .collect()
}

fn drains(plan: &Plan) -> Vec<(&str, &str)> {
    plan.drain
        .iter()
        .map(|d| (d.node.as_str(), d.reason.as_str()))
        .collect()
}

fn undrains(plan: &Plan) -> Vec<&str> {
    plan.undrain.iter().map(|u| u.node.as_str()).collect()
}

/// Nothing destructive: no delete, drain, undrain or cordon change.
fn assert_inert(plan: &Plan, what: &str) {
    assert!(plan.delete.is_empty(), "{what}: {:?}", plan.delete);
    assert!(plan.drain.is_empty(), "{what}: {:?}", plan.drain);
    assert!(plan.undrain.is_empty(), "{what}: {:?}", plan.undrain);
    assert!(cordons(plan).is_empty(), "{what}: {:?}", plan.annotations);
}

const SCALE_IN: &str = "slurm-operator: Pod (slurm/gpu-1) is pending termination for scale-in";

// ---- scale up, gaps, padding, terminating pods -------------------------------------------

#[test]
fn scale_up_fills_lowest_free_ordinals() {
    // (replicas, padding, existing ordinals (terminating marked), expected new names)
    type Case = (u32, u32, &'static [(u32, bool)], &'static [&'static str]);
    let cases: &[Case] = &[
        (3, 0, &[], &["gpu-0", "gpu-1", "gpu-2"]),
        (2, 3, &[], &["gpu-000", "gpu-001"]),
        (
            5,
            0,
            &[(0, false), (2, false), (4, false)],
            &["gpu-1", "gpu-3"],
        ),
        (2, 0, &[(0, true), (1, false)], &[]),
        (3, 0, &[(0, true), (1, false)], &["gpu-2"]),
        (1, 0, &[(3, false)], &[]),
    ];
    let nodes = map(vec![]);
    for (replicas, padding, existing, want) in cases {
        let mut ns = nodeset(*replicas);
        ns.ordinal_padding = *padding;
        let pods: Vec<PodView> = existing
            .iter()
            .map(|(o, deleting)| PodView {
                deleting: *deleting,
                ..pod(*o)
            })
            .collect();
        let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
        let names: Vec<&str> = p.create.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, *want, "replicas {replicas} existing {existing:?}");
    }
}

// ---- victim order -------------------------------------------------------------------------

#[test]
fn deletion_order_table() {
    let base = pod(1);
    let unassigned = PodView {
        k8s_node: None,
        ..base.clone()
    };
    let pending = PodView {
        phase: Some(PodPhase::Pending),
        ..base.clone()
    };
    let unknown = PodView {
        phase: Some(PodPhase::Unknown),
        ..base.clone()
    };
    let not_ready = PodView {
        ready: false,
        ..base.clone()
    };
    let cheap = PodView {
        deletion_cost: -5,
        ..base.clone()
    };
    let dear = PodView {
        deletion_cost: 5,
        ..base.clone()
    };
    let early = PodView {
        deadline: Some(t(100)),
        ..base.clone()
    };
    let late = PodView {
        deadline: Some(t(200)),
        ..base.clone()
    };
    let cordoned = PodView {
        cordoned: true,
        ..base.clone()
    };
    let cordoned_late = PodView {
        cordoned: true,
        deadline: Some(t(200)),
        ..base.clone()
    };
    let high = PodView {
        ordinal: Some(7),
        ..base.clone()
    };
    let recently_ready = PodView {
        ready_since: Some(t(50)),
        ..base.clone()
    };
    let newer = PodView {
        created: Some(t(50)),
        ..base.clone()
    };
    let other_node = PodView {
        k8s_node: Some("elsewhere".into()),
        ordinal: Some(0),
        ..base.clone()
    };
    // (first, second, why): `first` goes before `second`.
    let cases: Vec<(&PodView, &PodView, &str)> = vec![
        (&unassigned, &base, "unassigned first"),
        (&pending, &unknown, "pending before unknown"),
        (&unknown, &base, "unknown before running"),
        (&not_ready, &base, "not ready first"),
        (&cheap, &base, "lower cost"),
        (&base, &dear, "lower cost (default 0)"),
        (&base, &early, "no deadline before any deadline"),
        (&early, &late, "earlier deadline"),
        (&cordoned, &base, "cordoned first"),
        (&high, &base, "higher ordinal"),
        (&recently_ready, &base, "more recently ready"),
        (&newer, &base, "newer"),
        (
            &base,
            &other_node,
            "different nodes: fall through to ordinal",
        ),
        // earlier criteria dominate later ones
        (&unassigned, &not_ready, "assignment over readiness"),
        (&not_ready, &cheap, "readiness over cost"),
        (&late, &dear, "cost over deadline (dear has none)"),
        (&early, &cordoned_late, "deadline over cordon"),
        (&cordoned, &high, "cordon over ordinal"),
        (&high, &newer, "ordinal over age"),
    ];
    for (a, b, why) in cases {
        let (ca, cb) = (Candidate::of(a), Candidate::of(b));
        assert_eq!(deletion_order(&ca, &cb), Ordering::Less, "{why}");
        assert_eq!(
            deletion_order(&cb, &ca),
            Ordering::Greater,
            "{why} (reversed)"
        );
    }
    let no_ready_time = PodView {
        ready_since: None,
        ..base.clone()
    };
    assert_eq!(
        deletion_order(
            &Candidate::of(&no_ready_time),
            &Candidate::of(&recently_ready)
        ),
        Ordering::Less,
        "unknown ready time counts as most recent"
    );
    let c = Candidate::of(&base);
    assert_eq!(deletion_order(&c, &c), Ordering::Equal);
}

#[test]
fn scale_in_picks_victims_in_order() {
    let ns = nodeset(2);
    let mut pods: Vec<PodView> = (0..4).map(pod).collect();
    pods[0].deletion_cost = -1; // cheapest
    pods[3].deletion_cost = 10; // dearest: highest ordinal no longer wins
    let nodes = map((0..4).map(|i| drained(&format!("gpu-{i}"))).collect());
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(
        deleted(&p),
        vec![
            ("gpu-0", DeleteReason::ScaleIn),
            ("gpu-2", DeleteReason::ScaleIn)
        ]
    );
    assert!(p.create.is_empty());
}

#[test]
fn terminating_pods_make_up_part_of_the_excess() {
    let ns = nodeset(2);
    let mut pods: Vec<PodView> = (0..4).map(pod).collect();
    pods[0].deleting = true;
    let nodes = map((0..4).map(|i| drained(&format!("gpu-{i}"))).collect());
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(deleted(&p), vec![("gpu-3", DeleteReason::ScaleIn)]);
}

// ---- drain before delete -------------------------------------------------------------------

#[test]
fn drain_before_delete_table() {
    // Two pods, one replica: gpu-1 is the victim. (victim's Slurm node, want deleted, want
    // cordon annotation set, want drain reason, why)
    let ours = Some(SCALE_IN);
    type Case = (Option<Node>, bool, bool, Option<&'static str>, &'static str);
    let cases: Vec<Case> = vec![
        (
            Some(idle("gpu-1")),
            false,
            true,
            Some(SCALE_IN),
            "idle, undrained: drain first",
        ),
        (
            Some(node("gpu-1", NodeState::Allocated, &[], None)),
            false,
            true,
            Some(SCALE_IN),
            "busy, undrained: drain first",
        ),
        (
            Some(node("gpu-1", NodeState::Mixed, &["DRAIN"], ours)),
            false,
            true,
            None,
            "draining but busy: keep, drain already in place",
        ),
        (
            Some(node(
                "gpu-1",
                NodeState::Idle,
                &["COMPLETING", "DRAIN"],
                ours,
            )),
            false,
            true,
            None,
            "completing: still busy",
        ),
        (
            Some(node("gpu-1", NodeState::Idle, &["DRAIN"], ours)),
            true,
            false,
            None,
            "drained and idle: delete",
        ),
        (
            Some(node(
                "gpu-1",
                NodeState::Down,
                &["DRAIN"],
                Some("Not responding"),
            )),
            true,
            false,
            None,
            "down and drained: nothing runs, delete",
        ),
        (
            Some(node("gpu-1", NodeState::Idle, &["DRAIN", "UNDRAIN"], ours)),
            false,
            true,
            Some(SCALE_IN),
            "undrain pending: not drained, drain again",
        ),
        (
            Some(node(
                "gpu-1",
                NodeState::Idle,
                &["DRAIN"],
                Some("slurm-operator: Pod (slurm/gpu-1) was cordoned"),
            )),
            true,
            false,
            None,
            "drained by a pod cordon: delete",
        ),
        (
            Some(node(
                "gpu-1",
                NodeState::Mixed,
                &["DRAIN"],
                Some("slurm-operator: Pod (slurm/gpu-1) was cordoned"),
            )),
            false,
            true,
            Some(SCALE_IN),
            "our other reason is replaced by the scale-in reason",
        ),
        (None, true, false, None, "not registered: delete"),
    ];
    for (victim_node, want_delete, want_cordon, want_drain, why) in cases {
        let ns = nodeset(1);
        let pods = vec![pod(0), pod(1)];
        let nodes = map([Some(idle("gpu-0")), victim_node]
            .into_iter()
            .flatten()
            .collect());
        let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
        let want_deleted = if want_delete {
            vec![("gpu-1", DeleteReason::ScaleIn)]
        } else {
            vec![]
        };
        assert_eq!(deleted(&p), want_deleted, "{why}");
        let want_cordons = if want_cordon {
            vec![("gpu-1", true)]
        } else {
            vec![]
        };
        assert_eq!(cordons(&p), want_cordons, "{why}");
        let want_drains: Vec<(&str, &str)> = want_drain.map(|r| ("gpu-1", r)).into_iter().collect();
        assert_eq!(drains(&p), want_drains, "{why}");
        assert_eq!(p.waiting_for_drain.is_empty(), want_delete, "{why}");
        assert!(p.undrain.is_empty(), "{why}");
        // A drain is waited for; a delete wakes the NodeSet by itself (the pod's watch event).
        let requeue = if want_delete { RESYNC } else { DRAIN_REQUEUE };
        assert_eq!(p.requeue_after, requeue, "{why}");
    }
}

#[test]
fn already_cordoned_victim_is_not_annotated_again() {
    let ns = nodeset(1);
    let mut pods = vec![pod(0), pod(1)];
    pods[1].cordoned = true;
    let nodes = map(vec![idle("gpu-0"), idle("gpu-1")]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert!(cordons(&p).is_empty());
    assert_eq!(drains(&p), vec![("gpu-1", SCALE_IN)]);
}

#[test]
fn admin_drain_survives_scale_in_planning() {
    let ns = nodeset(1);
    let pods = vec![pod(0), pod(1)];
    // Drained by an admin and still busy: wait; the admin's reason is not overwritten.
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Allocated, &["DRAIN"], Some("bad disk")),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert!(p.delete.is_empty() && p.drain.is_empty() && p.undrain.is_empty());
    assert_eq!(p.waiting_for_drain, vec!["gpu-1"]);
    // Down with an admin reason, no drain: drained keeping the admin's reason.
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Down, &[], Some("bad disk")),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(drains(&p), vec![("gpu-1", "bad disk")]);
    // Admin drain, idle: the pod can go; the drain stays (nothing undrains it).
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Idle, &["DRAIN"], Some("bad disk")),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(deleted(&p), vec![("gpu-1", DeleteReason::ScaleIn)]);
    assert!(p.undrain.is_empty());
}

#[test]
fn scale_in_fails_closed() {
    let ns = nodeset(1);
    let pods = vec![pod(0), pod(1)];
    let p = run(&ns, &pods, SlurmView::Unavailable);
    assert_inert(&p, "scale-in, Slurm unavailable");
    assert_eq!(p.held, vec!["gpu-1"]);
    assert!(p.protect.is_empty() && p.conditions.is_empty());
    assert_eq!(p.status.slurm, None);
}

#[test]
fn without_slurm_scale_in_deletes_at_once() {
    let ns = nodeset(1);
    let pods = vec![pod(0), pod(1)];
    let p = run(&ns, &pods, SlurmView::NotConfigured);
    assert_eq!(deleted(&p), vec![("gpu-1", DeleteReason::ScaleIn)]);
    assert!(p.drain.is_empty() && p.undrain.is_empty() && p.protect.is_empty());
    assert!(p.conditions.iter().all(|c| c.conditions.is_empty()));
    assert_eq!(p.conditions.len(), 2);
    assert_eq!(p.status.slurm, Some(Default::default()));
}

#[test]
fn scale_to_zero_and_back() {
    let pods = vec![pod(0), pod(1)];
    // Busy nodes: both drained, none deleted.
    let busy = map(vec![
        node("gpu-0", NodeState::Mixed, &[], None),
        node("gpu-1", NodeState::Allocated, &[], None),
    ]);
    let p = run(&nodeset(0), &pods, SlurmView::Nodes(&busy));
    assert!(p.delete.is_empty());
    assert_eq!(cordons(&p), vec![("gpu-1", true), ("gpu-0", true)]);
    assert_eq!(p.drain.len(), 2);
    // Drained and idle: both deleted.
    let drained_pods: Vec<PodView> = pods
        .iter()
        .map(|p| PodView {
            cordoned: true,
            ..p.clone()
        })
        .collect();
    let drained = map(vec![
        node(
            "gpu-0",
            NodeState::Idle,
            &["DRAIN"],
            Some("slurm-operator: x"),
        ),
        node(
            "gpu-1",
            NodeState::Idle,
            &["DRAIN"],
            Some("slurm-operator: y"),
        ),
    ]);
    let p = run(&nodeset(0), &drained_pods, SlurmView::Nodes(&drained));
    assert_eq!(
        deleted(&p),
        vec![
            ("gpu-1", DeleteReason::ScaleIn),
            ("gpu-0", DeleteReason::ScaleIn)
        ]
    );
    // Back to 2 while they terminate: no create (names still taken), nothing touched.
    let terminating: Vec<PodView> = drained_pods
        .iter()
        .map(|p| PodView {
            deleting: true,
            ..p.clone()
        })
        .collect();
    let p = run(&nodeset(2), &terminating, SlurmView::Nodes(&drained));
    assert!(p.create.is_empty());
    assert_inert(&p, "terminating pods");
    assert!(p.conditions.is_empty() && p.protect.is_empty());
    // Once gone: created again at 0 and 1.
    let p = run(&nodeset(2), &[], SlurmView::Nodes(&drained));
    let names: Vec<&str> = p.create.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["gpu-0", "gpu-1"]);
}

#[test]
fn aborted_scale_in_is_undone() {
    // gpu-1 was condemned (cordoned, drained for scale-in); replicas went back to 2.
    let ns = nodeset(2);
    let mut pods = vec![pod(0), pod(1)];
    pods[1].cordoned = true;
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Mixed, &["DRAIN"], Some(SCALE_IN)),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(cordons(&p), vec![("gpu-1", false)]);
    assert_eq!(undrains(&p), vec!["gpu-1"]);
    assert_eq!(
        p.undrain[0].reason,
        "slurm-operator: Pod (slurm/gpu-1) was uncordoned"
    );
    assert!(p.delete.is_empty() && p.drain.is_empty());
}

/// Issue 27's scale-in: 2 → 1 right after a job started. The first pass condemned the busy
/// pod (no deadline known yet) and cordoned it, but its drain was not sent (the node had
/// changed since the plan). Once the deadline is known the idle pod goes instead, and the busy
/// one, staying, gets the operator's cordon lifted, not an administrator's drain.
#[test]
fn a_pod_condemned_then_kept_loses_the_operators_cordon() {
    let ns = nodeset(1);
    let first = run(
        &ns,
        &[pod(0), pod(1)],
        SlurmView::Nodes(&map(vec![
            idle("gpu-0"),
            node("gpu-1", NodeState::Allocated, &[], None),
        ])),
    );
    assert_eq!(cordons(&first), vec![("gpu-1", true)]);
    assert!(
        first
            .annotations
            .iter()
            .any(|a| a.pod == "gpu-1" && a.key == MARK && a.value.as_deref() == Some("true")),
        "the operator's cordon carries its mark: {:?}",
        first.annotations
    );

    let busy = PodView {
        cordoned: true,
        cordoned_by_operator: true,
        deadline: Some(t(20_000)),
        ..pod(1)
    };
    let second = run(
        &ns,
        &[pod(0), busy],
        SlurmView::Nodes(&map(vec![
            idle("gpu-0"),
            node("gpu-1", NodeState::Allocated, &[], None),
        ])),
    );
    assert_eq!(cordons(&second), vec![("gpu-0", true), ("gpu-1", false)]);
    assert_eq!(
        drains(&second),
        vec![(
            "gpu-0",
            "slurm-operator: Pod (slurm/gpu-0) is pending termination for scale-in"
        )]
    );
    assert!(second.undrain.is_empty() && second.delete.is_empty());
}

// ---- cordon sync ---------------------------------------------------------------------------

#[test]
fn cordon_sync_table() {
    let ours_cordoned = "slurm-operator: Pod (slurm/gpu-0) was cordoned";
    let node_default = "slurm-operator: Node (k0) was cordoned, Pod (slurm/gpu-0) must be cordoned";
    struct Case {
        why: &'static str,
        pod: PodView,
        node: Option<Node>,
        cordon: Option<bool>,
        drain: Option<&'static str>,
        undrain: bool,
    }
    let p0 = pod(0);
    let unsched = PodView {
        k8s_node_unschedulable: true,
        ..p0.clone()
    };
    let cordoned = PodView {
        cordoned: true,
        ..p0.clone()
    };
    let cases = vec![
        Case {
            why: "k8s node cordoned: cordon pod, drain with default reason",
            pod: unsched.clone(),
            node: Some(idle("gpu-0")),
            cordon: Some(true),
            drain: Some(node_default),
            undrain: false,
        },
        Case {
            why: "k8s node cordoned with reason annotation (sanitised)",
            pod: PodView {
                k8s_node_cordon_reason: Some(" GPU\tXID 79\n".into()),
                ..unsched.clone()
            },
            node: Some(idle("gpu-0")),
            cordon: Some(true),
            drain: Some("slurm-operator: GPU XID 79"),
            undrain: false,
        },
        Case {
            why: "empty reason annotation gives 'unknown'",
            pod: PodView {
                k8s_node_cordon_reason: Some("\n".into()),
                ..unsched.clone()
            },
            node: Some(idle("gpu-0")),
            cordon: Some(true),
            drain: Some("slurm-operator: unknown"),
            undrain: false,
        },
        Case {
            why: "propagated node conditions",
            pod: PodView {
                k8s_node_problems: vec![
                    NodeProblem {
                        reason: "BadCPU".into(),
                        message: "MCE".into(),
                    },
                    NodeProblem {
                        reason: "GpuCount".into(),
                        message: "3 of 4".into(),
                    },
                ],
                ..unsched.clone()
            },
            node: Some(idle("gpu-0")),
            cordon: Some(true),
            drain: Some("slurm-operator: (BadCPU: MCE); (GpuCount: 3 of 4)"),
            undrain: false,
        },
        Case {
            why: "k8s node cordoned, pod already cordoned and drained by us: nothing",
            pod: PodView {
                cordoned: true,
                ..unsched.clone()
            },
            node: Some(node(
                "gpu-0",
                NodeState::Idle,
                &["DRAIN"],
                Some(node_default),
            )),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "k8s node cordoned, our earlier reason kept",
            pod: unsched.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Idle,
                &["DRAIN"],
                Some(ours_cordoned),
            )),
            cordon: Some(true),
            drain: None,
            undrain: false,
        },
        Case {
            why: "pod cordoned: drain",
            pod: cordoned.clone(),
            node: Some(idle("gpu-0")),
            cordon: None,
            drain: Some(ours_cordoned),
            undrain: false,
        },
        Case {
            why: "pod cordoned by the operator (condemned, its drain not sent, then kept): lifted, not drained",
            pod: PodView {
                cordoned_by_operator: true,
                ..cordoned.clone()
            },
            node: Some(node("gpu-0", NodeState::Allocated, &[], None)),
            cordon: Some(false),
            drain: None,
            undrain: false,
        },
        Case {
            why: "pod cordoned by the operator and drained 'was cordoned' (the old bug's state): lifted and undrained",
            pod: PodView {
                cordoned_by_operator: true,
                ..cordoned.clone()
            },
            node: Some(node(
                "gpu-0",
                NodeState::Mixed,
                &["DRAIN"],
                Some(ours_cordoned),
            )),
            cordon: Some(false),
            drain: None,
            undrain: true,
        },
        Case {
            why: "the operator's mark left after an administrator removed pod-cordon: mark removed",
            pod: PodView {
                cordoned_by_operator: true,
                ..p0.clone()
            },
            node: Some(idle("gpu-0")),
            cordon: Some(false),
            drain: None,
            undrain: false,
        },
        Case {
            why: "pod cordoned, drain in place: nothing",
            pod: cordoned.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Mixed,
                &["DRAIN"],
                Some(ours_cordoned),
            )),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "k8s node uncordoned again: our node-cordon is undone",
            pod: cordoned.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Idle,
                &["DRAIN"],
                Some(node_default),
            )),
            cordon: Some(false),
            drain: None,
            undrain: true,
        },
        Case {
            why: "uncordoned pod, our drain: undrain",
            pod: p0.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Idle,
                &["DRAIN"],
                Some(ours_cordoned),
            )),
            cordon: None,
            drain: None,
            undrain: true,
        },
        Case {
            why: "uncordoned pod, not drained: nothing",
            pod: p0.clone(),
            node: Some(idle("gpu-0")),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "admin drain is never lifted",
            pod: p0.clone(),
            node: Some(node("gpu-0", NodeState::Idle, &["DRAIN"], Some("bad disk"))),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "admin drain: cordoned pod changes nothing",
            pod: cordoned.clone(),
            node: Some(node("gpu-0", NodeState::Idle, &["DRAIN"], Some("bad disk"))),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "admin drain: cordoned k8s node changes nothing",
            pod: unsched.clone(),
            node: Some(node("gpu-0", NodeState::Idle, &["DRAIN"], Some("bad disk"))),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "down, not responding: left alone",
            pod: p0.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Down,
                &["DRAIN", "NOT_RESPONDING"],
                Some("slurm-operator: x"),
            )),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "down with our reason (the old pod's preStop), answering, pod healthy: resumed",
            pod: p0.clone(),
            node: Some(node(
                "gpu-0",
                NodeState::Down,
                &["DRAIN"],
                Some(ours_cordoned),
            )),
            cordon: None,
            drain: None,
            undrain: true,
        },
        Case {
            why: "down with an admin's reason: left alone",
            pod: p0.clone(),
            node: Some(node("gpu-0", NodeState::Down, &[], Some("admin: psu"))),
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "not registered: nothing",
            pod: unsched.clone(),
            node: None,
            cordon: None,
            drain: None,
            undrain: false,
        },
        Case {
            why: "unassigned pod: nothing",
            pod: PodView {
                k8s_node: None,
                ready: false,
                phase: Some(PodPhase::Pending),
                ..cordoned.clone()
            },
            node: Some(idle("gpu-0")),
            cordon: None,
            drain: None,
            undrain: false,
        },
    ];
    for c in cases {
        let pods = vec![c.pod.clone()];
        let nodes = map(c.node.clone().into_iter().collect());
        let p = run(&nodeset(1), &pods, SlurmView::Nodes(&nodes));
        let want_cordon: Vec<(&str, bool)> = c.cordon.map(|v| ("gpu-0", v)).into_iter().collect();
        assert_eq!(cordons(&p), want_cordon, "{}", c.why);
        let want_drain: Vec<(&str, &str)> = c.drain.map(|r| ("gpu-0", r)).into_iter().collect();
        assert_eq!(drains(&p), want_drain, "{}", c.why);
        assert_eq!(!p.undrain.is_empty(), c.undrain, "{}", c.why);
        if c.node.is_some() {
            assert!(p.delete.is_empty(), "{}", c.why);
        }
        // The same pod with Slurm unavailable: nothing at all.
        let p = run(&nodeset(1), &pods, SlurmView::Unavailable);
        assert_inert(&p, c.why);
        // Terminating: nothing either.
        let terminating = vec![PodView {
            deleting: true,
            ..c.pod.clone()
        }];
        let p = run(&nodeset(1), &terminating, SlurmView::Nodes(&nodes));
        assert_inert(&p, c.why);
    }
}

// ---- rolling update ------------------------------------------------------------------------

fn old(ordinal: u32) -> PodView {
    PodView {
        revision: "v1".into(),
        ..pod(ordinal)
    }
}

#[test]
fn rolling_update_table() {
    struct Case {
        why: &'static str,
        max: MaxUnavailable,
        pods: Vec<PodView>,
        /// Pods condemned (drain requested, since every node is idle and undrained).
        want: Vec<&'static str>,
    }
    let not_ready = |p: PodView| PodView { ready: false, ..p };
    let deleting = |p: PodView| PodView {
        deleting: true,
        ..p
    };
    let cordoned = |p: PodView| PodView {
        cordoned: true,
        ..p
    };
    let cases = vec![
        Case {
            why: "25% of 4 = 1: highest ordinal first",
            max: MaxUnavailable::Percent(25),
            pods: (0..4).map(old).collect(),
            want: vec!["gpu-3"],
        },
        Case {
            why: "25% of 5 rounds up to 2",
            max: MaxUnavailable::Percent(25),
            pods: (0..5).map(old).collect(),
            want: vec!["gpu-4", "gpu-3"],
        },
        Case {
            why: "count 2",
            max: MaxUnavailable::Count(2),
            pods: (0..4).map(old).collect(),
            want: vec!["gpu-3", "gpu-2"],
        },
        Case {
            why: "unhealthy old pods go regardless of the budget, first",
            max: MaxUnavailable::Count(1),
            pods: vec![not_ready(old(0)), not_ready(old(1)), old(2), old(3)],
            want: vec!["gpu-0", "gpu-1", "gpu-3"],
        },
        Case {
            why: "an unavailable new pod uses the budget",
            max: MaxUnavailable::Count(1),
            pods: vec![not_ready(pod(0)), old(1), old(2), old(3)],
            want: vec![],
        },
        Case {
            why: "a terminating pod leaves an empty slot that uses the budget",
            max: MaxUnavailable::Count(1),
            pods: vec![deleting(old(0)), old(1), old(2), old(3)],
            want: vec![],
        },
        Case {
            why: "the pod already draining is chosen again, no other",
            max: MaxUnavailable::Count(1),
            pods: vec![old(0), cordoned(old(1)), old(2), old(3)],
            want: vec!["gpu-1"],
        },
        Case {
            why: "all updated: nothing",
            max: MaxUnavailable::Count(1),
            pods: (0..4).map(pod).collect(),
            want: vec![],
        },
    ];
    for c in cases {
        let mut ns = nodeset(4);
        if c.pods.len() == 5 {
            ns.replicas = 5;
        }
        ns.update = UpdateStrategy::RollingUpdate {
            max_unavailable: c.max,
        };
        let nodes = map((0..5).map(|i| idle(&format!("gpu-{i}"))).collect());
        let p = run(&ns, &c.pods, SlurmView::Nodes(&nodes));
        let mut want = c.want.clone();
        want.sort();
        let mut got: Vec<&str> = p.waiting_for_drain.iter().map(String::as_str).collect();
        got.sort();
        assert_eq!(got, want, "{}", c.why);
        assert!(p.delete.is_empty(), "{}", c.why);
        assert!(p.create.is_empty(), "{}", c.why);
        let mut drained: Vec<&str> = drains(&p).into_iter().map(|(n, _)| n).collect();
        drained.sort();
        let want_drained: Vec<&str> = want
            .iter()
            .copied()
            .filter(|n| !c.pods.iter().any(|p| p.name == *n && p.cordoned))
            .collect();
        assert!(
            want_drained.iter().all(|n| drained.contains(n)),
            "{}: {drained:?}",
            c.why
        );

        // Slurm unavailable: nothing destructive, victims held.
        let p = run(&ns, &c.pods, SlurmView::Unavailable);
        assert_inert(&p, c.why);
        let mut held: Vec<&str> = p.held.iter().map(String::as_str).collect();
        held.sort();
        assert_eq!(held, want, "{} (held)", c.why);

        // OnDelete: nothing.
        ns.update = UpdateStrategy::OnDelete;
        let p = run(&ns, &c.pods, SlurmView::Nodes(&nodes));
        assert!(
            p.waiting_for_drain.is_empty() && p.delete.is_empty(),
            "{}",
            c.why
        );
    }
}

#[test]
fn rolling_update_waits_for_the_new_pods_slurm_node() {
    // gpu-0 is new and ready in Kubernetes for 5 s (within the registration grace); gpu-1 is
    // old. One unavailable pod at a time.
    let mut ns = nodeset(2);
    ns.update = UpdateStrategy::RollingUpdate {
        max_unavailable: MaxUnavailable::Count(1),
    };
    let fresh = PodView {
        ready_since: Some(now() - SignedDuration::from_secs(5)),
        ..pod(0)
    };
    let pods = vec![fresh, old(1)];
    const PRESTOP: &str = "slurm-operator: Pod is terminating";
    let cases: Vec<(&str, Option<Node>, Vec<&str>)> = vec![
        (
            "registered and idle: the old pod goes",
            Some(idle("gpu-0")),
            vec!["gpu-1"],
        ),
        ("not registered yet: wait", None, vec![]),
        (
            "registered, still drained by the preStop hook of the pod it replaced: wait",
            Some(node("gpu-0", NodeState::Idle, &["DRAIN"], Some(PRESTOP))),
            vec![],
        ),
        (
            "still down from the preStop hook: wait",
            Some(node("gpu-0", NodeState::Down, &[], Some(PRESTOP))),
            vec![],
        ),
        (
            "not responding: wait",
            Some(node("gpu-0", NodeState::Idle, &["NOT_RESPONDING"], None)),
            vec![],
        ),
        (
            "an administrator's drain does not hold the rollout",
            Some(node("gpu-0", NodeState::Idle, &["DRAIN"], Some("bad DIMM"))),
            vec!["gpu-1"],
        ),
        (
            "busy: it takes jobs",
            Some(node("gpu-0", NodeState::Allocated, &[], None)),
            vec!["gpu-1"],
        ),
    ];
    for (why, gpu0, want) in cases {
        let mut nodes = map(vec![idle("gpu-1")]);
        nodes.extend(gpu0.map(|n| (n.name.clone(), n)));
        let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
        assert_eq!(p.waiting_for_drain, want, "{why}");
        assert!(p.delete.is_empty(), "{why}: {:?}", p.delete);
    }
    // Without a RestApi the rollout goes by Kubernetes alone.
    let p = run(&ns, &pods, SlurmView::NotConfigured);
    assert_eq!(deleted(&p), vec![("gpu-1", DeleteReason::Update)]);
}

#[test]
fn condemned_pod_stays_the_victim_across_passes() {
    // gpu-1 was picked in an earlier pass: cordoned, drained for scale-in, still busy.
    let mut ns = nodeset(4);
    ns.update = UpdateStrategy::RollingUpdate {
        max_unavailable: MaxUnavailable::Count(1),
    };
    let pods = vec![
        old(0),
        PodView {
            cordoned: true,
            ..old(1)
        },
        old(2),
        old(3),
    ];
    let mut nodes = map((0..4).map(|i| idle(&format!("gpu-{i}"))).collect());
    nodes.insert(
        "gpu-1".into(),
        node("gpu-1", NodeState::Mixed, &["DRAIN"], Some(SCALE_IN)),
    );
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(p.waiting_for_drain, vec!["gpu-1"]);
    assert_inert(&p, "second pass of a rolling update");
    // The same for scale-in.
    let mut pods: Vec<PodView> = (0..4).map(pod).collect();
    pods[1].cordoned = true;
    let p = run(&nodeset(3), &pods, SlurmView::Nodes(&nodes));
    assert_eq!(p.waiting_for_drain, vec!["gpu-1"]);
    assert_inert(&p, "second pass of a scale-in");
}

#[test]
fn a_victim_that_no_longer_comes_first_is_released_before_another_is_drained() {
    // The lifecycle test's rollout, pass 1 saw gpu-1's job before its deadline: both pods
    // without one, gpu-1 (higher ordinal) was cordoned and drained. Pass 2 knows the deadline:
    // gpu-0 (no job) now comes first, but gpu-1 still takes no jobs.
    let mut ns = nodeset(2);
    ns.update = UpdateStrategy::RollingUpdate {
        max_unavailable: MaxUnavailable::Count(1),
    };
    let pods = vec![
        old(0),
        PodView {
            cordoned: true,
            cordoned_by_operator: true,
            ..old(1)
        },
    ];
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Mixed, &["DRAIN"], Some(SCALE_IN)),
    ]);
    let deadlines: HashMap<String, Timestamp> = [("gpu-1".to_string(), t(900))].into();
    let pass = |pods: &[PodView], nodes: &HashMap<String, Node>| {
        plan(&PlanInput {
            nodeset: &ns,
            pods,
            slurm: SlurmView::Nodes(nodes),
            deadlines: Some(&deadlines),
            now: now(),
        })
    };
    let p = pass(&pods, &nodes);
    assert!(p.waiting_for_drain.is_empty(), "{:?}", p.waiting_for_drain);
    assert!(
        drains(&p).is_empty(),
        "a second node drained: {:?}",
        p.drain
    );
    assert_eq!(
        p.undrain
            .iter()
            .map(|u| u.node.as_str())
            .collect::<Vec<_>>(),
        vec!["gpu-1"]
    );
    assert!(
        p.annotations
            .iter()
            .any(|a| a.pod == "gpu-1" && a.key == CORDON && a.value.is_none()),
        "gpu-1 keeps its cordon: {:?}",
        p.annotations
    );
    // Once the drain is lifted, gpu-0 goes.
    let pods = vec![old(0), old(1)];
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Mixed, &[], None),
    ]);
    assert_eq!(pass(&pods, &nodes).waiting_for_drain, vec!["gpu-0"]);
}

#[test]
fn rolling_update_deletes_drained_old_pod() {
    let mut ns = nodeset(2);
    ns.update = UpdateStrategy::RollingUpdate {
        max_unavailable: MaxUnavailable::Count(1),
    };
    let pods = vec![
        pod(0),
        PodView {
            cordoned: true,
            ..old(1)
        },
    ];
    let nodes = map(vec![
        idle("gpu-0"),
        node("gpu-1", NodeState::Idle, &["DRAIN"], Some(SCALE_IN)),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(deleted(&p), vec![("gpu-1", DeleteReason::Update)]);
}

#[test]
fn max_unavailable_parse_and_scale() {
    let cases: &[(&str, u32, u32)] = &[
        ("25%", 4, 1),
        ("25%", 5, 2),
        ("25%", 1, 1),
        ("25%", 0, 1),
        ("100%", 3, 3),
        ("2", 10, 2),
        ("0", 10, 1),
        ("0%", 10, 1),
    ];
    for (text, total, want) in cases {
        let m = MaxUnavailable::parse(text).unwrap();
        assert_eq!(m.scaled(*total), *want, "{text} of {total}");
    }
    assert_eq!(MaxUnavailable::parse("x%"), None);
    assert_eq!(MaxUnavailable::parse("-1"), None);
}

// ---- terminal, unregistered, other scaling mode ------------------------------------------

#[test]
fn steady_state_deletions() {
    let ns = nodeset(3);
    let mut pods = vec![pod(0), pod(1), pod(2)];
    pods[0].phase = Some(PodPhase::Failed);
    pods[0].ready = false;
    pods[1].phase = Some(PodPhase::Succeeded);
    pods[1].ready = false;
    // gpu-2 is healthy and available but its slurmd never registered.
    let nodes = map(vec![idle("gpu-0")]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(
        deleted(&p),
        vec![
            ("gpu-0", DeleteReason::Terminal),
            ("gpu-1", DeleteReason::Terminal),
            ("gpu-2", DeleteReason::NotRegistered),
        ]
    );
    // Not registered but not yet available (minReadySeconds): kept.
    let mut ns_slow = nodeset(1);
    ns_slow.min_ready_seconds = 60;
    let fresh = vec![PodView {
        ready_since: Some(now() - SignedDuration::from_secs(10)),
        ..pod(0)
    }];
    let p = run(&ns_slow, &fresh, SlurmView::Nodes(&nodes));
    assert!(p.delete.is_empty());
    // Ready 10 s, not registered: kept, and looked at again before the grace runs out (no
    // event would wake the NodeSet then).
    let registering = vec![
        pod(0),
        pod(1),
        PodView {
            ready_since: Some(now() - SignedDuration::from_secs(10)),
            ..pod(2)
        },
    ];
    let both = map(vec![idle("gpu-0"), idle("gpu-1")]);
    let p = run(&nodeset(3), &registering, SlurmView::Nodes(&both));
    assert!(p.delete.is_empty());
    assert_eq!(p.requeue_after, DRAIN_REQUEUE);
    let registered = map(vec![idle("gpu-0"), idle("gpu-1"), idle("gpu-2")]);
    let p = run(&nodeset(3), &registering, SlurmView::Nodes(&registered));
    assert_eq!(p.requeue_after, RESYNC);
    // Not registered, Slurm unavailable or not configured: kept.
    for slurm in [SlurmView::Unavailable, SlurmView::NotConfigured] {
        let p = run(&nodeset(1), &[pod(2)], slurm);
        assert!(p.delete.is_empty());
    }
}

#[test]
fn other_scaling_mode_pods_are_replaced_then_condemned() {
    let ns = nodeset(2);
    let leftover = |o| PodView {
        wrong_scaling_mode: true,
        ..pod(o)
    };
    let nodes = map(vec![idle("gpu-0"), idle("gpu-1"), idle("gpu-5")]);
    // Not counted: replacements first.
    let pods = vec![leftover(0), leftover(1)];
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    let names: Vec<&str> = p.create.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["gpu-2", "gpu-3"]);
    assert!(p.waiting_for_drain.is_empty());
    // At the right size: drained, then deleted.
    let pods = vec![pod(2), pod(3), leftover(5)];
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert_eq!(p.waiting_for_drain, vec!["gpu-5"]);
    let drained = map(vec![node(
        "gpu-5",
        NodeState::Idle,
        &["DRAIN"],
        Some(SCALE_IN),
    )]);
    let p = run(&ns, &pods, SlurmView::Nodes(&drained));
    assert!(deleted(&p).contains(&("gpu-5", DeleteReason::ScalingMode)));
}

// ---- pod-protect, conditions, deadlines, status ------------------------------------------

#[test]
fn protect_label_table() {
    // (wdp, node state, flags, currently protected) -> change
    type Case = (bool, NodeState, &'static [&'static str], bool, Option<bool>);
    let cases: &[Case] = &[
        (true, NodeState::Allocated, &[], false, Some(true)),
        (true, NodeState::Mixed, &[], true, None),
        (true, NodeState::Idle, &["COMPLETING"], false, Some(true)),
        (true, NodeState::Idle, &[], true, Some(false)),
        (false, NodeState::Allocated, &[], true, Some(false)),
        (false, NodeState::Idle, &[], false, None),
    ];
    for (wdp, state, flags, protected, want) in cases {
        let mut ns = nodeset(1);
        ns.workload_disruption_protection = *wdp;
        let pods = vec![PodView {
            protected: *protected,
            ..pod(0)
        }];
        let nodes = map(vec![node("gpu-0", state.clone(), flags, None)]);
        let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
        let got = p.protect.first().map(|c| c.protect);
        assert_eq!(got, *want, "{wdp} {state:?} {flags:?} {protected}");
        for slurm in [SlurmView::Unavailable, SlurmView::NotConfigured] {
            assert!(run(&ns, &pods, slurm).protect.is_empty());
        }
    }
    // Not registered: not busy.
    let pods = vec![PodView {
        protected: true,
        ..pod(0)
    }];
    let p = run(&nodeset(1), &pods, SlurmView::Nodes(&map(vec![])));
    assert_eq!(p.protect.first().map(|c| c.protect), Some(false));
}

#[test]
fn pod_conditions_follow_slurm() {
    let pods = vec![pod(0), pod(1)];
    let nodes = map(vec![node(
        "gpu-0",
        NodeState::Mixed,
        &["DRAIN"],
        Some("slurm-operator: x"),
    )]);
    let p = run(&nodeset(2), &pods, SlurmView::Nodes(&nodes));
    assert_eq!(p.conditions.len(), 2);
    let types: Vec<&str> = p.conditions[0]
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, vec!["SlurmNodeStateMixed", "SlurmNodeStateDrain"]);
    assert_eq!(p.conditions[0].conditions[0].message, "slurm-operator: x");
    assert!(
        p.conditions[1].conditions.is_empty(),
        "gpu-1 not registered"
    );
}

#[test]
fn deadlines_are_written_and_order_victims() {
    let ns = nodeset(1);
    let mut pods = vec![pod(0), pod(1), pod(2)];
    pods[2].deadline = Some(t(500)); // stale: its node has no running job now
    let deadlines: HashMap<String, Timestamp> =
        [("gpu-0".to_string(), t(100)), ("gpu-1".to_string(), t(900))].into();
    pods[0].deadline = Some(t(100) + SignedDuration::from_millis(300)); // same second
    let nodes = map((0..3).map(|i| drained(&format!("gpu-{i}"))).collect());
    let p = plan(&PlanInput {
        nodeset: &ns,
        pods: &pods,
        slurm: SlurmView::Nodes(&nodes),
        deadlines: Some(&deadlines),
        now: now(),
    });
    let changes: Vec<&AnnotationChange> =
        p.annotations.iter().filter(|a| a.key == DEADLINE).collect();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].pod, "gpu-1");
    assert_eq!(changes[0].value.as_deref(), Some("2027-01-15T08:15:00Z"));
    assert_eq!(
        (changes[1].pod.as_str(), changes[1].value.as_deref()),
        ("gpu-2", None)
    );
    // gpu-2 (no job) goes first, then gpu-0 (ends sooner); gpu-1 is kept.
    assert_eq!(
        p.delete,
        vec![
            PodToDelete {
                pod: "gpu-2".into(),
                reason: DeleteReason::ScaleIn
            },
            PodToDelete {
                pod: "gpu-0".into(),
                reason: DeleteReason::ScaleIn
            },
        ]
    );
    // No job data: annotations untouched.
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert!(p.annotations.iter().all(|a| a.key != DEADLINE));
}

#[test]
fn status_counters() {
    let mut ns = nodeset(5);
    ns.min_ready_seconds = 60;
    let pods = vec![
        PodView {
            ready_since: Some(now() - SignedDuration::from_secs(600)),
            ..pod(0)
        },
        PodView {
            ready_since: Some(now() - SignedDuration::from_secs(5)),
            revision: "v1".into(),
            ..pod(1)
        },
        PodView {
            phase: Some(PodPhase::Pending),
            ready: false,
            ..pod(2)
        },
        PodView {
            phase: None,
            ready: false,
            ..pod(3)
        },
        PodView {
            deleting: true,
            ready_since: Some(t(0)),
            ..pod(4)
        },
    ];
    let nodes = map(vec![
        node("gpu-0", NodeState::Idle, &[], None),
        node("gpu-1", NodeState::Mixed, &["DRAIN"], None),
        node("gpu-4", NodeState::Down, &["DRAIN"], None),
        idle("other-node"),
    ]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    let c = p.status.pods;
    assert_eq!(
        (
            c.replicas,
            c.ready,
            c.available,
            c.unavailable,
            c.updated,
            c.desired
        ),
        (4, 3, 2, 2, 2, 5)
    );
    let s = p.status.slurm.unwrap();
    assert_eq!(
        (s.total, s.idle, s.allocated, s.down, s.drain),
        (3, 1, 1, 1, 2)
    );
    assert_eq!(p.requeue_after.as_secs(), 61, "ready != available");
    let p = run(&nodeset(1), &[pod(0)], SlurmView::Nodes(&nodes));
    assert_eq!(
        p.requeue_after, RESYNC,
        "nothing pending: only the backstop"
    );
}

#[test]
fn one_slurm_action_per_node() {
    // Two pods claim one hostname: the victim wants a drain, the kept one an undrain.
    let a = PodView {
        slurm_node: "shared".into(),
        ..pod(0)
    };
    let b = PodView {
        slurm_node: "shared".into(),
        ..pod(1)
    };
    let nodes = map(vec![node(
        "shared",
        NodeState::Mixed,
        &["DRAIN"],
        Some("slurm-operator: Pod (slurm/gpu-0) was cordoned"),
    )]);
    let p = run(&nodeset(1), &[a, b], SlurmView::Nodes(&nodes));
    assert_eq!(p.waiting_for_drain, vec!["gpu-1"]);
    assert_eq!(
        p.drain,
        vec![Drain {
            node: "shared".into(),
            reason: SCALE_IN.into()
        }]
    );
    assert_eq!(p.undrain, Vec::<Undrain>::new());
}

#[test]
fn slurm_node_comments_name_their_pod_once() {
    let ns = nodeset(3);
    let mut unassigned = pod(2);
    unassigned.k8s_node = None;
    let pods = [pod(0), pod(1), unassigned];
    let mut commented = idle("gpu-1");
    commented.comment = Some(
        r#"{"namespace":"slurm","podName":"gpu-1","node":"k1","nodeSetName":"gpu","nodeSetUID":"uid-gpu"}"#
            .into(),
    );
    let nodes = map(vec![idle("gpu-0"), commented, idle("gpu-2")]);
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    let written: Vec<(&str, &str)> = p
        .comments
        .iter()
        .map(|c| (c.node.as_str(), c.comment.as_str()))
        .collect();
    assert_eq!(
        written,
        [(
            "gpu-0",
            r#"{"namespace":"slurm","podName":"gpu-0","node":"k0","nodeSetName":"gpu","nodeSetUID":"uid-gpu"}"#
        )],
        "gpu-1 says so already; gpu-2's pod has no Kubernetes node yet"
    );
    for slurm in [SlurmView::Unavailable, SlurmView::NotConfigured] {
        assert!(run(&ns, &pods, slurm).comments.is_empty());
    }
}

#[test]
fn kubernetes_node_topology_and_features_reach_the_pod_and_the_slurm_node() {
    use super::node_sync::Wanted;
    const TOPOLOGY: &str = "topology.slinky.slurm.net/spec";
    let ns = nodeset(3);
    let wants = |topology: Option<&str>, features: Option<&str>| {
        Some(Wanted::from_annotations(topology, None, features))
    };
    // gpu-0: its node gives both, nothing is set yet; gpu-1: in step; gpu-2: its node's
    // annotations were removed.
    let mut p0 = pod(0);
    p0.node_wants = wants(Some("topo-switch:s1"), Some("nn-1"));
    let mut p1 = pod(1);
    p1.node_wants = wants(Some("topo-switch:s2"), None);
    p1.topology = Some("topo-switch:s2".into());
    let mut p2 = pod(2);
    p2.node_wants = wants(None, None);
    p2.topology = Some("topo-switch:s9".into());
    let mut n1 = idle("gpu-1");
    n1.topology = Some("topo-switch:s2".into());
    let mut n2 = idle("gpu-2");
    n2.topology = Some("topo-switch:s9".into());
    n2.features = vec!["gpu".into(), "k8s/old".into()];
    n2.active_features = vec!["gpu".into(), "k8s/old".into()];
    let nodes = map(vec![idle("gpu-0"), n1, n2]);
    let pods = [p0, p1, p2];
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    let annotations: Vec<(&str, Option<&str>)> = p
        .annotations
        .iter()
        .filter(|a| a.key == TOPOLOGY)
        .map(|a| (a.pod.as_str(), a.value.as_deref()))
        .collect();
    assert_eq!(
        annotations,
        [("gpu-0", Some("topo-switch:s1")), ("gpu-2", None)]
    );
    type Sync<'a> = (&'a str, Option<&'a str>, Option<Vec<String>>);
    let syncs: Vec<Sync<'_>> = p
        .node_syncs
        .iter()
        .map(|s| {
            (
                s.node.as_str(),
                s.topology.as_deref(),
                s.features.as_ref().map(|f| f.0.clone()),
            )
        })
        .collect();
    assert_eq!(
        syncs,
        [
            (
                "gpu-0",
                Some("topo-switch:s1"),
                Some(vec!["k8s/nn-1".into()])
            ),
            ("gpu-2", Some(""), Some(vec!["gpu".into()])),
        ]
    );
    // Slurm unknown: the pods' annotations still follow, no Slurm node is written.
    let p = run(&ns, &pods, SlurmView::Unavailable);
    assert!(p.node_syncs.is_empty());
    assert_eq!(
        p.annotations.iter().filter(|a| a.key == TOPOLOGY).count(),
        2
    );
    // A cluster without a topology: features only, and the pods keep their annotation.
    let ns = NodeSetView {
        slurm_topology: false,
        ..ns
    };
    let p = run(&ns, &pods, SlurmView::Nodes(&nodes));
    assert!(p.annotations.iter().all(|a| a.key != TOPOLOGY));
    assert!(p.node_syncs.iter().all(|s| s.topology.is_none()));
    assert_eq!(p.node_syncs.len(), 2, "{:?}", p.node_syncs);
}
