//! Which Slurm nodes a workload must not get, by what Kubernetes says about its nodes: taints
//! and tolerations, `nodeSelector`, required node affinity, cordons, readiness and the node's
//! pod capacity. Slurm nodes that no Kubernetes node stands for are excluded too: no kubelet
//! could run the pod there. The result goes into the job's `excluded_nodes` at its submission,
//! and again while it pends whenever it changes (never `required_nodes`, whose stale names a
//! slurmctld restart turns into killed jobs: Slinky #43).

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use kube::ResourceExt;

use crate::keys;
use crate::node_selector;
use crate::resources::Requests;

/// The Slurm node name a Kubernetes node stands for.
pub fn slurm_name(node: &Node) -> String {
    node.labels()
        .get(keys::SLURM_NODENAME_LABEL)
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| node.name_any())
}

/// What the pods bound to one Kubernetes node take of it (see [`crate::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeUsage {
    /// Non-terminal pods, whoever bound them.
    pub pods: usize,
    /// The CPU requests, in cores, of those Slurm does not account for (not the bridge's).
    pub cpu: f64,
    /// Their memory requests, in bytes.
    pub memory: f64,
    /// The CPU requests of the bridge's own pods there, which Slurm counts through their jobs.
    pub bridge_cpu: f64,
    /// Their memory requests.
    pub bridge_memory: f64,
}

impl NodeUsage {
    /// What a job still to be placed is held against. Where pods Slurm knows nothing of take
    /// some of a resource, Slurm's free room is off by that much, so the bridge's pods count
    /// too (several small jobs, each fitting beside a DaemonSet's pod, must not together
    /// overcommit the node). Elsewhere Slurm's own count is exact, and the bridge's pods are
    /// left to it, so that a job can queue for a node they fill.
    pub fn for_placement(&self) -> NodeUsage {
        NodeUsage {
            cpu: self.cpu + if self.cpu > 0.0 { self.bridge_cpu } else { 0.0 },
            memory: self.memory
                + if self.memory > 0.0 {
                    self.bridge_memory
                } else {
                    0.0
                },
            ..*self
        }
    }

    /// Every request bound there: what the kubelet admits a pod against.
    pub fn all(&self) -> NodeUsage {
        NodeUsage {
            cpu: self.cpu + self.bridge_cpu,
            memory: self.memory + self.bridge_memory,
            ..*self
        }
    }
}

/// Why a node cannot take a pod, or `None` when it can. `used` is what the pods already bound
/// there take: the pod must fit in the node's allocatable beside them, as the kubelet admits
/// it (a pod that does not would fail with OutOfcpu or OutOfmemory).
pub fn unfit(pod: &Pod, node: &Node, used: &NodeUsage) -> Option<String> {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return Some("cordoned".into());
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return Some("not Ready".into());
    }
    let pod_spec = pod.spec.clone().unwrap_or_default();
    let tolerations = pod_spec.tolerations.unwrap_or_default();
    // The bridge's own taint: the bridge gives its pods the toleration before binding them.
    let ours = |taint: &Taint| {
        pod_spec
            .scheduler_name
            .as_deref()
            .is_some_and(|s| crate::taint::is_ours(taint, s))
    };
    for taint in spec.taints.iter().flatten() {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !ours(taint)
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            return Some(format!(
                "taint {}={}:{}",
                taint.key,
                taint.value.clone().unwrap_or_default(),
                taint.effect
            ));
        }
    }
    let labels = node.labels();
    for (key, value) in pod_spec.node_selector.iter().flatten() {
        if labels.get(key) != Some(value) {
            return Some(format!("nodeSelector {key}={value}"));
        }
    }
    let required = pod_spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution);
    if required.is_some_and(|r| !node_selector::matches(&r, node)) {
        return Some("required node affinity".into());
    }
    let allocatable = |resource: &str| {
        node.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(resource))
            .and_then(|q| kube_support::quantity::parse(&q.0).ok())
    };
    if allocatable("pods").is_some_and(|c| used.pods as f64 >= c) {
        return Some("no pod capacity left".into());
    }
    let wants = Requests::of(pod);
    // A thousandth of a core or a byte of rounding is not a reason to refuse.
    if let Some(cpu) = allocatable("cpu")
        && wants.cpu > 0.0
        && used.cpu + wants.cpu > cpu + 1e-3
    {
        return Some(format!(
            "not enough CPU: {:.3} of {cpu} allocatable is requested by the pods there, the pod requests {:.3}",
            used.cpu, wants.cpu
        ));
    }
    if let Some(memory) = allocatable("memory")
        && wants.memory > 0.0
        && used.memory + wants.memory > memory + 1.0
    {
        let mib = |b: f64| (b / 1048576.0).ceil();
        return Some(format!(
            "not enough memory: {} MiB of {} MiB allocatable is requested by the pods there, the pod requests {} MiB",
            mib(used.memory),
            mib(memory),
            mib(wants.memory)
        ));
    }
    None
}

/// A hash of what [`unfit`] reads of a node: its cordon, taints, labels, allocatable and
/// readiness. Nodes post their status every few seconds; only a change of this wakes the
/// waiting workloads.
pub fn fit_state(node: &Node) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut h);
    for t in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&t.key, &t.value, &t.effect).hash(&mut h);
    }
    node.labels().hash(&mut h);
    let status = node.status.as_ref();
    for (k, v) in status
        .and_then(|s| s.allocatable.as_ref())
        .into_iter()
        .flatten()
    {
        (k, &v.0).hash(&mut h);
    }
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| &c.status)
        .hash(&mut h);
    h.finish()
}

/// Whether toleration `t` tolerates `taint` (Kubernetes' matching rules).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    let key_matches = match t.key.as_deref() {
        None | Some("") => t.operator.as_deref() == Some("Exists"),
        Some(key) => key == taint.key,
    };
    key_matches
        && match t.operator.as_deref() {
            Some("Exists") => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        }
}

/// The Slurm nodes (of `slurm_nodes`) that `pods` must not be given: those whose Kubernetes node
/// any of the pods cannot use, and those no Kubernetes node stands for. `used` is what the
/// pods already bound to each Kubernetes node take of it.
pub fn excluded_nodes<N: Borrow<Node>>(
    pods: &[&Pod],
    nodes: &[N],
    slurm_nodes: &BTreeSet<String>,
    used: &BTreeMap<String, NodeUsage>,
) -> Vec<String> {
    let mut usable = BTreeSet::new();
    let none = NodeUsage::default();
    for node in nodes.iter().map(Borrow::borrow) {
        let on_node = used.get(&node.name_any()).unwrap_or(&none).for_placement();
        let fits = pods.iter().all(|p| unfit(p, node, &on_node).is_none());
        if fits {
            usable.insert(slurm_name(node));
        }
    }
    slurm_nodes
        .iter()
        .filter(|n| !usable.contains(*n))
        .cloned()
        .collect()
}

/// The excluded nodes a pending job had (`current`, of which only Slurm nodes that still exist
/// count: a name Slurm keeps for a deleted node must not bring an update per pass) when they
/// differ from `wanted`; `None` when the job is as it should be.
pub fn exclusion_change(
    wanted: &[String],
    current: Vec<String>,
    slurm_nodes: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let current: Vec<String> = current
        .into_iter()
        .filter(|n| slurm_nodes.contains(n))
        .collect();
    (wanted != current.as_slice()).then_some(current)
}

/// Why a workload of `pods` pods cannot be submitted when Kubernetes excludes `excluded` of the
/// `slurm_nodes` Slurm nodes, or `None` when enough are left (one pod a node).
pub fn too_few_nodes(slurm_nodes: usize, excluded: usize, pods: usize) -> Option<String> {
    let usable = slurm_nodes.saturating_sub(excluded);
    (usable < pods).then(|| {
        format!(
            "Kubernetes allows {usable} of the {slurm_nodes} Slurm node(s) for this workload; it needs {pods}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        let mut node: Node = serde_yaml::from_str(yaml).unwrap();
        let status = node.status.get_or_insert_with(Default::default);
        if status.conditions.is_none() {
            status.conditions = Some(vec![
                serde_yaml::from_str("{type: Ready, status: 'True'}").unwrap(),
            ]);
        }
        node
    }

    fn pods(n: usize) -> NodeUsage {
        NodeUsage {
            pods: n,
            ..NodeUsage::default()
        }
    }

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn kubernetes_rules() {
        let plain = pod("spec: {containers: []}\n");
        assert_eq!(
            unfit(&plain, &node("metadata: {name: n}\n"), &pods(0)),
            None
        );
        assert_eq!(
            unfit(
                &plain,
                &node("metadata: {name: n}\nspec: {unschedulable: true}\n"),
                &pods(0)
            )
            .as_deref(),
            Some("cordoned")
        );
        let tainted = node(
            "metadata: {name: n}\nspec: {taints: [{key: gpu, value: 'yes', effect: NoSchedule}]}\n",
        );
        assert!(
            unfit(&plain, &tainted, &pods(0))
                .unwrap()
                .contains("taint gpu=yes:NoSchedule")
        );
        let tolerant = pod("spec: {containers: [], tolerations: [{key: gpu, operator: Exists}]}\n");
        assert_eq!(unfit(&tolerant, &tainted, &pods(0)), None);
        let prefer =
            node("metadata: {name: n}\nspec: {taints: [{key: gpu, effect: PreferNoSchedule}]}\n");
        assert_eq!(unfit(&plain, &prefer, &pods(0)), None);
        // The bridge's own taint is no obstacle to its pods (it adds their toleration), but
        // another bridge's is.
        let managed = node(
            "metadata: {name: n}\nspec: {taints: [{key: slinky.slurm.net/managed-node, value: b1, effect: NoExecute}]}\n",
        );
        let of_b1 = pod("spec: {containers: [], schedulerName: b1}\n");
        let of_b2 = pod("spec: {containers: [], schedulerName: b2}\n");
        assert_eq!(unfit(&of_b1, &managed, &pods(0)), None);
        assert!(unfit(&of_b2, &managed, &pods(0)).is_some());

        let selective = pod("spec: {containers: [], nodeSelector: {zone: a}}\n");
        assert!(
            unfit(
                &selective,
                &node("metadata: {name: n, labels: {zone: b}}\n"),
                &pods(0)
            )
            .is_some()
        );
        assert_eq!(
            unfit(
                &selective,
                &node("metadata: {name: n, labels: {zone: a}}\n"),
                &pods(0)
            ),
            None
        );

        let affine = pod(
            "spec:\n  containers: []\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: cores, operator: Gt, values: ['8']}]\n        - matchFields: [{key: metadata.name, operator: In, values: [special]}]\n",
        );
        assert!(
            unfit(
                &affine,
                &node("metadata: {name: n, labels: {cores: '4'}}\n"),
                &pods(0)
            )
            .is_some()
        );
        assert_eq!(
            unfit(
                &affine,
                &node("metadata: {name: n, labels: {cores: '16'}}\n"),
                &pods(0)
            ),
            None
        );
        assert_eq!(
            unfit(&affine, &node("metadata: {name: special}\n"), &pods(0)),
            None
        );

        let full = node("metadata: {name: n}\nstatus: {allocatable: {pods: '2'}}\n");
        assert_eq!(unfit(&plain, &full, &pods(1)), None);
        assert!(unfit(&plain, &full, &pods(2)).is_some());

        let not_ready =
            node("metadata: {name: n}\nstatus: {conditions: [{type: Ready, status: 'Unknown'}]}\n");
        assert!(unfit(&plain, &not_ready, &pods(0)).is_some());
    }

    #[test]
    fn excluded_are_slurm_names() {
        let nodes = vec![
            node("metadata: {name: k1}\n"),
            node(
                "metadata: {name: k2, labels: {slinky.slurm.net/slurm-nodename: s2}}\nspec: {unschedulable: true}\n",
            ),
            node("metadata: {name: k3, labels: {slinky.slurm.net/slurm-nodename: s3}}\n"),
        ];
        let slurm: BTreeSet<String> = ["k1", "s2", "s3", "only-in-slurm"].map(String::from).into();
        let plain = pod("spec: {containers: []}\n");
        assert_eq!(
            excluded_nodes(&[&plain], &nodes, &slurm, &BTreeMap::new()),
            ["only-in-slurm", "s2"]
        );
    }

    #[test]
    fn a_pending_jobs_exclusions_change_only_when_they_differ() {
        let slurm: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        let v = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        struct Case {
            why: &'static str,
            wanted: Vec<String>,
            current: Vec<String>,
            want: Option<Vec<String>>,
        }
        let cases = [
            Case {
                why: "the same: nothing",
                wanted: v(&["a"]),
                current: v(&["a"]),
                want: None,
            },
            Case {
                why: "a name Slurm no longer has is not a difference",
                wanted: v(&["a"]),
                current: v(&["a", "gone"]),
                want: None,
            },
            Case {
                why: "a node tainted since: added",
                wanted: v(&["a", "b"]),
                current: v(&["a"]),
                want: Some(v(&["a"])),
            },
            Case {
                why: "a node usable again: taken out",
                wanted: v(&[]),
                current: v(&["c"]),
                want: Some(v(&["c"])),
            },
        ];
        for c in cases {
            assert_eq!(
                exclusion_change(&c.wanted, c.current, &slurm),
                c.want,
                "{}",
                c.why
            );
        }
    }

    #[test]
    fn a_workload_needs_a_usable_node_per_pod() {
        assert_eq!(too_few_nodes(3, 1, 2), None);
        assert_eq!(too_few_nodes(3, 0, 3), None);
        assert_eq!(
            too_few_nodes(3, 2, 2).as_deref(),
            Some("Kubernetes allows 1 of the 3 Slurm node(s) for this workload; it needs 2")
        );
        assert!(too_few_nodes(0, 0, 1).is_some(), "no Slurm node at all");
        assert_eq!(
            too_few_nodes(2, 5, 0),
            None,
            "more exclusions than nodes: no panic"
        );
    }

    #[test]
    fn a_pod_must_fit_beside_what_is_bound_there_whoever_bound_it() {
        let n = node(
            "metadata: {name: k1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n",
        );
        let three = pod(
            "spec: {containers: [{name: c, resources: {requests: {cpu: '3', memory: 1Gi}}}]}\n",
        );
        let daemon = NodeUsage {
            pods: 1,
            cpu: 0.5,
            memory: 512.0 * 1048576.0,
            ..NodeUsage::default()
        };
        assert_eq!(unfit(&three, &n, &daemon), None, "3.5 of 4 CPUs");
        let busy = NodeUsage { cpu: 1.5, ..daemon };
        let why = unfit(&three, &n, &busy).unwrap();
        assert!(why.starts_with("not enough CPU: 1.500 of 4"), "{why}");
        let full = NodeUsage {
            memory: 7.5 * 1073741824.0,
            ..daemon
        };
        let why = unfit(&three, &n, &full).unwrap();
        assert!(
            why.starts_with("not enough memory: 7680 MiB of 8192 MiB"),
            "{why}"
        );
        // No requests: only the pod count limits it, as the kubelet admits it.
        let best_effort = pod("spec: {containers: [{name: c}]}\n");
        let all = NodeUsage {
            pods: 3,
            cpu: 4.0,
            memory: 8.0 * 1073741824.0,
            ..NodeUsage::default()
        };
        assert_eq!(unfit(&best_effort, &n, &all), None);
        let used = BTreeMap::from([("k1".to_string(), busy)]);
        let slurm: BTreeSet<String> = ["k1".to_string()].into();
        assert_eq!(excluded_nodes(&[&three], &[n], &slurm, &used), ["k1"]);
    }

    #[test]
    fn the_bridges_own_pods_count_for_placement_only_beside_pods_slurm_does_not_know() {
        let n = node("metadata: {name: k1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n");
        let two = pod("spec: {containers: [{name: c, resources: {requests: {cpu: '2'}}}]}\n");
        let slurm: BTreeSet<String> = ["k1".to_string()].into();
        let excluded = |used: NodeUsage| {
            excluded_nodes(
                &[&two],
                std::slice::from_ref(&n),
                &slurm,
                &BTreeMap::from([("k1".into(), used)]),
            )
        };
        // Slurm counts its jobs' CPUs exactly: the job may queue for the node they fill.
        let bridge_only = NodeUsage {
            pods: 4,
            bridge_cpu: 4.0,
            ..NodeUsage::default()
        };
        assert!(excluded(bridge_only).is_empty());
        // A DaemonSet's CPU that Slurm does not see: 1 + 2 of the bridge's leave 1 of 4.
        let beside_daemon = NodeUsage {
            pods: 3,
            cpu: 1.0,
            bridge_cpu: 2.0,
            ..NodeUsage::default()
        };
        assert_eq!(excluded(beside_daemon), ["k1"]);
        let why = unfit(&two, &n, &beside_daemon.all()).unwrap();
        assert!(why.starts_with("not enough CPU: 3.000 of 4"), "{why}");
        assert_eq!(unfit(&two, &n, &bridge_only.for_placement()), None);
        assert!(
            unfit(&two, &n, &bridge_only.all()).is_some(),
            "the kubelet counts every pod"
        );
    }

    #[test]
    fn a_heartbeat_does_not_change_the_fit_state() {
        let n = node("metadata: {name: k1}\nstatus: {allocatable: {cpu: '4'}}\n");
        let mut beat = n.clone();
        beat.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_heartbeat_time = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        assert_eq!(fit_state(&n), fit_state(&beat));
        let mut cordoned = n.clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        assert_ne!(fit_state(&n), fit_state(&cordoned));
        let mut not_ready = n.clone();
        not_ready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        assert_ne!(fit_state(&n), fit_state(&not_ready));
    }
}
