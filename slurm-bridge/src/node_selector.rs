//! Kubernetes' node selector rules (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` on labels,
//! and `metadata.name` as the one field), shared by a pod's required node affinity and a
//! PersistentVolume's node affinity.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement};
use kube::ResourceExt;

/// Whether `node` matches `selector`: any of its terms, each of whose requirements all hold.
pub fn matches(selector: &NodeSelector, node: &Node) -> bool {
    let labels = node.labels();
    let name = node.name_any();
    selector.node_selector_terms.iter().any(|term| {
        term.match_expressions
            .iter()
            .flatten()
            .all(|r| requirement(r, labels.get(&r.key).map(String::as_str)))
            && term
                .match_fields
                .iter()
                .flatten()
                .all(|r| r.key == "metadata.name" && requirement(r, Some(name.as_str())))
    })
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}
