//! The admission endpoints: decode an AdmissionReview, look up what the kind's rules need,
//! validate, answer.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::Api;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Resource};
use serde::de::DeserializeOwned;

use super::config::{KINDS, path};
use super::validate;
use super::verdict::{Lookup, Lookups, Verdict};
use crate::crd::{Accounting, Controller, GROUP, LoginSet, NodeSet, RestApi, Token};

/// Each lookup gets this long; the API server gives the whole call 10 s.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(4);
/// An AdmissionReview holds the object twice (new and old); objects go up to 1.5 MiB.
const MAX_BODY: usize = 8 << 20;

/// The router: `POST /validate-slinky-slurm-net-v1beta1-<kind>` per kind, `GET /healthz`.
pub fn router(client: kube::Client) -> Router {
    let mut router = Router::new().route("/healthz", get(|| async { "ok" }));
    for (kind, _) in KINDS {
        router = router.route(
            &path(kind),
            post(
                move |State(client): State<kube::Client>, body: Bytes| async move {
                    let review = review(kind, &client, &body).await;
                    let json = serde_json::to_vec(&review).unwrap_or_default();
                    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
                },
            ),
        );
    }
    router
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(client)
}

async fn review(kind: &str, client: &kube::Client, body: &[u8]) -> AdmissionReview<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return AdmissionResponse::invalid(format!("not an AdmissionReview: {e}"))
                .into_review();
        }
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            return AdmissionResponse::invalid("the AdmissionReview has no request").into_review();
        }
    };
    let verdict = match (&req.operation, kind) {
        (Operation::Create | Operation::Update, "controller") => {
            decide::<Controller, _, _>(
                &req,
                client,
                controller_lookups,
                validate::validate_controller,
            )
            .await
        }
        (Operation::Create | Operation::Update, "nodeset") => {
            decide::<NodeSet, _, _>(&req, client, nodeset_lookups, validate::validate_nodeset).await
        }
        (Operation::Create | Operation::Update, "loginset") => {
            decide::<LoginSet, _, _>(&req, client, no_lookups, validate::validate_loginset).await
        }
        (Operation::Create | Operation::Update, "restapi") => {
            decide::<RestApi, _, _>(&req, client, no_lookups, validate::validate_restapi).await
        }
        (Operation::Create | Operation::Update, "accounting") => {
            decide::<Accounting, _, _>(&req, client, no_lookups, validate::validate_accounting)
                .await
        }
        (Operation::Create | Operation::Update, "token") => {
            decide::<Token, _, _>(&req, client, no_lookups, validate::validate_token).await
        }
        _ => Verdict::allow(),
    };
    let ns = req.namespace.as_deref().unwrap_or_default();
    let object = format!("{ns}/{}", req.name);
    if verdict.allowed {
        tracing::debug!(kind, object, operation = ?req.operation, "webhook: allowed");
    } else {
        tracing::info!(kind, object, operation = ?req.operation, reason = verdict.message, "webhook: denied");
    }
    let mut resp = AdmissionResponse::from(&req);
    if !verdict.allowed {
        resp = resp.deny(&verdict.message);
        resp.result.code = 403;
        resp.result.reason = "Forbidden".into();
    }
    if !verdict.warnings.is_empty() {
        resp.warnings = Some(verdict.warnings);
    }
    resp.into_review()
}

/// Decodes the request's objects as `K`, fetches what the rules need, validates.
async fn decide<K, L, LF>(
    req: &AdmissionRequest<DynamicObject>,
    client: &kube::Client,
    lookups: L,
    validate: fn(&K, Option<&K>, &Lookups) -> Verdict,
) -> Verdict
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    L: FnOnce(kube::Client, String, K, Option<K>) -> LF,
    LF: Future<Output = (K, Option<K>, Lookups)>,
{
    if req.kind.group != GROUP || !req.kind.kind.eq_ignore_ascii_case(&K::kind(&())) {
        return deny(format!(
            "this endpoint validates {}.{GROUP}, got {}.{}",
            K::kind(&()),
            req.kind.kind,
            req.kind.group
        ));
    }
    let decode = |obj: &Option<DynamicObject>, which: &str| -> Result<Option<K>, Verdict> {
        let Some(obj) = obj else { return Ok(None) };
        let value = serde_json::to_value(obj).map_err(|e| deny(format!("{which}: {e}")))?;
        let mut k: K = serde_json::from_value(value)
            .map_err(|e| deny(format!("{which} is not a valid {}: {e}", K::kind(&()))))?;
        // The namespace comes from the request path; a create body need not carry it.
        if k.meta().namespace.is_none() {
            k.meta_mut().namespace = req.namespace.clone();
        }
        Ok(Some(k))
    };
    let new = match decode(&req.object, "object") {
        Ok(Some(k)) => k,
        Ok(None) => return deny("the request has no object"),
        Err(v) => return v,
    };
    let old = match decode(&req.old_object, "oldObject") {
        Ok(o) => o,
        Err(v) => return v,
    };
    let (new, old, found) = if new.meta().deletion_timestamp.is_some() {
        (new, old, Lookups::default())
    } else {
        let ns = req.namespace.clone().unwrap_or_default();
        lookups(client.clone(), ns, new, old).await
    };
    validate(&new, old.as_ref(), &found)
}

fn deny(message: impl Into<String>) -> Verdict {
    Verdict {
        allowed: false,
        message: message.into(),
        warnings: Vec::new(),
    }
}

async fn no_lookups<K>(
    _: kube::Client,
    _: String,
    new: K,
    old: Option<K>,
) -> (K, Option<K>, Lookups) {
    (new, old, Lookups::default())
}

async fn controller_lookups(
    client: kube::Client,
    ns: String,
    new: Controller,
    old: Option<Controller>,
) -> (Controller, Option<Controller>, Lookups) {
    let mut found = Lookups::default();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let names: BTreeSet<&str> = new
        .spec
        .config_file_refs
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    for name in names {
        let l = lookup(maps.get_opt(name), |cm: ConfigMap| {
            let data = cm.data.unwrap_or_default().into_keys();
            let binary = cm.binary_data.unwrap_or_default().into_keys();
            data.chain(binary).collect()
        })
        .await;
        found.config_maps.insert(name.to_string(), l);
    }
    if new.spec.ha.enabled
        && let Some(claim) = new.spec.existing_claim()
    {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, &ns);
        let l = lookup(claims.get_opt(claim), |pvc: PersistentVolumeClaim| {
            pvc.spec.and_then(|s| s.access_modes).unwrap_or_default()
        })
        .await;
        found.claims.insert(claim.to_string(), l);
    }
    (new, old, found)
}

async fn nodeset_lookups(
    client: kube::Client,
    ns: String,
    new: NodeSet,
    old: Option<NodeSet>,
) -> (NodeSet, Option<NodeSet>, Lookups) {
    let mut found = Lookups::default();
    let name = new.spec.controller_ref.name.as_str();
    if old.is_none() && !name.is_empty() {
        let controllers: Api<Controller> = Api::namespaced(client, &ns);
        let l = lookup(controllers.get_metadata_opt(name), |_| ()).await;
        found.controllers.insert(name.to_string(), l);
    }
    (new, old, found)
}

/// A GET turned into a [`Lookup`], with a time limit.
async fn lookup<T, U>(
    get: impl Future<Output = kube::Result<Option<T>>>,
    keep: impl FnOnce(T) -> U,
) -> Lookup<U> {
    match tokio::time::timeout(LOOKUP_TIMEOUT, get).await {
        Ok(Ok(Some(obj))) => Lookup::Found(keep(obj)),
        Ok(Ok(None)) => Lookup::NotFound,
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(_) => Lookup::Failed(format!(
            "no answer from the API server within {LOOKUP_TIMEOUT:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A client whose API server never answers: lookups fail.
    fn unreachable_client() -> kube::Client {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    fn request(kind: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "4f6b7c1e-0000-0000-0000-000000000001",
                "kind": {"group": "slinky.slurm.net", "version": "v1beta1", "kind": kind},
                "resource": {"group": "slinky.slurm.net", "version": "v1beta1", "resource": format!("{}s", kind.to_lowercase())},
                "name": "x",
                "namespace": "slurm",
                "operation": operation,
                "userInfo": {"username": "admin"},
                "object": object,
                "oldObject": old,
                "dryRun": false
            }
        }))
        .unwrap()
    }

    fn object(kind: &str, spec: Value) -> Value {
        json!({"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": {"name": "x"}, "spec": spec})
    }

    async fn answer(path_kind: &str, body: &[u8]) -> Value {
        let review = review(path_kind, &unreachable_client(), body).await;
        serde_json::to_value(review).unwrap()["response"].take()
    }

    #[tokio::test]
    async fn allows_denies_and_warns() {
        let token = object(
            "Token",
            json!({"jwtKeyRef": {"name": "jwt", "key": "jwt.key"}, "username": "slurm"}),
        );
        let r = answer(
            "token",
            &request("Token", "CREATE", token.clone(), Value::Null),
        )
        .await;
        assert_eq!(r["uid"], "4f6b7c1e-0000-0000-0000-000000000001");
        assert_eq!(r["allowed"], true);

        let changed = object(
            "Token",
            json!({"jwtKeyRef": {"name": "other", "key": "jwt.key"}, "username": "slurm"}),
        );
        let r = answer("token", &request("Token", "UPDATE", changed, token.clone())).await;
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["message"], "spec.jwtKeyRef: field is immutable");
        assert_eq!(r["status"]["code"], 403);

        let restapi = object(
            "RestApi",
            json!({"controllerRef": {"name": "slurm"}, "service": {"spec": {"externalIPs": ["1.2.3.4"]}}}),
        );
        let r = answer(
            "restapi",
            &request("RestApi", "CREATE", restapi, Value::Null),
        )
        .await;
        assert_eq!(r["allowed"], true);
        assert_eq!(r["warnings"].as_array().unwrap().len(), 1);

        // DELETE is not validated.
        let r = answer("token", &request("Token", "DELETE", Value::Null, token)).await;
        assert_eq!(r["allowed"], true);
    }

    #[tokio::test]
    async fn a_failed_lookup_denies_naming_what_was_not_checked() {
        let c = object("Controller", json!({"configFileRefs": [{"name": "extra"}]}));
        let r = answer(
            "controller",
            &request("Controller", "CREATE", c, Value::Null),
        )
        .await;
        assert_eq!(r["allowed"], false);
        let msg = r["status"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with("spec.configFileRefs[0].name: could not check ConfigMap \"extra\": "),
            "{msg}"
        );

        // Whether a NodeSet's Controller exists decides nothing (objects come in any order).
        let n = object("NodeSet", json!({"controllerRef": {"name": "slurm"}}));
        let r = answer("nodeset", &request("NodeSet", "CREATE", n, Value::Null)).await;
        assert_eq!(r["allowed"], true, "{r}");
    }

    /// The request of issue 23: Slinky's chart rendered with empty lists, the nulls kept by a
    /// CRD that marks them nullable (or sent straight to the webhook).
    #[tokio::test]
    async fn nulls_read_as_absent() {
        let c = object(
            "Controller",
            json!({
                "slurmKeyRef": {"name": "k", "key": "slurm.key"}, "jwtKeyRef": null,
                "jwtHs256KeyRef": {"name": "j", "key": "jwt.key"},
                "configFileRefs": null, "prologScriptRefs": null, "epilogScriptRefs": null,
                "template": {"metadata": {"labels": null}, "spec": null}, "extraConf": null,
                "persistence": {"enabled": null}, "metrics": {"serviceMonitor": null},
            }),
        );
        let r = answer(
            "controller",
            &request("Controller", "CREATE", c.clone(), Value::Null),
        )
        .await;
        assert_eq!(r["allowed"], true, "{r}");
        let r = answer("controller", &request("Controller", "UPDATE", c.clone(), c)).await;
        assert_eq!(r["allowed"], true, "{r}");
    }

    /// Written here in the shape Slinky's chart renders a Controller (Helm's sorted keys, nulls
    /// for unset values): 1.2's field set, and 1.3's, which adds `ha`. Both are accepted, and
    /// `ha` switched off draws no warning.
    #[tokio::test]
    async fn both_slinky_chart_versions_field_sets() {
        let v1_2 = json!({
            "configFileRefs": null,
            "epilogScriptRefs": null,
            "epilogSlurmctldScriptRefs": null,
            "extraConf": null,
            "jwtKeyRef": {"key": "jwt.key", "name": "slurm-auth-jwt"},
            "logfile": {"image": {"repository": "docker.io/library/alpine", "tag": "latest"}},
            "metrics": {"enabled": false, "serviceMonitor": {"enabled": false}},
            "persistence": {"enabled": true, "resources": {"requests": {"storage": "4Gi"}}},
            "prologScriptRefs": null,
            "prologSlurmctldScriptRefs": null,
            "service": {"spec": null},
            "slurmKeyRef": {"key": "slurm.key", "name": "slurm-auth-slurm"},
            "slurmctld": {"image": {"repository": "ghcr.io/slinkyproject/slurmctld", "tag": "26.05-ubuntu26.04"}},
            "template": {"metadata": {}, "spec": {"affinity": {}, "tolerations": []}},
        });
        let mut v1_3 = v1_2.clone();
        v1_3["ha"] = json!({"backups": 1, "enabled": false});
        for spec in [v1_2, v1_3] {
            let c = object("Controller", spec);
            let r = answer(
                "controller",
                &request("Controller", "CREATE", c.clone(), Value::Null),
            )
            .await;
            assert_eq!(r["allowed"], true, "{r}");
            let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
            assert!(
                warnings
                    .iter()
                    .all(|w| !w.as_str().unwrap_or("").contains("ha")),
                "{warnings:?}"
            );
        }
    }

    #[tokio::test]
    async fn malformed_requests() {
        let r = answer("token", b"{").await;
        assert_eq!(r["allowed"], false);
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("not an AdmissionReview")
        );

        let token = object("Token", json!({"username": "slurm"}));
        let r = answer("nodeset", &request("Token", "CREATE", token, Value::Null)).await;
        assert_eq!(
            r["status"]["message"],
            "this endpoint validates NodeSet.slinky.slurm.net, got Token.slinky.slurm.net"
        );

        let bad = object("Token", json!({"username": 7}));
        let r = answer("token", &request("Token", "CREATE", bad, Value::Null)).await;
        assert_eq!(r["allowed"], false);
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("object is not a valid Token: ")
        );
    }

    #[tokio::test]
    async fn routes() {
        use kube_support::tls::{ServingCert, TlsListener, self_signed, testing::https};
        let app = router(unreachable_client());
        let made = self_signed(super::super::CERT_NAME, &["127.0.0.1".into()]).unwrap();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let cert = ServingCert::new(made.key);
        tokio::spawn(axum::serve(TlsListener::new(tcp, cert).unwrap(), app).into_future());
        let body = request(
            "Token",
            "CREATE",
            object("Token", json!({"username": ""})),
            Value::Null,
        );
        let body = String::from_utf8(body).unwrap();
        let (resp, _) = https(
            port,
            &made.ca_pem,
            &format!(
                "POST /validate-slinky-slurm-net-v1beta1-token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        let json: Value = serde_json::from_str(resp.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(json["kind"], "AdmissionReview");
        assert_eq!(
            json["response"]["status"]["message"],
            "spec.username: must not be empty"
        );
    }
}
