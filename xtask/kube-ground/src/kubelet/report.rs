//! What a pod worker tells the API server about its pod, shared by the test kubelet's workers and
//! the hollow nodes' ([`crate::hollow`]): the status, written only when it changed; events; and
//! the end of a deleted pod (its running containers counted as killed, the object removed).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource};
use kube_ground::runtime::PodRef;

use super::status::{self, Exit, PodRun, Record, Run};

/// What was last written of one pod's status, so that only changes are written.
#[derive(Default)]
pub struct StatusWriter {
    pushed: Option<serde_json::Value>,
    transitions: BTreeMap<String, (String, Timestamp)>,
}

impl StatusWriter {
    /// Writes the status `run` gives when it changed (conditions keep their transition times),
    /// and keeps what the API server answered in `pod`. Returns whether it wrote.
    pub async fn push(&mut self, client: &Client, pod: &mut Pod, run: &PodRun) -> bool {
        let Some(spec) = pod.spec.as_ref() else {
            return false;
        };
        let mut st = status::compute(spec, run, Timestamp::now(), gates_ok(pod));
        if let Some(conds) = st.conditions.as_mut() {
            for c in conds.iter_mut() {
                keep_transition(&mut self.transitions, c);
            }
        }
        // Pushed before, and the API server still shows it: another writer (a controller's
        // merge patch of the conditions) may have replaced what was pushed, which the real
        // kubelet corrects at its next sync too.
        let shown = conditions_shown(&st, pod.status.as_ref());
        let body = serde_json::json!({ "status": st });
        if self.pushed.as_ref() == Some(&body) && shown {
            return false;
        }
        let pod_ref = pod_ref(pod);
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod_ref.namespace);
        match api
            .patch_status(
                &pod_ref.name,
                &PatchParams::default(),
                &Patch::Strategic(&body),
            )
            .await
        {
            Ok(p) => {
                pod.status = p.status;
                self.pushed = Some(body);
            }
            Err(e) => tracing::warn!(pod = %pod_ref, "writing the pod status: {e}"),
        }
        true
    }
}

pub fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Every readiness gate of the pod has its condition True.
fn gates_ok(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.readiness_gates.as_ref())
        .into_iter()
        .flatten()
        .all(|g| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == g.condition_type && c.status == "True")
                })
        })
}

/// Whether every condition of `computed` has the same status in `current`.
fn conditions_shown(computed: &PodStatus, current: Option<&PodStatus>) -> bool {
    let current = current.and_then(|s| s.conditions.as_ref());
    computed.conditions.iter().flatten().all(|c| {
        current.is_some_and(|cs| {
            cs.iter()
                .any(|o| o.type_ == c.type_ && o.status == c.status)
        })
    })
}

fn keep_transition(seen: &mut BTreeMap<String, (String, Timestamp)>, c: &mut PodCondition) {
    match seen.get(&c.type_) {
        Some((status, at)) if *status == c.status => c.last_transition_time = Some(Time(*at)),
        _ => {
            let at = c
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
                .unwrap_or_else(Timestamp::now);
            seen.insert(c.type_.clone(), (c.status.clone(), at));
        }
    }
}

/// Publishes an event about `pod` (its note cut to 1,000 characters); a failure is only logged.
pub async fn event(recorder: &Recorder, pod: &Pod, type_: EventType, reason: &str, note: &str) {
    let reference = pod.object_ref(&());
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: reason.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &reference).await {
        tracing::debug!("publishing an event: {e}");
    }
}

/// Marks every container still running as killed (137), as they are at a pod's deletion.
pub fn kill_running<'a>(records: impl Iterator<Item = &'a mut Record>) {
    let now = Timestamp::now();
    for r in records {
        if let Run::Running { since } = r.run {
            r.run = Run::Exited(Exit {
                code: 137,
                reason: "Error".into(),
                started: since,
                finished: now,
                message: String::new(),
            });
            r.ready = false;
        }
    }
}

/// A deleted pod's failure, unless every main container had already exited 0: as the kubelet
/// does since Kubernetes 1.27, a deleted pod ends in a terminal phase before its object goes, so
/// that controllers holding a finalizer (slurm-bridge) see that it no longer runs.
pub fn deletion_failure<'a>(
    mut main: impl Iterator<Item = &'a Record>,
) -> Option<(String, String)> {
    let all_zero = main.all(|r| matches!(&r.run, Run::Exited(e) if e.code == 0));
    (!all_zero).then(|| ("Terminated".into(), "The pod was deleted".into()))
}

/// Removes the pod's object once its worker is done with it (no grace left: the containers are
/// gone), unless it is already gone or was replaced by a pod of the same name.
pub async fn delete(client: &Client, pod_ref: &PodRef) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod_ref.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(pod_ref.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&pod_ref.name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => tracing::warn!(pod = %pod_ref, "deleting the pod: {e}"),
    }
}
