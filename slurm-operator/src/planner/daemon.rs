//! NodeSet `scalingMode: DaemonSet`: one worker pod per eligible Kubernetes node.
//!
//! Which nodes are eligible is decided as Kubernetes' DaemonSet controller does, by simulating
//! the pod on each node: `nodeSelector`, the required node affinity, and the node's
//! `NoSchedule`/`NoExecute` taints against the pod's tolerations. A new pod needs both kinds of
//! taint tolerated; an existing pod only `NoExecute`. Daemon pods carry the standard daemon
//! tolerations ([`daemon_tolerations`], among them `node.kubernetes.io/unschedulable`), so a
//! cordoned node stays eligible and its pod is recreated when it goes away (Slinky #259).
//!
//! The per-node decisions (create, or condemn: node gone or no longer eligible, hostname no
//! longer the node's, a second pod on the node) feed the same plan as StatefulSet mode
//! ([`super::plan`]): condemned pods are drained before they are deleted and kept when Slurm
//! cannot be asked, terminal pods are deleted, cordon sync, conditions, `pod-protect` and the
//! status counters are shared. The desired count is the number of eligible nodes.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, Taint, Toleration};

use super::plan::{DeleteReason, Plan, PlanInput, Scaling, plan_with};
use super::prune::defunct_nodes;
use super::view::{PodPhase, PodView, SlurmView};

/// The well-known node label holding the node's hostname.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Taint of a cordoned node (the node controller adds it for `spec.unschedulable`).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Tolerations Kubernetes' DaemonSet controller adds to every daemon pod; with `host_network`
/// also `network-unavailable`.
pub fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut keys = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        (TAINT_UNSCHEDULABLE, "NoSchedule"),
    ];
    if host_network {
        keys.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    keys.into_iter()
        .map(|(key, effect)| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Toleration::default()
        })
        .collect()
}

/// A Kubernetes node as the DaemonSet decisions see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Annotation `nodeset.slinky.slurm.net/hostname-override`.
    pub hostname_override: Option<String>,
    /// Annotation `topology.slinky.slurm.net/spec` (carried for the topology step).
    pub topology: Option<String>,
}

impl KubeNode {
    /// The Slurm node name of this node's pod: the override, else the name up to the first dot.
    pub fn hostname(&self) -> String {
        match self.hostname_override.as_deref().filter(|h| !h.is_empty()) {
            Some(h) => h.to_owned(),
            None => self.name.split('.').next().unwrap_or(&self.name).to_owned(),
        }
    }
}

/// The pod template's scheduling constraints (daemon tolerations included).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
}

/// Whether a simulated pod may start on a node, and whether an existing one may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    pub should_run: bool,
    pub should_continue: bool,
}

impl Placement {
    /// Whether the template's `nodeSelector` and required node affinity select `node`
    /// (taints aside).
    pub fn selects(&self, node: &KubeNode) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
            && self.required.as_ref().is_none_or(|s| {
                s.node_selector_terms.iter().any(|t| {
                    let exprs = t.match_expressions.as_deref().unwrap_or_default();
                    let fields = t.match_fields.as_deref().unwrap_or_default();
                    // An empty term selects nothing.
                    !(exprs.is_empty() && fields.is_empty())
                        && exprs.iter().all(|r| requirement(r, |k| node.labels.get(k)))
                        && fields.iter().all(|r| {
                            requirement(r, |k| (k == "metadata.name").then_some(&node.name))
                        })
                })
            })
    }

    /// Simulates the pod on `node`.
    pub fn fit(&self, node: &KubeNode) -> Fit {
        if !self.selects(node) {
            return Fit {
                should_run: false,
                should_continue: false,
            };
        }
        let cordon = Taint {
            key: TAINT_UNSCHEDULABLE.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        let taints = node
            .taints
            .iter()
            .chain(node.unschedulable.then_some(&cordon));
        let mut fit = Fit {
            should_run: true,
            should_continue: true,
        };
        for taint in taints {
            if self.tolerations.iter().any(|t| tolerates(t, taint)) {
                continue;
            }
            match taint.effect.as_str() {
                "NoSchedule" => fit.should_run = false,
                "NoExecute" => {
                    fit.should_run = false;
                    fit.should_continue = false;
                }
                _ => {}
            }
        }
        fit
    }
}

/// A node selector requirement against `get(key)`; unknown operators select nothing.
fn requirement<'a>(r: &NodeSelectorRequirement, get: impl Fn(&str) -> Option<&'a String>) -> bool {
    let value = get(&r.key);
    let values = r.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(|v| number(v)), values) else {
                return false;
            };
            number(want).is_some_and(|want| {
                if r.operator == "Gt" {
                    have > want
                } else {
                    have < want
                }
            })
        }
        _ => false,
    }
}

/// Kubernetes' `Toleration.ToleratesTaint`.
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    let exists = t.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    if key != taint.key {
        return false;
    }
    exists || t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
}

/// A DaemonSet-mode pod to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonPodToCreate {
    /// The Kubernetes node it is pinned to.
    pub node: String,
    /// Its hostname (the Slurm node name).
    pub hostname: String,
    /// The node's `hostname-override`, for the renderer.
    pub hostname_override: Option<String>,
    /// The node's `kubernetes.io/hostname` label: the pod is pinned by it as well as by the
    /// node name (schedulers that do not evaluate `matchFields` place it right too).
    pub hostname_label: Option<String>,
}

/// What the DaemonSet decisions add to the shared plan.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DaemonScaling {
    pub create: Vec<DaemonPodToCreate>,
    /// Pods to drain and delete, with why.
    pub condemn: Vec<(String, DeleteReason)>,
    /// Eligible nodes.
    pub desired: u32,
}

/// Everything observed for a DaemonSet-mode NodeSet.
#[derive(Debug, Clone, Copy)]
pub struct DaemonInput<'a> {
    /// `nodeset.replicas` is ignored: the desired count is the eligible nodes'.
    pub plan: PlanInput<'a>,
    pub nodes: &'a [KubeNode],
    pub placement: &'a Placement,
    /// Pod name → the Kubernetes node it runs on or is pinned to (`spec.nodeName`, else the
    /// `metadata.name` match field of its node affinity); pods without one are condemned.
    pub pod_nodes: &'a HashMap<String, String>,
    /// ScheduledUpdate: the maintenance reservation that exists in Slurm (see
    /// [`super::plan_scheduled`]).
    pub reservation: Option<&'a str>,
    /// `pruneSlurmNodeRecords: NodeNotFound`.
    pub prune_node_records: bool,
}

/// The per-node decisions.
pub fn daemon_scaling(input: &DaemonInput<'_>) -> DaemonScaling {
    let mut out = DaemonScaling::default();
    let mode_pods: Vec<&PodView> = input
        .plan
        .pods
        .iter()
        .filter(|p| !p.wrong_scaling_mode)
        .collect();
    let on = |node: &str| -> Vec<&PodView> {
        mode_pods
            .iter()
            .copied()
            .filter(|p| input.pod_nodes.get(&p.name).is_some_and(|n| n == node))
            .collect()
    };
    let terminal = |p: &PodView| matches!(p.phase, Some(PodPhase::Failed | PodPhase::Succeeded));
    // Live, non-terminal pods are the ones condemned here; terminal pods are deleted by the
    // shared plan and terminating ones are left alone.
    let condemnable = |p: &&PodView| !p.deleting && !terminal(p);
    let condemnable_ref = |p: &&&PodView| condemnable(p);

    for node in input.nodes {
        let fit = input.placement.fit(node);
        let pods = on(&node.name);
        let live: Vec<&PodView> = pods.iter().copied().filter(condemnable).collect();
        let eligible = fit.should_run || (fit.should_continue && !live.is_empty());
        if !eligible {
            out.condemn.extend(
                live.iter()
                    .map(|p| (p.name.clone(), DeleteReason::Ineligible)),
            );
            continue;
        }
        out.desired += 1;
        let hostname = node.hostname();
        let (mut right, wrong): (Vec<&PodView>, Vec<&PodView>) =
            live.into_iter().partition(|p| p.slurm_node == hostname);
        out.condemn.extend(
            wrong
                .iter()
                .map(|p| (p.name.clone(), DeleteReason::HostnameMismatch)),
        );
        // Keep the healthiest, then the oldest; the others are extra.
        right.sort_by(|a, b| {
            b.is_healthy()
                .cmp(&a.is_healthy())
                .then(a.created.cmp(&b.created))
                .then(a.name.cmp(&b.name))
        });
        out.condemn.extend(
            right
                .iter()
                .skip(1)
                .map(|p| (p.name.clone(), DeleteReason::Duplicate)),
        );
        // A new pod only once nothing of ours is left on the node (a condemned or terminating
        // pod still holds the hostname and the node's one-slurmd slot).
        if fit.should_run && pods.is_empty() {
            out.create.push(DaemonPodToCreate {
                node: node.name.clone(),
                hostname,
                hostname_override: node.hostname_override.clone(),
                hostname_label: node.labels.get(HOSTNAME_LABEL).cloned(),
            });
        }
    }
    // Pods on nodes that are gone, or pinned nowhere.
    for pod in mode_pods.iter().filter(condemnable_ref) {
        let placed = input
            .pod_nodes
            .get(&pod.name)
            .is_some_and(|n| input.nodes.iter().any(|k| &k.name == n));
        if !placed {
            out.condemn
                .push((pod.name.clone(), DeleteReason::Ineligible));
        }
    }
    out
}

/// Plans one pass of a DaemonSet-mode NodeSet.
pub fn daemon_plan(input: &DaemonInput<'_>) -> Plan {
    let scaling = daemon_scaling(input);
    let mut view = input.plan.nodeset.clone();
    view.replicas = scaling.desired;
    let base = PlanInput {
        nodeset: &view,
        ..input.plan
    };
    let mut plan = plan_with(&base, input.reservation, Scaling::Daemon(&scaling));
    if let (true, SlurmView::Nodes(nodes)) = (input.prune_node_records, input.plan.slurm) {
        plan.prune = defunct_nodes(&view, input.plan.pods, nodes, input.nodes);
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::NodeSelectorTerm;
    use slurm_client::model::{Node, NodeFlag, NodeState};

    use super::*;
    use crate::planner::plan::PodToDelete;
    use crate::planner::view::{MaxUnavailable, NodeSetView, SlurmView, UpdateStrategy};

    const CORDON: &str = "nodeset.slinky.slurm.net/pod-cordon";

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn nodeset() -> NodeSetView {
        NodeSetView {
            namespace: "slurm".into(),
            name: "gpu".into(),
            uid: "uid-gpu".into(),
            replicas: 99, // ignored in DaemonSet mode
            ordinal_padding: 0,
            min_ready_seconds: 0,
            update: UpdateStrategy::OnDelete,
            workload_disruption_protection: true,
            update_revision: "v2".into(),
            slurm_topology: true,
        }
    }

    fn knode(name: &str) -> KubeNode {
        KubeNode {
            name: name.into(),
            labels: [("pool".to_string(), "a".to_string())].into(),
            ..KubeNode::default()
        }
    }

    /// A running, ready pod `gpu-<suffix>` on Kubernetes node `node` with hostname `host`.
    fn pod(suffix: &str, node: &str, host: &str) -> PodView {
        PodView {
            name: format!("gpu-{suffix}"),
            slurm_node: host.into(),
            phase: Some(PodPhase::Running),
            ready: true,
            ready_since: Some(t(0)),
            created: Some(t(0)),
            revision: "v2".into(),
            k8s_node: Some(node.into()),
            ..PodView::default()
        }
    }

    fn snode(name: &str, state: NodeState, flags: &[&str], reason: Option<&str>) -> Node {
        let mut n = Node::default();
        n.name = name.into();
        n.state = state;
        n.state_flags = flags.iter().map(|f| NodeFlag::parse(f)).collect();
        n.reason = reason.map(str::to_string);
        n
    }

    fn idle(name: &str) -> Node {
        snode(name, NodeState::Idle, &[], None)
    }

    fn map(nodes: Vec<Node>) -> HashMap<String, Node> {
        nodes.into_iter().map(|n| (n.name.clone(), n)).collect()
    }

    fn daemon_placement() -> Placement {
        Placement {
            tolerations: daemon_tolerations(false),
            ..Placement::default()
        }
    }

    fn run(
        nodes: &[KubeNode],
        placement: &Placement,
        pods: &[PodView],
        slurm: SlurmView<'_>,
    ) -> Plan {
        let ns = nodeset();
        let pod_nodes: HashMap<String, String> = pods
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.k8s_node.clone()?)))
            .collect();
        daemon_plan(&DaemonInput {
            plan: PlanInput {
                nodeset: &ns,
                pods,
                slurm,
                deadlines: None,
                now: t(10_000),
            },
            nodes,
            placement,
            pod_nodes: &pod_nodes,
            reservation: None,
            prune_node_records: false,
        })
    }

    fn deleted(p: &Plan) -> Vec<(&str, DeleteReason)> {
        p.delete
            .iter()
            .map(|PodToDelete { pod, reason }| (pod.as_str(), *reason))
            .collect()
    }

    fn created(p: &Plan) -> Vec<(&str, &str)> {
        p.create_daemon
            .iter()
            .map(|c| (c.node.as_str(), c.hostname.as_str()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    #[test]
    fn placement_fit_table() {
        let expr = |r: NodeSelectorRequirement| Placement {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![r]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..daemon_placement()
        };
        let field = |op: &str, v: &str| Placement {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![req("metadata.name", op, &[v])]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..daemon_placement()
        };
        let selector = |k: &str, v: &str| Placement {
            node_selector: [(k.to_string(), v.to_string())].into(),
            ..daemon_placement()
        };
        let tolerating = |key: &str, op: &str, effect: &str| Placement {
            tolerations: vec![Toleration {
                key: (!key.is_empty()).then(|| key.into()),
                operator: Some(op.into()),
                effect: (!effect.is_empty()).then(|| effect.into()),
                value: (op == "Equal").then(|| "v".into()),
                ..Toleration::default()
            }],
            ..Placement::default()
        };
        let plain = knode("n1");
        let tainted = |key: &str, effect: &str| KubeNode {
            taints: vec![Taint {
                value: Some("v".into()),
                ..taint(key, effect)
            }],
            ..knode("n1")
        };
        let cordoned = KubeNode {
            unschedulable: true,
            ..knode("n1")
        };
        let run_only = (true, true);
        let none = (false, false);
        let stay = (false, true);
        let cases: Vec<(&str, Placement, KubeNode, (bool, bool))> = vec![
            (
                "no constraints",
                Placement::default(),
                plain.clone(),
                run_only,
            ),
            (
                "nodeSelector match",
                selector("pool", "a"),
                plain.clone(),
                run_only,
            ),
            (
                "nodeSelector value",
                selector("pool", "b"),
                plain.clone(),
                none,
            ),
            (
                "nodeSelector key",
                selector("zone", "a"),
                plain.clone(),
                none,
            ),
            (
                "In",
                expr(req("pool", "In", &["b", "a"])),
                plain.clone(),
                run_only,
            ),
            (
                "In miss",
                expr(req("pool", "In", &["b"])),
                plain.clone(),
                none,
            ),
            (
                "In absent",
                expr(req("zone", "In", &["a"])),
                plain.clone(),
                none,
            ),
            (
                "NotIn",
                expr(req("pool", "NotIn", &["b"])),
                plain.clone(),
                run_only,
            ),
            (
                "NotIn hit",
                expr(req("pool", "NotIn", &["a"])),
                plain.clone(),
                none,
            ),
            (
                "NotIn absent",
                expr(req("zone", "NotIn", &["a"])),
                plain.clone(),
                run_only,
            ),
            (
                "Exists",
                expr(req("pool", "Exists", &[])),
                plain.clone(),
                run_only,
            ),
            (
                "Exists absent",
                expr(req("zone", "Exists", &[])),
                plain.clone(),
                none,
            ),
            (
                "DoesNotExist",
                expr(req("zone", "DoesNotExist", &[])),
                plain.clone(),
                run_only,
            ),
            (
                "DoesNotExist hit",
                expr(req("pool", "DoesNotExist", &[])),
                plain.clone(),
                none,
            ),
            (
                "bad operator",
                expr(req("pool", "Like", &["a"])),
                plain.clone(),
                none,
            ),
            (
                "matchFields name",
                field("In", "n1"),
                plain.clone(),
                run_only,
            ),
            ("matchFields other", field("In", "n2"), plain.clone(), none),
            (
                "matchFields NotIn",
                field("NotIn", "n1"),
                plain.clone(),
                none,
            ),
            (
                "empty term selects nothing",
                Placement {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm::default()],
                    }),
                    ..Placement::default()
                },
                plain.clone(),
                none,
            ),
            (
                "terms are ORed",
                Placement {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![
                            NodeSelectorTerm {
                                match_expressions: Some(vec![req("pool", "In", &["b"])]),
                                ..NodeSelectorTerm::default()
                            },
                            NodeSelectorTerm {
                                match_fields: Some(vec![req("metadata.name", "In", &["n1"])]),
                                ..NodeSelectorTerm::default()
                            },
                        ],
                    }),
                    ..Placement::default()
                },
                plain.clone(),
                run_only,
            ),
            (
                "NoSchedule untolerated",
                Placement::default(),
                tainted("gpu", "NoSchedule"),
                stay,
            ),
            (
                "NoExecute untolerated",
                Placement::default(),
                tainted("gpu", "NoExecute"),
                none,
            ),
            (
                "PreferNoSchedule ignored",
                Placement::default(),
                tainted("gpu", "PreferNoSchedule"),
                run_only,
            ),
            (
                "Exists tolerates",
                tolerating("gpu", "Exists", ""),
                tainted("gpu", "NoExecute"),
                run_only,
            ),
            (
                "Equal value",
                tolerating("gpu", "Equal", "NoSchedule"),
                tainted("gpu", "NoSchedule"),
                run_only,
            ),
            (
                "wrong effect",
                tolerating("gpu", "Exists", "NoSchedule"),
                tainted("gpu", "NoExecute"),
                none,
            ),
            (
                "other key",
                tolerating("fpga", "Exists", ""),
                tainted("gpu", "NoSchedule"),
                stay,
            ),
            (
                "empty key Exists tolerates all",
                tolerating("", "Exists", ""),
                tainted("gpu", "NoExecute"),
                run_only,
            ),
            (
                "cordoned, no daemon tolerations",
                Placement::default(),
                cordoned.clone(),
                stay,
            ),
            (
                "cordoned, daemon tolerations",
                daemon_placement(),
                cordoned.clone(),
                run_only,
            ),
            (
                "not-ready NoExecute tolerated",
                daemon_placement(),
                tainted("node.kubernetes.io/not-ready", "NoExecute"),
                run_only,
            ),
        ];
        for (what, placement, node, (run, cont)) in cases {
            let fit = placement.fit(&node);
            assert_eq!((fit.should_run, fit.should_continue), (run, cont), "{what}");
        }
    }

    #[test]
    fn hostnames() {
        assert_eq!(knode("node-1.example.org").hostname(), "node-1");
        assert_eq!(knode("node-1").hostname(), "node-1");
        let o = KubeNode {
            hostname_override: Some("gpu-a".into()),
            ..knode("node-1.x")
        };
        assert_eq!(o.hostname(), "gpu-a");
        let empty = KubeNode {
            hostname_override: Some(String::new()),
            ..knode("node-2.x")
        };
        assert_eq!(empty.hostname(), "node-2");
    }

    #[test]
    fn one_pod_per_eligible_node() {
        let mut n3 = knode("node-3.example.org");
        n3.hostname_override = Some("big".into());
        n3.labels
            .insert(HOSTNAME_LABEL.into(), "node-3.example.org".into());
        let nodes = [knode("node-1"), knode("node-2"), n3];
        let slurm = map(vec![]);
        let p = run(&nodes, &daemon_placement(), &[], SlurmView::Nodes(&slurm));
        assert_eq!(
            created(&p),
            vec![
                ("node-1", "node-1"),
                ("node-2", "node-2"),
                ("node-3.example.org", "big")
            ]
        );
        assert_eq!(p.create_daemon[2].hostname_override.as_deref(), Some("big"));
        assert_eq!(
            p.create_daemon[2].hostname_label.as_deref(),
            Some("node-3.example.org")
        );
        assert_eq!(p.create_daemon[0].hostname_label, None);
        assert!(p.create.is_empty() && p.delete.is_empty());
        assert_eq!(p.status.pods.desired, 3);

        // With a pod on node-1 only the others get one; status counts it.
        let pods = [pod("a", "node-1", "node-1")];
        let slurm = map(vec![idle("node-1")]);
        let p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        assert_eq!(
            created(&p),
            vec![("node-2", "node-2"), ("node-3.example.org", "big")]
        );
        assert_eq!(p.status.pods.desired, 3);
        assert_eq!(p.status.pods.replicas, 1);
        assert!(p.delete.is_empty() && p.drain.is_empty() && p.undrain.is_empty());

        // The steady state plans nothing.
        let pods = [
            pod("a", "node-1", "node-1"),
            pod("b", "node-2", "node-2"),
            pod("c", "node-3.example.org", "big"),
        ];
        let slurm = map(vec![idle("node-1"), idle("node-2"), idle("big")]);
        let p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        assert!(p.create_daemon.is_empty() && p.delete.is_empty());
        assert!(p.annotations.is_empty() && p.drain.is_empty() && p.protect.is_empty());
        assert_eq!(p.status.pods.desired, 3);
        assert_eq!(p.status.pods.unavailable, 0);
    }

    /// Node 3 leaves the selection (nodeSelector) or the cluster: its pod is condemned under
    /// every Slurm answer, and deleted only when that is safe.
    #[test]
    fn condemned_pod_is_drained_before_delete_and_kept_when_slurm_fails() {
        let selector = Placement {
            node_selector: [("pick".to_string(), "yes".to_string())].into(),
            ..daemon_placement()
        };
        let mut n1 = knode("node-1");
        n1.labels.insert("pick".into(), "yes".into());
        let mut n2 = knode("node-2");
        n2.labels.insert("pick".into(), "yes".into());
        let unselected = [n1.clone(), n2.clone(), knode("node-3")];
        let gone = [n1, n2];
        let pods = [
            pod("a", "node-1", "node-1"),
            pod("b", "node-2", "node-2"),
            pod("c", "node-3", "node-3"),
        ];
        let busy = map(vec![
            idle("node-1"),
            idle("node-2"),
            snode("node-3", NodeState::Allocated, &[], None),
        ]);
        let draining_busy = map(vec![
            idle("node-1"),
            idle("node-2"),
            snode(
                "node-3",
                NodeState::Mixed,
                &["DRAIN"],
                Some("slurm-operator: x"),
            ),
        ]);
        let drained = map(vec![
            idle("node-1"),
            idle("node-2"),
            snode(
                "node-3",
                NodeState::Idle,
                &["DRAIN"],
                Some("slurm-operator: x"),
            ),
        ]);
        let unregistered = map(vec![idle("node-1"), idle("node-2")]);
        let reason = "slurm-operator: Pod (slurm/gpu-c) is pending termination for scale-in";
        for nodes in [&unselected[..], &gone[..]] {
            // Busy: cordon the pod, drain its node, wait.
            let p = run(nodes, &selector, &pods, SlurmView::Nodes(&busy));
            assert!(p.delete.is_empty(), "{p:?}");
            assert_eq!(p.waiting_for_drain, vec!["gpu-c"]);
            assert_eq!(p.drain.len(), 1);
            assert_eq!(
                (p.drain[0].node.as_str(), p.drain[0].reason.as_str()),
                ("node-3", reason)
            );
            assert!(p.annotations.iter().any(|a| a.pod == "gpu-c"
                && a.key == CORDON
                && a.value.as_deref() == Some("true")));
            assert_eq!(p.status.pods.desired, 2);
            assert!(p.create_daemon.is_empty());
            // Drained but still running a job: wait.
            let p = run(nodes, &selector, &pods, SlurmView::Nodes(&draining_busy));
            assert!(p.delete.is_empty());
            assert_eq!(p.waiting_for_drain, vec!["gpu-c"]);
            // Drained and idle: delete.
            let p = run(nodes, &selector, &pods, SlurmView::Nodes(&drained));
            assert_eq!(deleted(&p), vec![("gpu-c", DeleteReason::Ineligible)]);
            // Not registered in Slurm: delete.
            let p = run(nodes, &selector, &pods, SlurmView::Nodes(&unregistered));
            assert_eq!(deleted(&p), vec![("gpu-c", DeleteReason::Ineligible)]);
            // No Slurm client configured: delete (Slinky's behaviour).
            let p = run(nodes, &selector, &pods, SlurmView::NotConfigured);
            assert_eq!(deleted(&p), vec![("gpu-c", DeleteReason::Ineligible)]);
            // Slurm cannot be asked: keep it, drain nothing, touch no conditions.
            let p = run(nodes, &selector, &pods, SlurmView::Unavailable);
            assert!(p.delete.is_empty() && p.drain.is_empty() && p.undrain.is_empty());
            assert_eq!(p.held, vec!["gpu-c"]);
            assert!(p.conditions.is_empty());
            assert!(p.status.slurm.is_none());
        }
    }

    /// Unlike Slinky (#259): a cordoned node stays eligible; its pod stays and is drained by
    /// the cordon sync, and a missing pod is recreated there.
    #[test]
    fn cordoned_node_keeps_and_recreates_its_pod() {
        let mut n2 = knode("node-2");
        n2.unschedulable = true;
        let nodes = [knode("node-1"), n2];
        let mut on_cordoned = pod("b", "node-2", "node-2");
        on_cordoned.k8s_node_unschedulable = true;
        let pods = [pod("a", "node-1", "node-1"), on_cordoned];
        let slurm = map(vec![idle("node-1"), idle("node-2")]);
        let p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        assert!(p.delete.is_empty() && p.create_daemon.is_empty());
        assert!(p.waiting_for_drain.is_empty());
        assert_eq!(p.drain.len(), 1);
        assert_eq!(p.drain[0].node, "node-2");
        assert!(
            p.drain[0].reason.contains("Node (node-2) was cordoned"),
            "{}",
            p.drain[0].reason
        );
        assert_eq!(p.status.pods.desired, 2);

        // The pod on the cordoned node is gone (failed and deleted, evicted, …): recreated.
        let pods = [pod("a", "node-1", "node-1")];
        let p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        assert_eq!(created(&p), vec![("node-2", "node-2")]);

        // Without the daemon tolerations (Slinky's behaviour) it would not be.
        let p = run(
            &nodes,
            &Placement::default(),
            &pods,
            SlurmView::Nodes(&slurm),
        );
        assert!(p.create_daemon.is_empty());
        assert_eq!(p.status.pods.desired, 1);
    }

    #[test]
    fn untolerated_taints() {
        let mut n1 = knode("node-1");
        n1.taints = vec![taint("gpu", "NoSchedule")];
        let mut n2 = knode("node-2");
        n2.taints = vec![taint("gpu", "NoSchedule")];
        let mut n3 = knode("node-3");
        n3.taints = vec![taint("gpu", "NoExecute")];
        let nodes = [n1, n2, n3];
        let pods = [pod("a", "node-1", "node-1"), pod("c", "node-3", "node-3")];
        let slurm = map(vec![idle("node-1"), idle("node-3")]);
        let p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        // NoSchedule: the existing pod continues, no new pod on node-2; NoExecute: evicted.
        assert!(p.create_daemon.is_empty());
        // node-3's Slurm node is idle but not drained: drain first.
        assert!(p.delete.is_empty());
        assert_eq!(p.waiting_for_drain, vec!["gpu-c"]);
        assert_eq!(p.status.pods.desired, 1);
    }

    #[test]
    fn extra_mismatched_terminal_and_other_mode_pods() {
        let nodes = [knode("node-1"), knode("node-2"), knode("node-3")];
        let mut older = pod("a", "node-1", "node-1");
        older.created = Some(t(-50));
        let mut unready_extra = pod("a2", "node-1", "node-1");
        unready_extra.ready = false;
        unready_extra.created = Some(t(-100));
        let renamed = pod("b", "node-2", "old-name");
        let mut failed = pod("c", "node-3", "node-3");
        failed.phase = Some(PodPhase::Failed);
        let mut statefulset = pod("0", "node-1", "gpu-0");
        statefulset.wrong_scaling_mode = true;
        let mut unpinned = pod("x", "", "x");
        unpinned.k8s_node = None;
        let mut terminating = pod("d", "node-3", "node-3");
        terminating.deleting = true;
        let pods = [
            older,
            unready_extra,
            renamed,
            failed,
            statefulset,
            unpinned,
            terminating,
        ];
        let slurm = map(vec![idle("node-1"), idle("node-3")]);
        let mut p = run(&nodes, &daemon_placement(), &pods, SlurmView::Nodes(&slurm));
        p.delete.sort_by(|a, b| a.pod.cmp(&b.pod));
        assert_eq!(
            deleted(&p),
            vec![
                ("gpu-0", DeleteReason::ScalingMode),
                ("gpu-b", DeleteReason::HostnameMismatch),
                ("gpu-c", DeleteReason::Terminal),
                ("gpu-x", DeleteReason::Ineligible),
            ]
        );
        // The unready extra pod on node-1 shares the Slurm node of the kept one, which is not
        // drained: drained first all the same (the kept pod's cordon sync undrains it after).
        assert_eq!(p.waiting_for_drain, vec!["gpu-a2"]);
        assert!(p.undrain.is_empty());
        // Nodes 2 and 3 still hold a pod of ours (renamed one, failed and terminating ones):
        // their new pods come once those are gone.
        assert!(p.create_daemon.is_empty());
        assert_eq!(p.status.pods.desired, 3);
    }

    #[test]
    fn rolling_update_replaces_old_revision_daemon_pods_one_at_a_time() {
        let nodes = [knode("node-1"), knode("node-2"), knode("node-3")];
        let mut pods = vec![
            pod("a", "node-1", "node-1"),
            pod("b", "node-2", "node-2"),
            pod("c", "node-3", "node-3"),
        ];
        for p in &mut pods {
            p.revision = "v1".into();
        }
        let slurm = map(vec![
            snode(
                "node-1",
                NodeState::Idle,
                &["DRAIN"],
                Some("slurm-operator: x"),
            ),
            snode(
                "node-2",
                NodeState::Idle,
                &["DRAIN"],
                Some("slurm-operator: x"),
            ),
            snode(
                "node-3",
                NodeState::Idle,
                &["DRAIN"],
                Some("slurm-operator: x"),
            ),
        ]);
        let mut ns = nodeset();
        ns.update = UpdateStrategy::RollingUpdate {
            max_unavailable: MaxUnavailable::Count(1),
        };
        let pod_nodes: HashMap<String, String> = pods
            .iter()
            .map(|p| (p.name.clone(), p.k8s_node.clone().unwrap()))
            .collect();
        let placement = daemon_placement();
        let p = daemon_plan(&DaemonInput {
            plan: PlanInput {
                nodeset: &ns,
                pods: &pods,
                slurm: SlurmView::Nodes(&slurm),
                deadlines: None,
                now: t(10_000),
            },
            nodes: &nodes,
            placement: &placement,
            pod_nodes: &pod_nodes,
            reservation: None,
            prune_node_records: false,
        });
        assert_eq!(p.delete.len(), 1, "{p:?}");
        assert_eq!(p.delete[0].reason, DeleteReason::Update);
    }
}
