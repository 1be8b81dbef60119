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
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &reference).await {
        tracing::warn!(error = %e, reason, "cannot publish event");
    }
}
