//! The admission webhook at Slinky's paths: `/mutate--v1-pod` hands pods of managed namespaces
//! to the bridge ([`rules::mutate`]), `/validate--v1-pod` refuses what the bridge cannot honour
//! ([`rules::validate_create`], [`rules::validate_update`]), each message naming the field.
//! A pod is managed when its namespace is listed in `managedNamespaces` (or matches
//! `managedNamespaceSelector`, which then replaces the list), or when it already names the
//! bridge's scheduler.

pub mod config;
pub mod rules;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};

use crate::config::Config;

/// The mutating endpoint's path.
pub const MUTATE_PATH: &str = "/mutate--v1-pod";
/// The validating endpoint's path.
pub const VALIDATE_PATH: &str = "/validate--v1-pod";
const MAX_BODY: usize = 8 << 20;

#[derive(Clone)]
struct Hooks {
    client: kube::Client,
    config: Arc<Config>,
}

/// The router of both endpoints (and `GET /healthz`).
pub fn router(client: kube::Client, config: Arc<Config>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            MUTATE_PATH,
            post(|State(h): State<Hooks>, body: Bytes| async move {
                respond(h.review(&body, true).await)
            }),
        )
        .route(
            VALIDATE_PATH,
            post(|State(h): State<Hooks>, body: Bytes| async move {
                respond(h.review(&body, false).await)
            }),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Hooks { client, config })
}

fn respond(review: AdmissionReview<DynamicObject>) -> impl IntoResponse {
    let json = serde_json::to_vec(&review).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], json)
}

impl Hooks {
    async fn review(&self, body: &[u8], mutating: bool) -> AdmissionReview<DynamicObject> {
        let review: AdmissionReview<Pod> = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return AdmissionResponse::invalid(format!("not an AdmissionReview of a Pod: {e}"))
                    .into_review();
            }
        };
        let req: AdmissionRequest<Pod> = match review.try_into() {
            Ok(r) => r,
            Err(_) => {
                return AdmissionResponse::invalid("the AdmissionReview has no request")
                    .into_review();
            }
        };
        let resp = AdmissionResponse::from(&req);
        let Some(pod) = req.object.as_ref() else {
            return resp.into_review();
        };
        let scheduler = self.config.scheduler_name.as_str();
        let names_us =
            pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some(scheduler);
        let managed = names_us
            || self
                .namespace_managed(req.namespace.as_deref().unwrap_or_default())
                .await;
        if !managed {
            return resp.into_review();
        }
        if mutating {
            if req.operation != Operation::Create {
                return resp.into_review();
            }
            let ops = rules::mutate(pod, scheduler);
            if ops.is_empty() {
                return resp.into_review();
            }
            return match resp.with_patch(json_patch::Patch(ops)) {
                Ok(resp) => resp.into_review(),
                Err(e) => AdmissionResponse::invalid(format!("cannot encode the patch: {e}"))
                    .into_review(),
            };
        }
        // Validation concerns the bridge's pods only (after the mutation, they name it).
        if !names_us {
            return resp.into_review();
        }
        let namespace = req.namespace.as_deref().unwrap_or_default();
        let verdict = match (&req.operation, req.old_object.as_ref()) {
            (Operation::Create, _) => rules::validate_create(pod)
                .and_then(|()| rules::validate_identity(&self.config, namespace, pod, None)),
            (Operation::Update, Some(old)) => rules::validate_update(old, pod)
                .and_then(|()| rules::validate_identity(&self.config, namespace, pod, Some(old))),
            _ => Ok(()),
        };
        match verdict {
            Ok(()) => resp.into_review(),
            Err(message) => {
                tracing::info!(pod = %format!("{}/{}", req.namespace.as_deref().unwrap_or_default(), pod.name_any()), %message, "webhook: denied");
                let mut resp = resp.deny(message);
                resp.result.code = 403;
                resp.result.reason = "Forbidden".into();
                resp.into_review()
            }
        }
    }

    /// Whether pods of `namespace` go to the bridge. When the selector needs the namespace's
    /// labels and they cannot be read, the pod is left alone (and the error logged): the API
    /// server then schedules it as usual instead of failing its creation.
    async fn namespace_managed(&self, namespace: &str) -> bool {
        match &self.config.managed_namespace_selector {
            None => self
                .config
                .managed_namespaces
                .iter()
                .any(|n| n == namespace),
            Some(selector) => {
                let api: Api<Namespace> = Api::all(self.client.clone());
                match api.get(namespace).await {
                    Ok(ns) => selector.matches(ns.labels()),
                    Err(e) => {
                        tracing::warn!(namespace, error = %e, "webhook: cannot read the namespace's labels; leaving the pod to its scheduler");
                        false
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn hooks() -> Hooks {
        hooks_with(Config::default())
    }

    fn hooks_with(config: Config) -> Hooks {
        let kube = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Hooks {
            client: kube::Client::try_from(kube).unwrap(),
            config: Arc::new(config),
        }
    }

    fn review(namespace: &str, operation: &str, pod: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "p",
                "namespace": namespace,
                "operation": operation,
                "userInfo": {},
                "object": pod,
            }
        }))
        .unwrap()
    }

    fn answer(review: AdmissionReview<DynamicObject>) -> Value {
        serde_json::to_value(review).unwrap()["response"].clone()
    }

    #[tokio::test]
    async fn managed_pods_are_handed_over_and_others_left_alone() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}});
        let r = answer(
            hooks()
                .review(&review("slurm-bridge", "CREATE", pod.clone()), true)
                .await,
        );
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        let r = answer(
            hooks()
                .review(&review("default", "CREATE", pod), true)
                .await,
        );
        assert_eq!(r["allowed"], true);
        assert!(r.get("patch").is_none() || r["patch"].is_null(), "{r}");
    }

    #[tokio::test]
    async fn a_bad_annotation_is_refused_naming_it() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"slurmjob.slinky.slurm.net/timelimit": "1h"}},
            "spec": {"containers": [], "schedulerName": "slurm-bridge-scheduler"}});
        let r = answer(
            hooks()
                .review(&review("slurm-bridge", "CREATE", pod), false)
                .await,
        );
        assert_eq!(r["allowed"], false);
        let message = r["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("slurmjob.slinky.slurm.net/timelimit"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn the_identity_policy_refuses_naming_annotation_value_and_namespace() {
        let config = Config::parse(
            "managedNamespaces: [ml, batch]\nidentityPolicy:\n  default: {userIds: []}\n  namespaces:\n    ml: {userIds: [\"1000-1999\"], maxPriority: 10}\n",
        )
        .unwrap();
        let hooks = hooks_with(config);
        let pod = |annotations: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "annotations": annotations},
                "spec": {"containers": [], "schedulerName": "slurm-bridge-scheduler"}})
        };
        let ask_root = pod(json!({"slurmjob.slinky.slurm.net/user-id": "0"}));
        let r = answer(
            hooks
                .review(&review("ml", "CREATE", ask_root.clone()), false)
                .await,
        );
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 403);
        assert_eq!(
            r["status"]["message"],
            "metadata.annotations[slurmjob.slinky.slurm.net/user-id]: user id 0 is not allowed \
             in namespace \"ml\" (identityPolicy.namespaces.ml.userIds allows 1000-1999)"
        );
        // The default's rules where the namespace has none of its own.
        let r = answer(
            hooks
                .review(&review("batch", "CREATE", ask_root), false)
                .await,
        );
        let message = r["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("identityPolicy.default.userIds is empty"),
            "{message}"
        );
        let fine = pod(json!({"slurmjob.slinky.slurm.net/user-id": "1500",
                              "slurmjob.slinky.slurm.net/priority": "10"}));
        let r = answer(hooks.review(&review("ml", "CREATE", fine), false).await);
        assert_eq!(r["allowed"], true, "{r}");
        let high = pod(json!({"slinky.slurm.net/priority": "11"}));
        let r = answer(hooks.review(&review("ml", "CREATE", high), false).await);
        let message = r["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("metadata.annotations[slinky.slurm.net/priority]: priority 11"),
            "{message}"
        );
    }
}
