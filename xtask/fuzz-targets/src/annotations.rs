//! Annotations from outside: the bridge's pod annotations (`slurmjob.slinky.slurm.net/…`),
//! read from two layers of `key=value` lines (the pod's, then after a blank line its root
//! object's), and the operator's Kubernetes node annotations (topology and features).

use std::collections::BTreeMap;

/// Reads `data` as annotation layers and the job fields from them.
pub fn bridge_annotations(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let layers: Vec<BTreeMap<String, String>> = text
        .split("\n\n")
        .take(2)
        .map(|layer| {
            layer
                .lines()
                .map(|line| match line.split_once('=') {
                    Some((k, v)) => (k.to_owned(), v.to_owned()),
                    None => (line.to_owned(), String::new()),
                })
                .collect()
        })
        .collect();
    let refs: Vec<&BTreeMap<String, String>> = layers.iter().collect();
    let _ = slurm_bridge::annotations::job_fields_with_sources(&refs);
}

/// Reads `data` as three lines — a node's topology annotation, the template's topology and a
/// node's features annotation — and plans the Slurm node update from them against a node whose
/// features are the fourth line (comma-separated). Panics when what the operator would write
/// breaks its rules: a feature outside `k8s/` changed, a `k8s/` feature that is not plain, more
/// than the cap, or a topology that is neither plain nor the template's.
pub fn node_annotations(data: &[u8]) {
    use slurm_operator::planner::node_sync::{self, FEATURE_PREFIX, MAX_FEATURES, Wanted};
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let mut next = || lines.next().filter(|l| !l.is_empty());
    let (node_topology, template, features, current) = (next(), next(), next(), next());
    let wanted = Wanted::from_annotations(node_topology, template, features);
    assert!(wanted.features.len() <= MAX_FEATURES);
    let plain = |s: &str, extra: &[char]| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_:".contains(c) || extra.contains(&c))
    };
    for f in &wanted.features {
        let name = f.strip_prefix(FEATURE_PREFIX).expect("prefixed");
        assert!(!name.is_empty() && plain(name, &['+']), "{f:?}");
    }
    assert!(
        Some(wanted.topology.as_str()) == template.map(str::trim)
            || plain(&wanted.topology, &[',']),
        "{:?}",
        wanted.topology
    );
    let mut node = slurm_client::model::Node::default();
    node.name = "n".into();
    node.features = current
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect();
    node.active_features = node.features.clone();
    if let Some(sync) = node_sync::node_sync(&node, &wanted, true) {
        let kept = |v: &[String]| -> Vec<String> {
            let mut k: Vec<String> = v
                .iter()
                .filter(|f| !f.starts_with(FEATURE_PREFIX))
                .cloned()
                .collect();
            k.sort();
            k.dedup();
            k
        };
        if let Some((available, active)) = sync.features {
            assert_eq!(kept(&available), kept(&node.features));
            assert_eq!(kept(&active), kept(&node.active_features));
        }
    }
}
