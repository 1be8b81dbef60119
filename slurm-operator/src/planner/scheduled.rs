//! ScheduledUpdate: the NodeSet's Slurm maintenance reservation `SlurmOperatorMaint-<N>` and
//! the pods it lets go.
//!
//! While `updateStrategy.type` is `ScheduledUpdate`, the NodeSet keeps one reservation over
//! its registered Slurm nodes (flags `MAINT`, `IGNORE_JOBS` and the user's flags upper-cased,
//! user `slurm`, from `startTime` for `duration`). It is created once there are replicas and
//! some node is up (`IDLE` or `ALLOCATED`), never for a start in the past unless the flags
//! hold `FORCE_START`; before it starts it follows the spec, once active only its node list
//! follows the registered nodes (Slurm refuses other changes then). It is deleted when the
//! strategy changes away or the NodeSet scales to zero. Old-revision pods whose Slurm node is
//! in `MAINTENANCE` inside this reservation are replaced through the planner's usual
//! drain-before-delete path ([`super::plan::plan_scheduled`]).

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;
use slurm_client::hostlist;
use slurm_client::model::{
    Node, NodeFlag, NodeState, Reservation, ReservationSpec, ReservationUpdate,
};

use super::view::PodView;

/// Finalizer held on a NodeSet while its reservation may exist.
pub const FINALIZER: &str = "nodeset.slinky.slurm.net/reservation";
/// NodeSet condition telling whether the reservation exists.
pub const CONDITION: &str = "ReservationCreated";
/// User the reservation is for.
pub const USER: &str = "slurm";
/// Flags every reservation carries.
pub const BASE_FLAGS: [&str; 2] = ["MAINT", "IGNORE_JOBS"];
/// Flags that make a reservation recur (Slurm moves its start time forward).
const RECURRING: [&str; 5] = ["HOURLY", "DAILY", "WEEKLY", "WEEKDAY", "WEEKEND"];

/// `SlurmOperatorMaint-<nodeset>`.
pub fn reservation_name(nodeset: &str) -> String {
    format!("SlurmOperatorMaint-{nodeset}")
}

/// `spec.updateStrategy.scheduledUpdate`, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub start: Timestamp,
    /// `duration` in whole minutes (default 30).
    pub duration_minutes: u32,
    /// [`BASE_FLAGS`] and the user's flags, upper-cased, sorted, without duplicates.
    pub flags: Vec<String>,
}

impl Schedule {
    /// From the spec's parts; the duration is truncated to whole minutes (at least 1).
    pub fn new(start: Timestamp, duration: std::time::Duration, user_flags: &[String]) -> Schedule {
        let flags: BTreeSet<String> = BASE_FLAGS
            .iter()
            .map(|f| f.to_string())
            .chain(user_flags.iter().map(|f| f.trim().to_ascii_uppercase()))
            .filter(|f| !f.is_empty())
            .collect();
        Schedule {
            start,
            duration_minutes: u32::try_from(duration.as_secs() / 60)
                .unwrap_or(u32::MAX)
                .max(1),
            flags: flags.into_iter().collect(),
        }
    }

    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    fn end(&self) -> Timestamp {
        self.start
            .checked_add(jiff::SignedDuration::from_mins(i64::from(
                self.duration_minutes,
            )))
            .unwrap_or(self.start)
    }
}

/// What the reconciler observed for the reservation decision.
#[derive(Debug, Clone, Copy)]
pub struct ReservationInput<'a> {
    /// `SlurmOperatorMaint-<nodeset>`.
    pub name: &'a str,
    /// `Some` while the strategy is ScheduledUpdate and the NodeSet is not being deleted.
    pub schedule: Option<&'a Schedule>,
    /// `spec.replicas`.
    pub replicas: u32,
    /// The Slurm nodes of the NodeSet's pods that are registered.
    pub nodes: &'a [&'a Node],
    /// The reservation as Slurm has it.
    pub existing: Option<&'a Reservation>,
    pub now: Timestamp,
}

/// What to do with the reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationAction {
    /// Nothing, and why (for logs and the condition message).
    Keep(&'static str),
    Create(ReservationSpec),
    Update(ReservationUpdate),
    Delete,
}

/// Decides the reservation's next step.
pub fn reservation_action(input: &ReservationInput<'_>) -> ReservationAction {
    let wanted = input.schedule.filter(|_| input.replicas > 0);
    let names: BTreeSet<&str> = input.nodes.iter().map(|n| n.name.as_str()).collect();
    let node_list = hostlist::compress(&names);
    match (wanted, input.existing) {
        (None, Some(_)) => ReservationAction::Delete,
        (None, None) => ReservationAction::Keep("no reservation wanted"),
        (Some(s), None) => {
            let up = input.nodes.iter().any(|n| {
                matches!(
                    n.state,
                    NodeState::Idle | NodeState::Allocated | NodeState::Mixed
                )
            });
            if !up {
                return ReservationAction::Keep("waiting for a Slurm node of the NodeSet to be up");
            }
            if input.now >= s.end() {
                return ReservationAction::Keep("the scheduled window is over");
            }
            if s.start < input.now && !s.has_flag("FORCE_START") {
                return ReservationAction::Keep(
                    "startTime is in the past and the flags lack FORCE_START",
                );
            }
            let mut spec = ReservationSpec::new(input.name, s.duration_minutes)
                .start_time(s.start.as_second())
                .users([USER])
                .flags(s.flags.iter().cloned());
            spec.nodes = vec![node_list];
            ReservationAction::Create(spec)
        }
        (Some(s), Some(r)) => {
            let same_nodes =
                expanded(r.nodes.as_deref().unwrap_or_default()) == expanded(&node_list);
            if names.is_empty() {
                return ReservationAction::Keep("no Slurm node of the NodeSet is registered");
            }
            let active = r.start_time.is_some_and(|t| t <= input.now.as_second())
                && r.end_time.is_some_and(|t| input.now.as_second() < t);
            if active {
                if same_nodes {
                    return ReservationAction::Keep("active and current");
                }
                return ReservationAction::Update(ReservationUpdate::new().nodes(node_list));
            }
            let has: BTreeSet<&str> = r
                .flags
                .iter()
                .map(String::as_str)
                .filter(|f| *f != "SPEC_NODES")
                .collect();
            let want: BTreeSet<&str> = s.flags.iter().map(String::as_str).collect();
            let recurring = |flags: &BTreeSet<&str>| RECURRING.iter().any(|f| flags.contains(f));
            // Slurm moves a recurring reservation's start forward after each occurrence.
            let start_ok = match r.start_time {
                Some(t) if t == s.start.as_second() => true,
                Some(t) => t > s.start.as_second() && recurring(&has) && recurring(&want),
                None => false,
            };
            let duration_ok = match (r.start_time, r.end_time) {
                (Some(a), Some(b)) => b - a == i64::from(s.duration_minutes) * 60,
                _ => true,
            };
            let users_ok = r.users.len() == 1 && r.users[0] == USER;
            if same_nodes && start_ok && duration_ok && users_ok && want.is_subset(&has) {
                return ReservationAction::Keep("up to date");
            }
            let mut update = ReservationUpdate::new()
                .nodes(node_list)
                .users([USER])
                .flags(s.flags.iter().cloned());
            if !start_ok {
                update = update.start_time(s.start.as_second());
            }
            if !start_ok || !duration_ok {
                update = update.duration_minutes(s.duration_minutes);
            }
            ReservationAction::Update(update)
        }
    }
}

fn expanded(list: &str) -> BTreeSet<String> {
    hostlist::expand(list)
        .unwrap_or_else(|_| vec![list.to_string()])
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect()
}

/// Old-revision pods (live, of this scaling mode) whose Slurm node is in `MAINTENANCE` inside
/// the reservation `name`: the ones a ScheduledUpdate replaces now.
pub fn under_reservation<'a>(
    pods: &[&'a PodView],
    update_revision: &str,
    nodes: &HashMap<String, Node>,
    name: &str,
) -> Vec<&'a PodView> {
    pods.iter()
        .copied()
        .filter(|p| !p.deleting && p.revision != update_revision)
        .filter(|p| {
            nodes.get(&p.slurm_node).is_some_and(|n| {
                n.has_flag(&NodeFlag::Maintenance) && n.reservation.as_deref() == Some(name)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn node(name: &str, state: NodeState) -> Node {
        let mut n = Node::default();
        n.name = name.into();
        n.state = state;
        n
    }

    fn schedule(start: i64, flags: &[&str]) -> Schedule {
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        Schedule::new(t(start), std::time::Duration::from_secs(120), &flags)
    }

    fn existing(start: i64, minutes: i64, nodes: &str, flags: &[&str]) -> Reservation {
        let mut r = Reservation::default();
        r.name = "SlurmOperatorMaint-gpu".into();
        r.start_time = Some(t(start).as_second());
        r.end_time = Some(t(start + minutes * 60).as_second());
        r.nodes = Some(nodes.into());
        r.flags = flags.iter().map(|f| f.to_string()).collect();
        r.users = vec!["slurm".into()];
        r
    }

    fn decide(
        schedule: Option<&Schedule>,
        replicas: u32,
        nodes: &[Node],
        existing: Option<&Reservation>,
        now: i64,
    ) -> ReservationAction {
        let refs: Vec<&Node> = nodes.iter().collect();
        reservation_action(&ReservationInput {
            name: "SlurmOperatorMaint-gpu",
            schedule,
            replicas,
            nodes: &refs,
            existing,
            now: t(now),
        })
    }

    #[test]
    fn schedule_flags_are_upper_cased_and_merged() {
        let s = schedule(0, &["flex", "MAINT", " force_start "]);
        assert_eq!(s.flags, ["FLEX", "FORCE_START", "IGNORE_JOBS", "MAINT"]);
        assert_eq!(s.duration_minutes, 2);
        let s = Schedule::new(t(0), std::time::Duration::from_secs(30), &[]);
        assert_eq!(s.duration_minutes, 1);
    }

    #[test]
    fn creation_table() {
        let up = [
            node("gpu-0", NodeState::Idle),
            node("gpu-1", NodeState::Allocated),
        ];
        let down = [
            node("gpu-0", NodeState::Down),
            node("gpu-1", NodeState::Unknown),
        ];
        let future = schedule(60, &["flex"]);
        let past = schedule(-60, &[]);
        let past_forced = schedule(-60, &["force_start"]);
        let over = schedule(-600, &["FORCE_START"]);
        type Case<'a> = (&'a str, Option<&'a Schedule>, u32, &'a [Node], bool);
        let cases: [Case<'_>; 8] = [
            ("future start, nodes up", Some(&future), 2, &up, true),
            ("no replicas", Some(&future), 0, &up, false),
            ("no node up yet", Some(&future), 2, &down, false),
            ("no node registered", Some(&future), 2, &[], false),
            ("start in the past", Some(&past), 2, &up, false),
            ("past with FORCE_START", Some(&past_forced), 2, &up, true),
            ("window already over", Some(&over), 2, &up, false),
            ("other strategy", None, 2, &up, false),
        ];
        for (what, s, replicas, nodes, create) in cases {
            let action = decide(s, replicas, nodes, None, 0);
            assert_eq!(
                matches!(action, ReservationAction::Create(_)),
                create,
                "{what}: {action:?}"
            );
        }
        let ReservationAction::Create(spec) = decide(Some(&future), 2, &up, None, 0) else {
            panic!()
        };
        assert_eq!(spec.name, "SlurmOperatorMaint-gpu");
        assert_eq!(spec.start_time, Some(t(60).as_second()));
        assert_eq!(spec.duration_minutes, Some(2));
        assert_eq!(spec.nodes, ["gpu-[0-1]"]);
        assert_eq!(spec.users, ["slurm"]);
        assert_eq!(spec.flags, ["FLEX", "IGNORE_JOBS", "MAINT"]);
    }

    #[test]
    fn existing_reservation_table() {
        let nodes = [
            node("gpu-0", NodeState::Idle),
            node("gpu-1", NodeState::Idle),
        ];
        let s = schedule(60, &[]);
        let flags = ["IGNORE_JOBS", "MAINT", "SPEC_NODES"];
        let current = existing(60, 2, "gpu-[0-1]", &flags);
        assert_eq!(
            decide(Some(&s), 2, &nodes, Some(&current), 0),
            ReservationAction::Keep("up to date")
        );
        // Strategy changed away, or scaled to zero: delete.
        assert_eq!(
            decide(None, 2, &nodes, Some(&current), 0),
            ReservationAction::Delete
        );
        assert_eq!(
            decide(Some(&s), 0, &nodes, Some(&current), 0),
            ReservationAction::Delete
        );
        // A node joined before the start: the whole description is sent again.
        let one = existing(60, 2, "gpu-0", &flags);
        let ReservationAction::Update(u) = decide(Some(&s), 2, &nodes, Some(&one), 0) else {
            panic!()
        };
        assert_eq!(u.nodes, Some(vec!["gpu-[0-1]".to_string()]));
        assert_eq!(u.start_time, None);
        // The start moved in the spec.
        let moved = schedule(300, &[]);
        let ReservationAction::Update(u) = decide(Some(&moved), 2, &nodes, Some(&current), 0)
        else {
            panic!()
        };
        assert_eq!(u.start_time, Some(t(300).as_second()));
        assert_eq!(u.duration_minutes, Some(2));
        // Active: only the node list, and only when it differs.
        assert_eq!(
            decide(Some(&moved), 2, &nodes, Some(&current), 90),
            ReservationAction::Keep("active and current")
        );
        let ReservationAction::Update(u) = decide(Some(&s), 2, &nodes, Some(&one), 90) else {
            panic!()
        };
        assert_eq!(u, ReservationUpdate::new().nodes("gpu-[0-1]"));
        // Recurring: Slurm moved the start forward; that is not a change.
        let daily = schedule(60, &["daily"]);
        let next = existing(
            60 + 86_400,
            2,
            "gpu-[0-1]",
            &["DAILY", "IGNORE_JOBS", "MAINT"],
        );
        assert_eq!(
            decide(Some(&daily), 2, &nodes, Some(&next), 200),
            ReservationAction::Keep("up to date")
        );
        // No registered node: keep the reservation as it is.
        assert!(matches!(
            decide(Some(&s), 2, &[], Some(&one), 0),
            ReservationAction::Keep(_)
        ));
    }

    #[test]
    fn pods_under_reservation_are_old_and_in_maintenance_there() {
        let pod = |name: &str, rev: &str| PodView {
            name: name.into(),
            slurm_node: name.into(),
            revision: rev.into(),
            ..PodView::default()
        };
        let in_maint = |name: &str, res: &str| {
            let mut n = node(name, NodeState::Idle);
            n.state_flags = vec![NodeFlag::Maintenance, NodeFlag::Reserved];
            n.reservation = Some(res.into());
            n
        };
        let pods = [
            pod("gpu-0", "v1"),
            pod("gpu-1", "v1"),
            pod("gpu-2", "v2"),
            pod("gpu-3", "v1"),
            pod("gpu-4", "v1"),
        ];
        let mut reserved_only = in_maint("gpu-3", "SlurmOperatorMaint-gpu");
        reserved_only.state_flags = vec![NodeFlag::Reserved];
        let nodes: HashMap<String, Node> = [
            in_maint("gpu-0", "SlurmOperatorMaint-gpu"),
            in_maint("gpu-1", "other"),
            in_maint("gpu-2", "SlurmOperatorMaint-gpu"),
            reserved_only,
        ]
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
        let refs: Vec<&PodView> = pods.iter().collect();
        let got: Vec<&str> = under_reservation(&refs, "v2", &nodes, "SlurmOperatorMaint-gpu")
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(got, ["gpu-0"]);
    }

    #[test]
    fn plan_replaces_old_pods_in_maintenance_through_drain_then_delete() {
        use crate::planner::plan::{DeleteReason, PlanInput, PodToDelete, plan_scheduled};
        use crate::planner::view::{NodeSetView, PodPhase, SlurmView, UpdateStrategy};
        let ns = NodeSetView {
            namespace: "slurm".into(),
            name: "gpu".into(),
            uid: "uid-gpu".into(),
            replicas: 3,
            ordinal_padding: 0,
            min_ready_seconds: 0,
            update: UpdateStrategy::OnDelete,
            workload_disruption_protection: true,
            update_revision: "v2".into(),
            slurm_topology: true,
        };
        let pod = |i: u32, rev: &str| PodView {
            name: format!("gpu-{i}"),
            ordinal: Some(i),
            slurm_node: format!("gpu-{i}"),
            phase: Some(PodPhase::Running),
            ready: true,
            ready_since: Some(t(0)),
            created: Some(t(0)),
            revision: rev.into(),
            ..PodView::default()
        };
        let pods = [pod(0, "v1"), pod(1, "v1"), pod(2, "v2")];
        let maint = |name: &str, flags: &[NodeFlag], reason: Option<&str>| {
            let mut n = node(name, NodeState::Idle);
            n.state_flags = flags.to_vec();
            n.reservation = Some("SlurmOperatorMaint-gpu".into());
            n.reason = reason.map(str::to_string);
            (n.name.clone(), n)
        };
        let m = NodeFlag::Maintenance;
        let nodes: HashMap<String, Node> = [
            maint("gpu-0", std::slice::from_ref(&m), None),
            maint(
                "gpu-1",
                &[m.clone(), NodeFlag::Drain],
                Some("slurm-operator: x"),
            ),
            maint("gpu-2", std::slice::from_ref(&m), None),
        ]
        .into_iter()
        .collect();
        let input = PlanInput {
            nodeset: &ns,
            pods: &pods,
            slurm: SlurmView::Nodes(&nodes),
            deadlines: None,
            now: t(100),
        };
        let p = plan_scheduled(&input, Some("SlurmOperatorMaint-gpu"));
        // gpu-1 is drained and idle: deleted; gpu-0 is drained first; gpu-2 is new.
        assert_eq!(
            p.delete,
            [PodToDelete {
                pod: "gpu-1".into(),
                reason: DeleteReason::Update
            }]
        );
        assert_eq!(p.waiting_for_drain, ["gpu-0"]);
        assert_eq!(p.drain.len(), 1);
        assert_eq!(p.drain[0].node, "gpu-0");
        // No reservation (or its lookup failed): nothing is replaced.
        let p = plan_scheduled(&input, None);
        assert!(p.delete.is_empty() && p.drain.is_empty(), "{p:?}");
        // Slurm unavailable: nothing either.
        let p = plan_scheduled(
            &PlanInput {
                slurm: SlurmView::Unavailable,
                ..input
            },
            Some("SlurmOperatorMaint-gpu"),
        );
        assert!(p.delete.is_empty() && p.drain.is_empty(), "{p:?}");
    }
}
