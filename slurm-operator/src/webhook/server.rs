//! The admission endpoints: decode an AdmissionReview, check that it is about an object of the
//! namespace it names, look up what the kind's rules need (see [`super::lookup`]), validate,
//! answer.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::config::{KINDS, path};
use super::lookup::{DEFAULT_TIMEOUT, Looked, lookup_time};
use super::validate;
use super::verdict::{Lookups, Verdict};
use crate::crd::{Accounting, Controller, GROUP, LoginSet, NodeSet, RestApi, Token};

/// An AdmissionReview holds the object twice (new and old); objects go up to 1.5 MiB.
const MAX_BODY: usize = 8 << 20;

/// The router: `POST /validate-slinky-slurm-net-v1beta1-<kind>` per kind, `GET /healthz`, for
/// the default webhook timeout of 10 s.
pub fn router(client: kube::Client) -> Router {
    router_with_timeout(client, DEFAULT_TIMEOUT)
}

/// [`router`] for an API server that gives each review `timeout` (the configuration's
/// `timeoutSeconds`): the lookups of a review end in time for the answer to make it.
pub fn router_with_timeout(client: kube::Client, timeout: Duration) -> Router {
    let within = lookup_time(timeout);
    let mut router = Router::new().route("/healthz", get(|| async { "ok" }));
    for (kind, _) in KINDS {
        router = router.route(
            &path(kind),
            post(
                move |State(client): State<kube::Client>, body: Bytes| async move {
                    let review = review_within(kind, &client, &body, within).await;
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

/// [`review_within`] the lookup time of the default webhook timeout.
#[allow(dead_code)] // The entry point of tests (and of fuzzing) that need no other deadline.
async fn review(kind: &str, client: &kube::Client, body: &[u8]) -> AdmissionReview<DynamicObject> {
    review_within(kind, client, body, lookup_time(DEFAULT_TIMEOUT)).await
}

/// The answer to `body` at the endpoint of `kind`, its lookups given `within` in all.
async fn review_within(
    kind: &str,
    client: &kube::Client,
    body: &[u8],
    within: Duration,
) -> AdmissionReview<DynamicObject> {
    let by = Instant::now() + within;
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
            decide::<Controller>(&req, client, by, validate::validate_controller).await
        }
        (Operation::Create | Operation::Update, "nodeset") => {
            decide::<NodeSet>(&req, client, by, validate::validate_nodeset).await
        }
        (Operation::Create | Operation::Update, "loginset") => {
            decide::<LoginSet>(&req, client, by, validate::validate_loginset).await
        }
        (Operation::Create | Operation::Update, "restapi") => {
            decide::<RestApi>(&req, client, by, validate::validate_restapi).await
        }
        (Operation::Create | Operation::Update, "accounting") => {
            decide::<Accounting>(&req, client, by, validate::validate_accounting).await
        }
        (Operation::Create | Operation::Update, "token") => {
            decide::<Token>(&req, client, by, validate::validate_token).await
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

/// Decodes the request's objects as `K`, checks they are of the request's namespace, fetches
/// what the rules need there by `by`, validates.
async fn decide<K>(
    req: &AdmissionRequest<DynamicObject>,
    client: &kube::Client,
    by: Instant,
    validate: fn(&K, Option<&K>, &Lookups) -> Verdict,
) -> Verdict
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Looked,
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
    let ns = match same_namespace(
        req.namespace.as_deref(),
        new.meta(),
        old.as_ref().map(|o| o.meta()),
    ) {
        Ok(ns) => ns,
        Err(why) => return deny(why),
    };
    let found = if new.meta().deletion_timestamp.is_some() {
        Lookups::default()
    } else {
        new.lookups(old.as_ref(), client, ns, by).await
    };
    validate(&new, old.as_ref(), &found)
}

/// The namespace the lookups of a review may read: the request's, which the object (and the
/// old object) must be in. Anyone who reaches the webhook can send a review; one that names a
/// namespace and carries an object of another would otherwise have the webhook read (and name
/// in its answer) what the first holds. Such a review is refused and nothing is looked up.
pub(super) fn same_namespace<'a>(
    request: Option<&'a str>,
    object: &kube::api::ObjectMeta,
    old: Option<&kube::api::ObjectMeta>,
) -> Result<&'a str, String> {
    let ns = request.filter(|n| !n.is_empty()).ok_or(
        "the request names no namespace (every kind validated here is namespaced); nothing was \
         looked up",
    )?;
    for (which, meta) in [("object", Some(object)), ("oldObject", old)] {
        let theirs = meta.and_then(|m| m.namespace.as_deref());
        if let Some(theirs) = theirs.filter(|t| *t != ns) {
            return Err(format!(
                "{which}.metadata.namespace: {theirs:?} is not the request's namespace {ns:?}; \
                 lookups are made only in the namespace of the object under review, so nothing \
                 was looked up"
            ));
        }
    }
    Ok(ns)
}

fn deny(message: impl Into<String>) -> Verdict {
    Verdict {
        allowed: false,
        message: message.into(),
        warnings: Vec::new(),
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

    /// A TCP server that takes connections, counts them and never answers: a hung API server.
    async fn hanging_api_server() -> (kube::Client, std::sync::Arc<std::sync::atomic::AtomicUsize>)
    {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(conn);
            }
        });
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        (client, accepted)
    }

    /// Three ConfigMaps and a claim to look up from an API server that never answers: all are
    /// asked at once and given up together at the deadline, and the answer names each.
    #[tokio::test]
    async fn lookups_end_together_at_the_deadline() {
        let (client, accepted) = hanging_api_server().await;
        let c = object(
            "Controller",
            json!({
                "configFileRefs": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                "ha": {"enabled": true},
                "persistence": {"existingClaim": "state"},
            }),
        );
        let body = request("Controller", "CREATE", c, Value::Null);
        let start = std::time::Instant::now();
        let review = review_within("controller", &client, &body, Duration::from_millis(800)).await;
        let took = start.elapsed();
        let r = serde_json::to_value(review).unwrap()["response"].take();
        // One after another, four lookups would take 3.2 s.
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(took >= Duration::from_millis(800), "{took:?}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert_eq!(r["allowed"], false);
        let msg = r["status"]["message"].as_str().unwrap();
        for field in [
            "configFileRefs[0]",
            "configFileRefs[1]",
            "configFileRefs[2]",
        ] {
            assert!(
                msg.contains(&format!("spec.{field}.name: could not check ConfigMap")),
                "{msg}"
            );
        }
        assert!(msg.contains("within the review's lookup deadline"), "{msg}");
    }

    /// A review whose object is of another namespace than the request names is refused, and
    /// nothing is looked up (the API server is never asked).
    #[tokio::test]
    async fn lookups_only_in_the_namespace_of_the_object() {
        let (client, accepted) = hanging_api_server().await;
        let mut c = object(
            "Controller",
            json!({"configFileRefs": [{"name": "kubeadm-config"}]}),
        );
        c["metadata"]["namespace"] = json!("kube-system");
        let body = request("Controller", "CREATE", c.clone(), Value::Null);
        let review = review_within("controller", &client, &body, Duration::from_secs(5)).await;
        let r = serde_json::to_value(review).unwrap()["response"].take();
        assert_eq!(r["allowed"], false);
        assert_eq!(
            r["status"]["message"],
            "object.metadata.namespace: \"kube-system\" is not the request's namespace \"slurm\"; \
             lookups are made only in the namespace of the object under review, so nothing was \
             looked up"
        );

        // The old object too; and a request without a namespace.
        let mut mine = c.clone();
        mine["metadata"]["namespace"] = json!("slurm");
        let body = request("Controller", "UPDATE", mine, c.clone());
        let review = review_within("controller", &client, &body, Duration::from_secs(5)).await;
        let r = serde_json::to_value(review).unwrap()["response"].take();
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("oldObject.metadata.namespace: \"kube-system\""),
            "{r}"
        );
        let mut body: Value = serde_json::from_slice(&request(
            "Token",
            "CREATE",
            object("Token", json!({"username": "slurm"})),
            Value::Null,
        ))
        .unwrap();
        body["request"].as_object_mut().unwrap().remove("namespace");
        let review = review_within(
            "token",
            &client,
            &serde_json::to_vec(&body).unwrap(),
            Duration::from_secs(5),
        )
        .await;
        let r = serde_json::to_value(review).unwrap()["response"].take();
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("the request names no namespace"),
            "{r}"
        );
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn same_namespace_rule() {
        let meta = |ns: Option<&str>| kube::api::ObjectMeta {
            namespace: ns.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(same_namespace(Some("a"), &meta(Some("a")), None), Ok("a"));
        assert_eq!(
            same_namespace(Some("a"), &meta(Some("a")), Some(&meta(Some("a")))),
            Ok("a")
        );
        // An object without one takes the request's (a create body need not carry it).
        assert_eq!(same_namespace(Some("a"), &meta(None), None), Ok("a"));
        assert!(same_namespace(Some("a"), &meta(Some("b")), None).is_err());
        assert!(same_namespace(Some("a"), &meta(Some("a")), Some(&meta(Some("b")))).is_err());
        assert!(same_namespace(None, &meta(Some("a")), None).is_err());
        assert!(same_namespace(Some(""), &meta(None), None).is_err());
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
