//! Reads a pod's workload root (its group object, or its controller chain up to the highest
//! kind the bridge knows) for the annotations and facts that shape its job.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};

use crate::workload::{RootFacts, RootKind, controller_of, first_root};

/// How far up an owner chain the bridge looks.
const MAX_DEPTH: usize = 8;

/// The facts of `pod`'s root: annotations of every object on the way up (higher ones win) and
/// the kind-specific facts of the first object that has them. An object the bridge may not read
/// (403) or that is gone (404) ends the walk; for the pods' PodGroup that is noted, since its
/// size is then unknown. Other errors are returned.
pub async fn facts(client: &Client, pod: &Pod) -> kube::Result<RootFacts> {
    let namespace = pod.namespace().unwrap_or_default();
    let mut facts = RootFacts::default();
    let mut next = first_root(pod);
    for _ in 0..MAX_DEPTH {
        let Some(root) = next.take() else { break };
        let (group, version, kind, plural) = root.kind.gvk();
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        let object = match api.get(&root.name).await {
            Ok(object) => object,
            Err(kube::Error::Api(e)) if matches!(e.code, 403 | 404) => {
                if root.kind == RootKind::PodGroup {
                    let why = if e.code == 404 {
                        "does not exist (yet)"
                    } else {
                        "may not be read by the bridge (403)"
                    };
                    facts.missing_group = Some(format!("PodGroup {namespace}/{} {why}", root.name));
                }
                break;
            }
            Err(e) => return Err(e),
        };
        let found = RootFacts::from_object(
            root.kind,
            object.annotations().clone(),
            &object.data["spec"],
        );
        facts.annotations.extend(found.annotations);
        facts.active_deadline_seconds = facts
            .active_deadline_seconds
            .or(found.active_deadline_seconds);
        facts.min_member = facts.min_member.or(found.min_member);
        facts.group_size = facts.group_size.or(found.group_size);
        next = controller_of(object.owner_references()).filter(|r| r.kind != RootKind::PodGroup);
    }
    Ok(facts)
}
