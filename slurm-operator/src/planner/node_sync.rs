//! What a worker's Kubernetes node says about its Slurm node: its place in Slurm's topology
//! (annotation `topology.slinky.slurm.net/spec`) and per-node features
//! (`features.slinky.slurm.net/spec`), as Slinky's topology and node-features guides describe.
//!
//! - Topology: the node's annotation, else the one the NodeSet's pod template carries (a
//!   topology set per NodeSet keeps working), else none. It is copied onto the pod (slurmd
//!   registers with it when it starts again) and set on the Slurm node, when the cluster
//!   configures a topology ([`configures_topology`]; Slinky sets it on every cluster, and
//!   Slurm refuses it where none is configured, so a node annotated for one cluster would
//!   stop the others on the same Kubernetes nodes).
//! - Features: each comma-separated token becomes the Slurm feature `k8s/<token>`, available
//!   and active. The operator owns only that prefix: every other feature (the NodeSet's own,
//!   `extraConf`'s, a `NodeFeaturesPlugins` plugin's, an administrator's) is kept, and removing
//!   the annotation removes only the `k8s/` ones. A token that is not a plain feature name
//!   (letters, digits, `.`, `_`, `-`, `+`, `:`; at most [`MAX_FEATURE_LEN`] bytes) is skipped,
//!   since Slurm reads `,&|[]()*!` in constraints, and at most [`MAX_FEATURES`] are taken: the
//!   annotation is written by whoever may annotate nodes. A topology that is not plain
//!   (letters, digits, `.` `_` `-` `:` `,`; at most [`MAX_TOPOLOGY_LEN`] bytes) is not taken
//!   either; the template's (or none) applies then.

use std::collections::BTreeSet;

use slurm_client::model::Node;

/// The prefix of the features the operator owns.
pub const FEATURE_PREFIX: &str = "k8s/";
/// The longest feature token taken from an annotation.
pub const MAX_FEATURE_LEN: usize = 64;
/// The most feature tokens taken from one annotation.
pub const MAX_FEATURES: usize = 32;
/// The longest topology taken from an annotation.
pub const MAX_TOPOLOGY_LEN: usize = 256;

/// What the Kubernetes node under a pod asks of its Slurm node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wanted {
    /// The topology ("" for none).
    pub topology: String,
    /// The `k8s/` features, prefixed, sorted.
    pub features: BTreeSet<String>,
    /// What of the annotations was not taken (feature tokens, a topology), shortened.
    pub rejected: Vec<String>,
}

impl Wanted {
    /// From the node's topology and features annotations and the pod template's topology.
    pub fn from_annotations(
        node_topology: Option<&str>,
        template_topology: Option<&str>,
        node_features: Option<&str>,
    ) -> Wanted {
        let mut wanted = Wanted::default();
        let node_topology = node_topology.map(str::trim).filter(|t| {
            let plain = is_topology(t);
            if !plain {
                wanted.rejected.push(t.chars().take(80).collect());
            }
            plain
        });
        wanted.topology = node_topology
            .or(template_topology.map(str::trim))
            .unwrap_or_default()
            .to_owned();
        for token in node_features
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            if wanted.features.len() < MAX_FEATURES && is_feature_name(token) {
                wanted.features.insert(format!("{FEATURE_PREFIX}{token}"));
            } else {
                wanted.rejected.push(token.chars().take(80).collect());
            }
        }
        wanted
    }
}

/// Topology plugins that place no node.
const FLAT_TOPOLOGY: [&str; 2] = ["topology/flat", "topology/default"];

/// Whether a Controller configures a network topology: a `TopologyPlugin` other than the flat
/// one in `extra_conf`, or a `topology.yaml`/`topology.conf` among its configuration files.
pub fn configures_topology<'a>(
    extra_conf: &str,
    mut config_files: impl Iterator<Item = &'a str>,
) -> bool {
    let plugin = extra_conf.lines().any(|line| {
        let line = line.split('#').next().unwrap_or_default();
        line.split_whitespace().any(|token| {
            token.split_once('=').is_some_and(|(k, v)| {
                k.eq_ignore_ascii_case("TopologyPlugin")
                    && !v.is_empty()
                    && !FLAT_TOPOLOGY.iter().any(|f| v.eq_ignore_ascii_case(f))
            })
        })
    });
    plugin || config_files.any(|f| f == "topology.yaml" || f == "topology.conf")
}

/// A plain topology spec (`topo-switch:s1,topo-block:b1`).
fn is_topology(spec: &str) -> bool {
    spec.len() <= MAX_TOPOLOGY_LEN
        && spec
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | ','))
}

/// A plain Slurm feature name.
fn is_feature_name(token: &str) -> bool {
    token.len() <= MAX_FEATURE_LEN
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | ':'))
}

/// An update of one Slurm node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSync {
    pub node: String,
    /// The new topology (`""` takes the node out of it); `None` leaves it.
    pub topology: Option<String>,
    /// New available and active features; `None` leaves them.
    pub features: Option<(Vec<String>, Vec<String>)>,
}

/// The update that brings `node` to `wanted`, or `None` when it is there. `topology_known`:
/// the Slurm node reports a topology field (REST v0.0.43+); older releases have none to set.
pub fn node_sync(node: &Node, wanted: &Wanted, topology_known: bool) -> Option<NodeSync> {
    let current_topology = node.topology.as_deref().unwrap_or_default();
    let topology =
        (topology_known && current_topology != wanted.topology).then(|| wanted.topology.clone());
    let replace = |current: &[String]| -> Vec<String> {
        let mut set: BTreeSet<String> = current
            .iter()
            .filter(|f| !f.starts_with(FEATURE_PREFIX))
            .cloned()
            .collect();
        set.extend(wanted.features.iter().cloned());
        set.into_iter().collect()
    };
    let same = |current: &[String], new: &[String]| {
        current.iter().collect::<BTreeSet<_>>() == new.iter().collect::<BTreeSet<_>>()
    };
    let available = replace(&node.features);
    let active = replace(&node.active_features);
    let features = (!same(&node.features, &available) || !same(&node.active_features, &active))
        .then_some((available, active));
    (topology.is_some() || features.is_some()).then(|| NodeSync {
        node: node.name.clone(),
        topology,
        features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(topology: Option<&str>, features: &[&str], active: &[&str]) -> Node {
        let mut n = Node::default();
        n.name = "slinky-0".into();
        n.topology = topology.map(str::to_owned);
        n.features = strings(features);
        n.active_features = strings(active);
        n
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_configured_topology() {
        let none = std::iter::empty();
        assert!(configures_topology(
            "TopologyPlugin=topology/tree",
            none.clone()
        ));
        assert!(configures_topology(
            "SchedulerType=sched/backfill topologyplugin=topology/block",
            none.clone()
        ));
        for conf in [
            "TopologyPlugin=topology/flat",
            "TopologyPlugin=topology/default",
            "# TopologyPlugin=topology/tree",
            "TopologyParam=SwitchAsNodeRank",
        ] {
            assert!(!configures_topology(conf, none.clone()), "{conf}");
        }
        assert!(configures_topology(
            "",
            ["cgroup.conf", "topology.yaml"].into_iter()
        ));
        assert!(!configures_topology("", ["cgroup.conf"].into_iter()));
    }

    #[test]
    fn wanted_from_the_annotations() {
        let w = Wanted::from_annotations(Some("topo-switch:s1"), Some("x:y"), Some(" nn-1, a,,b "));
        assert_eq!(w.topology, "topo-switch:s1");
        assert_eq!(
            w.features.iter().collect::<Vec<_>>(),
            ["k8s/a", "k8s/b", "k8s/nn-1"]
        );
        assert!(w.rejected.is_empty());
        assert_eq!(
            Wanted::from_annotations(None, Some("x:y"), None).topology,
            "x:y"
        );
        assert_eq!(
            Wanted::from_annotations(None, None, None),
            Wanted::default()
        );
        // The node's annotation wins even when empty: a node taken out of the topology.
        assert_eq!(
            Wanted::from_annotations(Some(""), Some("x:y"), None).topology,
            ""
        );
    }

    #[test]
    fn hostile_feature_tokens_are_skipped() {
        let long = "x".repeat(MAX_FEATURE_LEN + 1);
        let annotation = format!("ok,a|b,c&d,(e),f g,{long},gpu:a100");
        let w = Wanted::from_annotations(None, None, Some(&annotation));
        assert_eq!(
            w.features.iter().collect::<Vec<_>>(),
            ["k8s/gpu:a100", "k8s/ok"]
        );
        assert_eq!(w.rejected.len(), 5, "{:?}", w.rejected);
        let many: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        let w = Wanted::from_annotations(None, None, Some(&many.join(",")));
        assert_eq!(w.features.len(), MAX_FEATURES);
        assert_eq!(w.rejected.len(), 100 - MAX_FEATURES);
        // A topology that is not plain is not taken: the template's applies.
        let w = Wanted::from_annotations(Some("t:s1 x=y"), Some("t:s2"), None);
        assert_eq!((w.topology.as_str(), w.rejected.len()), ("t:s2", 1));
        let long = "t".repeat(MAX_TOPOLOGY_LEN + 1);
        assert_eq!(
            Wanted::from_annotations(Some(&long), None, None).topology,
            ""
        );
    }

    #[test]
    fn table() {
        let wanted = |topology: &str, features: &[&str]| Wanted {
            topology: topology.into(),
            features: features.iter().map(|f| (*f).to_owned()).collect(),
            rejected: Vec::new(),
        };
        #[allow(clippy::type_complexity)]
        let cases: &[(
            &str,
            Node,
            Wanted,
            bool,
            Option<(Option<&str>, Option<(&[&str], &[&str])>)>,
        )] = &[
            (
                "in step",
                node(Some("t:s1"), &["slinky", "k8s/a"], &["slinky", "k8s/a"]),
                wanted("t:s1", &["k8s/a"]),
                true,
                None,
            ),
            (
                "a new topology",
                node(Some("t:s1"), &["slinky"], &["slinky"]),
                wanted("t:s2", &[]),
                true,
                Some((Some("t:s2"), None)),
            ),
            (
                "topology taken out",
                node(Some("t:s1"), &["slinky"], &["slinky"]),
                wanted("", &[]),
                true,
                Some((Some(""), None)),
            ),
            (
                "no topology field (Slurm 24.11): left alone",
                node(None, &["slinky"], &["slinky"]),
                wanted("t:s2", &[]),
                false,
                None,
            ),
            (
                "k8s/ features replaced, the others kept (active follows available)",
                node(
                    None,
                    &["slinky", "GPU", "k8s/old", "admin"],
                    &["slinky", "GPU", "k8s/old"],
                ),
                wanted("", &["k8s/new"]),
                true,
                Some((
                    None,
                    Some((
                        &["GPU", "admin", "k8s/new", "slinky"],
                        &["GPU", "k8s/new", "slinky"],
                    )),
                )),
            ),
            (
                "annotation removed: only k8s/ features go",
                node(None, &["slinky", "k8s/a"], &["slinky", "k8s/a"]),
                wanted("", &[]),
                true,
                Some((None, Some((&["slinky"], &["slinky"])))),
            ),
            (
                "order does not matter",
                node(None, &["k8s/a", "slinky"], &["slinky", "k8s/a"]),
                wanted("", &["k8s/a"]),
                true,
                None,
            ),
        ];
        for (what, node, wanted, known, want) in cases {
            let got = node_sync(node, wanted, *known);
            let want = want.map(|(topology, features)| NodeSync {
                node: "slinky-0".into(),
                topology: topology.map(str::to_owned),
                features: features.map(|(a, b)| (strings(a), strings(b))),
            });
            assert_eq!(got, want, "{what}");
        }
    }
}
