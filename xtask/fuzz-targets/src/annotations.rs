//! The bridge's pod annotations (`slurmjob.slinky.slurm.net/…`): read from two layers of
//! `key=value` lines (the pod's, then after a blank line its root object's).

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
