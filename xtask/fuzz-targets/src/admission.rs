//! AdmissionReview bodies through both webhooks' validation, and `extraConf` through the
//! operator's. The operator's rules run as its server runs them (the object decoded as the
//! kind the review names), with empty lookups: the lookups are API reads, not parsing. The
//! bridge's rules run with its default configuration.

use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde::de::DeserializeOwned;
use slurm_operator::crd::{Accounting, Controller, LoginSet, NodeSet, RestApi, Token};
use slurm_operator::webhook::{self as hook, Lookups, Verdict};

/// Decodes `obj` as `K` and runs `validate` on it and the old object, as the operator's
/// webhook server does.
fn run<K: DeserializeOwned>(
    req: &AdmissionRequest<DynamicObject>,
    validate: fn(&K, Option<&K>, &Lookups) -> Verdict,
) {
    let decode = |obj: &Option<DynamicObject>| -> Option<K> {
        serde_json::to_value(obj.as_ref()?)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
    };
    let Some(new) = decode(&req.object) else {
        return;
    };
    let old = decode(&req.old_object);
    let verdict = validate(&new, old.as_ref(), &Lookups::default());
    // An answer is always a decision: a denial says why.
    assert!(verdict.allowed || !verdict.message.is_empty());
}

/// An AdmissionReview body for the operator's webhook, dispatched on the kind it names.
pub fn operator_review(data: &[u8]) {
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(data) else {
        return;
    };
    let Ok(req): Result<AdmissionRequest<DynamicObject>, _> = review.try_into() else {
        return;
    };
    match req.kind.kind.to_ascii_lowercase().as_str() {
        "controller" => run::<Controller>(&req, hook::validate_controller),
        "nodeset" => run::<NodeSet>(&req, hook::validate_nodeset),
        "loginset" => run::<LoginSet>(&req, hook::validate_loginset),
        "restapi" => run::<RestApi>(&req, hook::validate_restapi),
        "accounting" => run::<Accounting>(&req, hook::validate_accounting),
        "token" => run::<Token>(&req, hook::validate_token),
        _ => {}
    }
}

/// An AdmissionReview body of a Pod for the bridge's webhook: the mutation and, as for a pod
/// that names the bridge, the create/update validation and the identity policy.
pub fn bridge_review(data: &[u8]) {
    use slurm_bridge::webhook::rules;
    let Ok(review) = serde_json::from_slice::<AdmissionReview<Pod>>(data) else {
        return;
    };
    let Ok(req): Result<AdmissionRequest<Pod>, _> = review.try_into() else {
        return;
    };
    let Some(pod) = req.object.as_ref() else {
        return;
    };
    let config = slurm_bridge::config::Config::default();
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let _ = rules::mutate(pod, &config.scheduler_name);
    let _ = rules::validate_create(pod);
    let _ = rules::validate_identity(&config, namespace, pod, None);
    if let Some(old) = req.old_object.as_ref() {
        let _ = rules::validate_update(old, pod);
        let _ = rules::validate_identity(&config, namespace, pod, Some(old));
    }
}

/// `data` as the `extraConf` of a Controller (slurm.conf lines), an Accounting
/// (slurmdbd.conf lines) and a NodeSet (slurmd `--conf` tokens).
pub fn extra_conf(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let object = |kind: &str| {
        serde_json::json!({
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "slurm"},
            "spec": {"extraConf": text},
        })
    };
    let check = |verdict: Verdict| assert!(verdict.allowed || !verdict.message.is_empty());
    let none = Lookups::default();
    if let Ok(c) = serde_json::from_value::<Controller>(object("Controller")) {
        check(hook::validate_controller(&c, None, &none));
    }
    if let Ok(a) = serde_json::from_value::<Accounting>(object("Accounting")) {
        check(hook::validate_accounting(&a, None, &none));
    }
    if let Ok(n) = serde_json::from_value::<NodeSet>(object("NodeSet")) {
        check(hook::validate_nodeset(&n, None, &none));
    }
}
