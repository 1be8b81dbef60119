//! Events on the objects a controller acts on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};

/// Publishes an event on `obj`; a failure to publish is logged, never returned (an event is
/// worth less than the work it reports).
pub async fn publish<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    obj: &K,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) {
    let reference: ObjectReference = obj.object_ref(&());
    send(recorder, &reference, event(warning, reason, action, note)).await;
}

/// [`publish`] in a task of its own: the caller's next request does not wait for the event's
/// round trip (a scheduler binding pods one after another).
pub fn publish_detached<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    obj: &K,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) {
    let reference: ObjectReference = obj.object_ref(&());
    let event = event(warning, reason, action, note);
    let recorder = recorder.clone();
    tokio::spawn(async move { send(&recorder, &reference, event).await });
}

fn event(warning: bool, reason: &str, action: &str, note: String) -> Event {
    Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    }
}

async fn send(recorder: &Recorder, reference: &ObjectReference, event: Event) {
    if let Err(e) = recorder.publish(&event, reference).await {
        tracing::warn!(error = %e, reason = %event.reason, "cannot publish event");
    }
}
