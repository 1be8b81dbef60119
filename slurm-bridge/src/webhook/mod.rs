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
        let verdict = match (&req.operation, req.old_object.as_ref()) {
            (Operation::Create, _) => rules::validate_create(pod),
            (Operation::Update, Some(old)) => rules::validate_update(old, pod),
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
