//! Taking over the StatefulSets and Deployments another operator made (Slinky's, when a user
//! moves to this one) without restarting their pods behind the user's back.
//!
//! A workload without our applied-hash annotation is not ours. Before it is applied, a dry-run
//! apply shows what the apply would make of it: when its pod template and immutable fields stay
//! as they are, it is applied (and is ours from then on); when they change, the pods would
//! restart (a new template rolls them; an immutable field means deleting the workload and making
//! it again), so nothing is written until the resource carries `slurm-rs/adopt: restart`. Held
//! workloads are named in the resource's `Adopted` condition and in a Warning event. Only the
//! workloads are held: ConfigMaps, Secrets, Services and budgets change in place.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::apply::{DESIRED_HASH, FIELD_MANAGER, apply, body, with_hash};
use super::cache::Cached;
use super::conditions::Wanted;
use super::{Context, Error};
use crate::keys::{ADOPT_RESTART, ANNOTATION_ADOPT};

/// The condition naming what was not taken over.
pub const ADOPTED: &str = "Adopted";
/// `Adopted=False`: a workload's pod template differs; applying it restarts its pods.
pub const RESTART_REQUIRED: &str = "RestartRequired";
/// `Adopted=False`: a workload's immutable field differs; it must be made again.
pub const RECREATE_REQUIRED: &str = "RecreateRequired";
/// The Warning event of a held workload.
pub const ADOPTION_PENDING: &str = "AdoptionPending";

/// What applying our version of a workload another operator made would do to its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing: template and immutable fields stay.
    InPlace,
    /// The pod template changes (the paths that differ): the pods roll.
    Restart(Vec<String>),
    /// Immutable fields change (their paths, or the API server's refusal).
    Recreate(Vec<String>),
}

/// The fields of `kind` that cannot change once made.
fn immutable_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "StatefulSet" => &[
            "selector",
            "serviceName",
            "podManagementPolicy",
            "volumeClaimTemplates",
        ],
        "Deployment" => &["selector"],
        _ => &[],
    }
}

/// Compares the live workload with what the dry-run apply made of it (both as JSON).
pub fn verdict(kind: &str, live: &Value, planned: &Value) -> Verdict {
    let spec = |v: &Value, field: &str| {
        let value = v.pointer(&format!("/spec/{field}")).cloned();
        match (field, value) {
            // The claims' names and specs; their status and metadata the server fills are not
            // part of what is made.
            ("volumeClaimTemplates", Some(Value::Array(claims))) => Some(Value::Array(
                claims
                    .into_iter()
                    .map(|c| serde_json::json!([c.pointer("/metadata/name"), c.get("spec")]))
                    .collect(),
            )),
            (_, value) => value,
        }
    };
    let immutable: Vec<String> = immutable_fields(kind)
        .iter()
        .filter(|f| spec(live, f) != spec(planned, f))
        .map(|f| format!("spec.{f}"))
        .collect();
    if !immutable.is_empty() {
        return Verdict::Recreate(immutable);
    }
    let mut paths = Vec::new();
    diff(
        "spec.template",
        live.pointer("/spec/template").unwrap_or(&Value::Null),
        planned.pointer("/spec/template").unwrap_or(&Value::Null),
        &mut paths,
    );
    if paths.is_empty() {
        Verdict::InPlace
    } else {
        Verdict::Restart(paths)
    }
}

/// The paths (not the values) where `a` and `b` differ; list items by their `name` when they
/// have one.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                diff(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                let name = p.get("name").and_then(Value::as_str);
                let key = match name {
                    Some(n) if q.get("name").and_then(Value::as_str) == Some(n) => n.to_owned(),
                    _ => i.to_string(),
                };
                diff(&format!("{path}[{key}]"), p, q, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

/// A workload left as another operator made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub kind: &'static str,
    pub name: String,
    pub verdict: Verdict,
}

impl Held {
    fn describe(&self) -> String {
        const SHOWN: usize = 6;
        let list = |paths: &[String]| {
            let mut s = paths
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if paths.len() > SHOWN {
                s.push_str(&format!(" and {} more", paths.len() - SHOWN));
            }
            s
        };
        match &self.verdict {
            Verdict::Recreate(paths) => format!(
                "{} {} was made by another operator and differs in {} (immutable): taking it over deletes it, keeping its pods, and makes it again, which restarts them",
                self.kind,
                self.name,
                list(paths)
            ),
            Verdict::Restart(paths) => format!(
                "{} {} was made by another operator and its pod template differs at {}: taking it over restarts its pods",
                self.kind,
                self.name,
                list(paths)
            ),
            Verdict::InPlace => format!("{} {} can be taken over", self.kind, self.name),
        }
    }
}

/// Whether `obj` carries `slurm-rs/adopt: restart`.
pub fn restart_allowed<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_ADOPT))
        .is_some_and(|v| v == ADOPT_RESTART)
}

fn ours(meta: &kube::api::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(DESIRED_HASH))
}

/// [`apply`] for a StatefulSet or Deployment of `owner`: one another operator made is taken
/// over only when that leaves its pods alone, or when `owner` allows the restart; otherwise it
/// is left as it is and returned.
pub async fn apply_workload<O, K>(
    ctx: &Context,
    owner: &O,
    desired: K,
) -> Result<Option<Held>, Error>
where
    O: Resource<DynamicType = ()>,
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Cached
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let namespace = desired.namespace().ok_or(Error::Unnamed)?;
    let name = desired.meta().name.clone().ok_or(Error::Unnamed)?;
    if K::live(&ctx.cache, &namespace, &name).is_none_or(|m| ours(&m)) {
        apply(ctx, desired).await?;
        return Ok(None);
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(live) = api.get_opt(&name).await? else {
        apply(ctx, desired).await?;
        return Ok(None);
    };
    if ours(live.meta()) {
        apply(ctx, desired).await?;
        return Ok(None);
    }
    let kind = K::kind(&()).into_owned();
    let mut wanted = desired.clone();
    with_hash(&mut wanted);
    let dry_run = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let verdict = match api
        .patch(&name, &dry_run, &Patch::Apply(body(&wanted)?))
        .await
    {
        Ok(planned) => verdict(
            &kind,
            &serde_json::to_value(&live).unwrap_or_default(),
            &serde_json::to_value(&planned).unwrap_or_default(),
        ),
        // A real API server refuses a change of an immutable field, also in a dry run.
        Err(kube::Error::Api(e)) if e.code == 422 => Verdict::Recreate(vec![e.message]),
        Err(e) => return Err(e.into()),
    };
    let kind: &'static str = if kind == "StatefulSet" {
        "StatefulSet"
    } else {
        "Deployment"
    };
    let held = Held {
        kind,
        name: name.clone(),
        verdict,
    };
    match &held.verdict {
        Verdict::InPlace => {
            apply(ctx, desired).await?;
        }
        _ if !restart_allowed(owner) => return Ok(Some(held)),
        Verdict::Restart(_) => {
            // A whole replacement, not an apply: what only the other operator set goes too.
            wanted.meta_mut().resource_version = live.resource_version();
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            api.replace(&name, &params, &wanted).await?;
            taken_over(ctx, owner, &held).await;
        }
        Verdict::Recreate(_) => {
            // Its pods stay (orphaned) and the new workload takes them over.
            api.delete(
                &name,
                &DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Orphan),
                    ..DeleteParams::default()
                },
            )
            .await?;
            taken_over(ctx, owner, &held).await;
            apply(ctx, desired).await?;
        }
    }
    Ok(None)
}

async fn taken_over<O: Resource<DynamicType = ()>>(ctx: &Context, owner: &O, held: &Held) {
    ctx.event(
        owner,
        false,
        ADOPTED,
        "Adopt",
        format!(
            "took over {} {} as {ANNOTATION_ADOPT}: {ADOPT_RESTART} allows: {}",
            held.kind,
            held.name,
            held.describe()
        ),
    )
    .await;
}

/// The conditions of a pass over `obj` that ended with `result` (the workloads it held):
/// `Synced`, and `Adopted` as [`report`] decides.
pub async fn conditions<K>(ctx: &Context, obj: &K, result: Result<&[Held], &Error>) -> Vec<Wanted>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let mut synced = Wanted::synced(result.map(|_| ()));
    let Ok(held) = result else {
        return vec![synced];
    };
    if !held.is_empty() {
        synced.message =
            "all child objects are as specified but the workloads the Adopted condition names"
                .into();
    }
    let mut wanted = vec![synced];
    wanted.extend(report(ctx, obj, held).await);
    wanted
}

/// The `Adopted` condition for `obj` after a pass that held `held` (see [`settle`]).
pub async fn report<K>(ctx: &Context, obj: &K, held: &[Held]) -> Option<Wanted>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    announce(ctx, obj, pending(held, &K::kind(&()))).await
}

/// [`settle`] against `obj`'s current `Adopted` condition; a new or changed `False` also goes
/// out as a Warning event.
pub async fn announce<K>(ctx: &Context, obj: &K, pending: Option<Wanted>) -> Option<Wanted>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let current: Option<Condition> = serde_json::to_value(obj)
        .ok()?
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == ADOPTED));
    let wanted = settle(pending, current.as_ref())?;
    let changed = current
        .as_ref()
        .is_none_or(|c| c.status != wanted.status || c.message != wanted.message);
    if wanted.status == "False" && changed {
        ctx.event(obj, true, ADOPTION_PENDING, "Adopt", wanted.message.clone())
            .await;
    }
    Some(wanted)
}

/// `pending` when something is held; else `True` once nothing is held any more after something
/// was; nothing for a resource that never had another operator's workloads.
pub fn settle(pending: Option<Wanted>, current: Option<&Condition>) -> Option<Wanted> {
    pending.or_else(|| {
        current.filter(|c| c.status != "True").map(|_| Wanted {
            type_: ADOPTED.into(),
            status: "True",
            reason: ADOPTED.into(),
            message: "every child another operator made is now this operator's".into(),
        })
    })
}

/// `Adopted=False` naming the held workloads; `kind` is the resource's, for the message.
pub fn pending(held: &[Held], kind: &str) -> Option<Wanted> {
    if held.is_empty() {
        return None;
    }
    let recreate = held
        .iter()
        .any(|h| matches!(h.verdict, Verdict::Recreate(_)));
    let what: Vec<String> = held.iter().map(Held::describe).collect();
    Some(Wanted {
        type_: ADOPTED.into(),
        status: "False",
        reason: if recreate {
            RECREATE_REQUIRED
        } else {
            RESTART_REQUIRED
        }
        .into(),
        message: format!(
            "{}; left running as it is. Annotate the {kind} {ANNOTATION_ADOPT}={ADOPT_RESTART} to take it over",
            what.join("; ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(service: &str, annotation: &str) -> Value {
        json!({"spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "slurmctld"}},
            "serviceName": service,
            "podManagementPolicy": "Parallel",
            "volumeClaimTemplates": [{
                "metadata": {"name": "statesave", "namespace": "slurm"},
                "spec": {"resources": {"requests": {"storage": "4Gi"}}},
                "status": {"phase": "Pending"},
            }],
            "template": {
                "metadata": {"annotations": {"h": annotation}},
                "spec": {"containers": [{"name": "slurmctld", "image": "x"}]},
            },
        }})
    }

    #[test]
    fn same_template_and_immutable_fields_apply_in_place() {
        let mut planned = sts("slurm-controller", "a");
        // Claim metadata the server fills, and fields outside the template, do not count.
        planned["spec"]["volumeClaimTemplates"][0]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        planned["spec"]["replicas"] = json!(1);
        assert_eq!(
            verdict("StatefulSet", &sts("slurm-controller", "a"), &planned),
            Verdict::InPlace
        );
    }

    #[test]
    fn a_template_change_restarts_and_names_the_paths() {
        let mut planned = sts("slurm-controller", "b");
        planned["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-D"]);
        assert_eq!(
            verdict("StatefulSet", &sts("slurm-controller", "a"), &planned),
            Verdict::Restart(vec![
                "spec.template.metadata.annotations.h".into(),
                "spec.template.spec.containers[slurmctld].args".into(),
            ])
        );
    }

    #[test]
    fn an_immutable_change_needs_a_recreate() {
        let live = sts("slurm-controller-internal", "a");
        let planned = sts("slurm-controller", "b");
        assert_eq!(
            verdict("StatefulSet", &live, &planned),
            Verdict::Recreate(vec!["spec.serviceName".into()])
        );
        // A Deployment's service name is no field of it.
        assert_eq!(
            verdict("Deployment", &live, &sts("slurm-controller", "a")),
            Verdict::InPlace
        );
    }

    #[test]
    fn condition_names_the_workloads_and_clears_once_taken_over() {
        let held = [Held {
            kind: "StatefulSet",
            name: "slurm-controller".into(),
            verdict: Verdict::Recreate(vec!["spec.serviceName".into()]),
        }];
        let c = settle(pending(&held, "Controller"), None).unwrap();
        assert_eq!((c.status, c.reason.as_str()), ("False", RECREATE_REQUIRED));
        assert!(
            c.message.contains("StatefulSet slurm-controller"),
            "{}",
            c.message
        );
        assert!(c.message.contains("spec.serviceName"), "{}", c.message);
        assert!(
            c.message
                .contains("Annotate the Controller slurm-rs/adopt=restart"),
            "{}",
            c.message
        );
        // Never held: no condition at all.
        assert_eq!(settle(pending(&[], "Controller"), None), None);
        let was = Condition {
            type_: ADOPTED.into(),
            status: "False".into(),
            reason: RECREATE_REQUIRED.into(),
            message: c.message,
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::UNIX_EPOCH,
            ),
        };
        let now = settle(None, Some(&was)).unwrap();
        assert_eq!((now.status, now.reason.as_str()), ("True", ADOPTED));
    }
}
