//! The default scheduler's stand-in: a pod of `default-scheduler` with no node is bound to the
//! Ready, schedulable node that fits it (nodeSelector, required node affinity, taints and
//! tolerations, cpu/memory/extended-resource requests) and runs the fewest pods. A pod nothing
//! fits gets `PodScheduled=False, Unschedulable` and is tried again every 3 s.
//!
//! Nodes and pods come from watches (reflector stores), not from a list per pod: with thousands
//! of pods (hollow nodes), listing every pod to place each one was the ground's bottleneck. A
//! binding is assumed at once, as kube-scheduler's cache does, until the pod store shows it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, PodSpec, Taint, Toleration};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::common::{self, Failed};

pub const NAME: &str = "default-scheduler";

struct Ctx {
    client: Client,
    nodes: Store<Node>,
    pods: Store<Pod>,
    /// Pods bound by this scheduler that the pod store may not show bound yet: uid → node.
    assumed: Mutex<HashMap<String, String>>,
}

pub async fn run(client: Client) -> anyhow::Result<()> {
    let (nodes, writer) = reflector::store();
    let node_watch = reflector::reflector(
        writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .for_each(|_| futures::future::ready(()));
    let controller = Controller::new(Api::<Pod>::all(client.clone()), watcher::Config::default());
    let ctx = Arc::new(Ctx {
        client,
        nodes,
        pods: controller.store(),
        assumed: Mutex::new(HashMap::new()),
    });
    let schedule = controller
        .run(
            |pod, ctx: Arc<Ctx>| async move { schedule(&pod, &ctx).await.map_err(Failed) },
            |pod, err, _| {
                tracing::warn!(pod = %pod.name_any(), "scheduling: {err}");
                Action::requeue(Duration::from_secs(3))
            },
            ctx,
        )
        .for_each(|_| futures::future::ready(()));
    futures::join!(node_watch, schedule);
    Ok(())
}

async fn schedule(pod: &Pod, ctx: &Ctx) -> anyhow::Result<Action> {
    let spec = pod.spec.as_ref();
    let ours = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|s| s == NAME);
    let unbound = spec.and_then(|s| s.node_name.as_ref()).is_none();
    let uid = pod.uid().unwrap_or_default();
    if !ours || !unbound || pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx.assumed.lock().expect("not poisoned").contains_key(&uid) {
        // Bound already; the store has not shown it yet.
        return Ok(Action::await_change());
    }
    ctx.nodes.wait_until_ready().await?;
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let picked = {
        let nodes = ctx.nodes.state();
        let pods = ctx.pods.state();
        let mut assumed = ctx.assumed.lock().expect("not poisoned");
        // What the store shows bound (or gone) needs assuming no more.
        let live: HashMap<&str, &Pod> = pods
            .iter()
            .filter_map(|p| Some((p.metadata.uid.as_deref()?, p.as_ref())))
            .collect();
        assumed.retain(|uid, _| {
            live.get(uid.as_str())
                .is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
        });
        let nodes: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
        let placed = pods.iter().map(|p| {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .or_else(|| {
                    assumed
                        .get(p.metadata.uid.as_deref().unwrap_or(""))
                        .cloned()
                });
            (node, p.as_ref())
        });
        let picked = pick_placed(pod, &nodes, placed);
        if let Ok(node) = &picked {
            assumed.insert(uid.clone(), node.clone());
        }
        picked
    };
    match picked {
        Ok(node) => {
            let binding = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            let r: Result<serde_json::Value, _> = api
                .create_subresource("binding", &name, &PostParams::default(), &binding)
                .await;
            if let Err(e) = common::benign(r) {
                ctx.assumed.lock().expect("not poisoned").remove(&uid);
                return Err(e);
            }
            tracing::info!(pod = %format!("{ns}/{name}"), %node, "bound");
            Ok(Action::await_change())
        }
        Err(why) => {
            let status = serde_json::json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": why,
            }]}});
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
                .await?;
            Ok(Action::requeue(Duration::from_secs(3)))
        }
    }
}

/// The node for `pod`, or why none fits (as kube-scheduler words it: `0/N nodes are available`).
#[cfg(test)]
fn pick(pod: &Pod, nodes: &[Node], pods: &[Pod]) -> Result<String, String> {
    let placed = pods.iter().map(|p| {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        (node, p)
    });
    let nodes: Vec<&Node> = nodes.iter().collect();
    pick_placed(pod, &nodes, placed)
}

/// The node for `pod`, or why none fits (as kube-scheduler words it: `0/N nodes are
/// available`); each pod comes with its node, which may be a binding it does not show yet.
fn pick_placed<'a>(
    pod: &Pod,
    nodes: &[&Node],
    pods: impl Iterator<Item = (Option<String>, &'a Pod)>,
) -> Result<String, String> {
    let mut by_node: HashMap<String, Vec<&Pod>> = HashMap::new();
    for (node, p) in pods {
        if let Some(node) = node
            && common::active(p)
        {
            by_node.entry(node).or_default().push(p);
        }
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(usize, String)> = None;
    for node in nodes {
        let name = node.name_any();
        let on_node = by_node.get(&name).map(Vec::as_slice).unwrap_or_default();
        match fits(pod, node, on_node) {
            Ok(()) => {
                if best.as_ref().is_none_or(|(n, _)| on_node.len() < *n) {
                    best = Some((on_node.len(), name));
                }
            }
            Err(reason) => *reasons.entry(reason).or_default() += 1,
        }
    }
    best.map(|(_, n)| n).ok_or_else(|| {
        let why: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        format!("0/{} nodes are available: {}.", nodes.len(), why.join(", "))
    })
}

fn fits(pod: &Pod, node: &Node, on_node: &[&Pod]) -> Result<(), String> {
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);
    let labels = node.labels();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready {
        return Err("node(s) were not ready".into());
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Err("node(s) were unschedulable".into());
    }
    for (k, v) in spec.node_selector.iter().flatten() {
        if labels.get(k) != Some(v) {
            return Err("node(s) didn't match Pod's node affinity/selector".into());
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(req) = required {
        let any = req.node_selector_terms.iter().any(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .all(|e| matches_requirement(e, labels))
        });
        if !any {
            return Err("node(s) didn't match Pod's node affinity/selector".into());
        }
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    for taint in node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
    {
        if taint.effect != "PreferNoSchedule" && !tolerations.iter().any(|t| tolerates(t, taint)) {
            return Err(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.clone().unwrap_or_default()
            ));
        }
    }
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    for (res, q) in &allocatable {
        let Ok(have) = crate::kubelet::resources::parse(&q.0) else {
            continue;
        };
        if res == "pods" {
            if on_node.len() as f64 + 1.0 > have && !on_node.is_empty() {
                return Err("Too many pods".into());
            }
            continue;
        }
        // Only what the pod asks for is checked, as kube-scheduler's NodeResourcesFit does.
        let wanted = request(pod, res);
        if wanted <= 0.0 {
            continue;
        }
        let used: f64 = on_node.iter().map(|p| request(p, res)).sum();
        if used + wanted > have + 1e-9 {
            return Err(format!("Insufficient {res}"));
        }
    }
    for res in requested_names(pod) {
        if !allocatable.contains_key(&res) && request(pod, &res) > 0.0 {
            return Err(format!("Insufficient {res}"));
        }
    }
    Ok(())
}

fn requested_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.resources.iter())
        .flat_map(|r| r.requests.iter().flatten().chain(r.limits.iter().flatten()))
        .map(|(k, _)| k.clone())
        .collect()
}

/// A container's request of `res` (its limit when it sets no request), summed over containers.
fn request(pod: &Pod, res: &str) -> f64 {
    if res == "pods" {
        return 1.0;
    }
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| {
            let r = c.resources.as_ref()?;
            r.requests
                .as_ref()
                .and_then(|m| m.get(res))
                .or_else(|| r.limits.as_ref().and_then(|m| m.get(res)))
        })
        .filter_map(|q| crate::kubelet::resources::parse(&q.0).ok())
        .sum()
}

fn matches_requirement(e: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = e.values.clone().unwrap_or_default();
    let v = labels.get(&e.key);
    match e.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                v.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if e.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    match t.key.as_deref().filter(|k| !k.is_empty()) {
        None => t.operator.as_deref() == Some("Exists"),
        Some(key) if key != taint.key => false,
        Some(_) => match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, extra: serde_json::Value) -> Node {
        let mut n = serde_json::json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"}},
        });
        json_merge(&mut n, extra);
        serde_json::from_value(n).unwrap()
    }

    fn json_merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    json_merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut p = serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}});
        json_merge(&mut p, serde_json::json!({"spec": spec}));
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn taints_selectors_and_resources_decide() {
        let nodes = vec![
            node(
                "a",
                serde_json::json!({"spec": {"taints": [{"key": "slinky.slurm.net/managed-node", "value": "slurm-bridge-scheduler", "effect": "NoExecute"}]}}),
            ),
            node("b", serde_json::json!({"spec": {"unschedulable": true}})),
            node(
                "c",
                serde_json::json!({"metadata": {"labels": {"gpu": "yes"}}}),
            ),
        ];
        assert_eq!(
            pick(&pod(serde_json::json!({})), &nodes, &[]),
            Ok("c".into())
        );
        let tolerant = pod(
            serde_json::json!({"tolerations": [{"key": "slinky.slurm.net/managed-node", "operator": "Exists"}], "nodeSelector": {"kubernetes.io/hostname": "a"}}),
        );
        assert_eq!(pick(&tolerant, &nodes, &[]), Ok("a".into()));
        let greedy = pod(
            serde_json::json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}),
        );
        let why = pick(&greedy, &nodes, &[]).unwrap_err();
        assert!(why.starts_with("0/3 nodes are available:"), "{why}");
        assert!(why.contains("1 Insufficient nvidia.com/gpu"), "{why}");
        assert!(why.contains("1 node(s) were unschedulable"), "{why}");
    }
}
