//! The ValidatingWebhookConfiguration that sends the six kinds' CREATE and UPDATE requests to
//! the webhook server, and the `caBundle` update of the self-signed mode.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::api::{Api, PostParams};

use crate::crd::{GROUP, VERSION};

/// The configuration's name (as in Slinky's chart).
pub const CONFIGURATION_NAME: &str = "slurm-operator-webhook";

/// `(kind in lower case, plural)` of the validated kinds.
pub const KINDS: [(&str, &str); 6] = [
    ("controller", "controllers"),
    ("nodeset", "nodesets"),
    ("loginset", "loginsets"),
    ("restapi", "restapis"),
    ("accounting", "accountings"),
    ("token", "tokens"),
];

/// The server path of a kind's webhook (Slinky's).
pub fn path(kind: &str) -> String {
    format!("/validate-slinky-slurm-net-{VERSION}-{kind}")
}

/// The name of a kind's webhook in the configuration.
pub fn webhook_name(kind: &str) -> String {
    format!("{kind}.{GROUP}")
}

/// How the API server reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The Service in front of the operator (in-cluster; the usual case).
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    /// A base URL such as `https://127.0.0.1:9443` (an API server outside the cluster network,
    /// e.g. the test ground's); each kind's path is appended.
    Url(String),
}

impl Endpoint {
    /// `<name>.<namespace>[:<port>]`, port 443 by default.
    pub fn parse_service(text: &str) -> anyhow::Result<Endpoint> {
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .map_err(|_| anyhow::anyhow!("not a port: {p:?}"))?,
            ),
            None => (text, 443),
        };
        let Some((name, namespace)) = host.split_once('.') else {
            anyhow::bail!("expected <name>.<namespace>[:<port>], got {text:?}");
        };
        if name.is_empty() || namespace.is_empty() || namespace.contains('.') {
            anyhow::bail!("expected <name>.<namespace>[:<port>], got {text:?}");
        }
        Ok(Endpoint::Service {
            namespace: namespace.into(),
            name: name.into(),
            port,
        })
    }

    /// The names the serving certificate must hold for the API server to accept it.
    pub fn certificate_names(&self) -> anyhow::Result<Vec<String>> {
        match self {
            Endpoint::Service {
                namespace, name, ..
            } => Ok(vec![
                format!("{name}.{namespace}.svc"),
                name.clone(),
                format!("{name}.{namespace}"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ]),
            Endpoint::Url(url) => {
                let uri: axum::http::Uri = url
                    .parse()
                    .map_err(|e| anyhow::anyhow!("not a URL: {url:?}: {e}"))?;
                if uri.scheme_str() != Some("https") {
                    anyhow::bail!("the webhook URL must be https://, got {url:?}");
                }
                let host = uri
                    .host()
                    .ok_or_else(|| anyhow::anyhow!("no host in {url:?}"))?;
                Ok(vec![
                    host.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                ])
            }
        }
    }

    fn client_config(&self, kind: &str, ca_bundle: Option<&[u8]>) -> WebhookClientConfig {
        let ca_bundle = ca_bundle.map(|b| ByteString(b.to_vec()));
        match self {
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path(kind)),
                    port: Some(*port),
                }),
                ca_bundle,
                url: None,
            },
            Endpoint::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{}", base.trim_end_matches('/'), path(kind))),
                ca_bundle,
                service: None,
            },
        }
    }
}

/// The configuration: one webhook per kind named `<kind>.slinky.slurm.net`, CREATE and UPDATE,
/// failurePolicy Fail, sideEffects None, AdmissionReview v1, 10 s timeout, every namespace but
/// kube-system and kube-public. `ca_bundle` is the PEM of the CA that signed the serving
/// certificate (`None`: left to cert-manager's CA injector).
pub fn configuration(
    endpoint: &Endpoint,
    ca_bundle: Option<&[u8]>,
) -> ValidatingWebhookConfiguration {
    let webhooks = KINDS
        .iter()
        .map(|(kind, plural)| ValidatingWebhook {
            name: webhook_name(kind),
            client_config: endpoint.client_config(kind, ca_bundle),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![GROUP.into()]),
                api_versions: Some(vec![VERSION.into()]),
                operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                resources: Some(vec![(*plural).into()]),
                scope: Some("Namespaced".into()),
            }]),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            timeout_seconds: Some(10),
            namespace_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "kubernetes.io/metadata.name".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["kube-system".into(), "kube-public".into()]),
                }]),
                match_labels: None,
            }),
            // The API server's default, spelled out: an absent selector matches nothing to
            // the webhook dispatcher, and a server that skips defaulting (the test ground's)
            // would then never call the webhook.
            object_selector: Some(LabelSelector::default()),
            match_conditions: None,
        })
        .collect();
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(CONFIGURATION_NAME.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "slurm-operator".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        webhooks: Some(webhooks),
    }
}

/// Puts `ca_pem` into the `caBundle` of every `*.slinky.slurm.net` webhook of the configuration
/// `name`, or creates the configuration from [`configuration`] when it does not exist. Anything
/// else in an existing configuration (selectors, policies, set by a chart) is kept. Retries
/// until it succeeds.
pub async fn inject_ca_bundle(
    client: kube::Client,
    name: &str,
    endpoint: &Endpoint,
    ca_pem: &[u8],
) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let mut delay = Duration::from_millis(500);
    loop {
        match try_inject(&api, name, endpoint, ca_pem).await {
            Ok(()) => {
                tracing::info!(configuration = name, "webhook: caBundle written");
                return;
            }
            Err(e) => {
                tracing::warn!(configuration = name, error = %e, "webhook: cannot write the caBundle; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

async fn try_inject(
    api: &Api<ValidatingWebhookConfiguration>,
    name: &str,
    endpoint: &Endpoint,
    ca_pem: &[u8],
) -> anyhow::Result<()> {
    let Some(mut existing) = api.get_opt(name).await? else {
        let mut fresh = configuration(endpoint, Some(ca_pem));
        fresh.metadata.name = Some(name.into());
        api.create(&PostParams::default(), &fresh).await?;
        return Ok(());
    };
    let suffix = format!(".{GROUP}");
    let mut ours = 0;
    for hook in existing.webhooks.iter_mut().flatten() {
        if hook.name.ends_with(&suffix) {
            hook.client_config.ca_bundle = Some(ByteString(ca_pem.to_vec()));
            ours += 1;
        }
    }
    if ours == 0 {
        anyhow::bail!("it has no *{suffix} webhook");
    }
    // `replace` carries the resourceVersion read above: a concurrent change fails and is retried.
    api.replace(name, &PostParams::default(), &existing).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_configuration() {
        let ep = Endpoint::parse_service("slurm-operator-webhook.slinky").unwrap();
        let c = configuration(&ep, Some(b"PEM"));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["metadata"]["name"], "slurm-operator-webhook");
        let hooks = json["webhooks"].as_array().unwrap();
        assert_eq!(hooks.len(), 6);
        let names: Vec<&str> = hooks.iter().map(|h| h["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "controller.slinky.slurm.net",
                "nodeset.slinky.slurm.net",
                "loginset.slinky.slurm.net",
                "restapi.slinky.slurm.net",
                "accounting.slinky.slurm.net",
                "token.slinky.slurm.net"
            ]
        );
        let h = &hooks[1];
        assert_eq!(
            h["clientConfig"],
            serde_json::json!({
                "service": {
                    "namespace": "slinky",
                    "name": "slurm-operator-webhook",
                    "path": "/validate-slinky-slurm-net-v1beta1-nodeset",
                    "port": 443
                },
                "caBundle": "UEVN"
            })
        );
        assert_eq!(
            h["rules"],
            serde_json::json!([{
                "apiGroups": ["slinky.slurm.net"],
                "apiVersions": ["v1beta1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["nodesets"],
                "scope": "Namespaced"
            }])
        );
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["objectSelector"], serde_json::json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["sideEffects"], "None");
        assert_eq!(h["admissionReviewVersions"], serde_json::json!(["v1"]));
        assert_eq!(
            h["namespaceSelector"]["matchExpressions"][0],
            serde_json::json!({
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-public"]
            })
        );
        assert_eq!(
            ep.certificate_names().unwrap(),
            [
                "slurm-operator-webhook.slinky.svc",
                "slurm-operator-webhook",
                "slurm-operator-webhook.slinky",
                "slurm-operator-webhook.slinky.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn url_configuration() {
        let ep = Endpoint::Url("https://127.0.0.1:9443/".into());
        let c = configuration(&ep, None);
        let h = &c.webhooks.as_ref().unwrap()[5];
        assert_eq!(
            h.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-slinky-slurm-net-v1beta1-token")
        );
        assert!(h.client_config.ca_bundle.is_none() && h.client_config.service.is_none());
        assert_eq!(ep.certificate_names().unwrap(), ["127.0.0.1"]);
        assert_eq!(
            Endpoint::Url("https://[::1]:9443".into())
                .certificate_names()
                .unwrap(),
            ["::1"]
        );
        assert!(
            Endpoint::Url("http://127.0.0.1:9443".into())
                .certificate_names()
                .is_err()
        );
    }

    #[test]
    fn service_parsing() {
        assert_eq!(
            Endpoint::parse_service("wh.ns:8443").unwrap(),
            Endpoint::Service {
                namespace: "ns".into(),
                name: "wh".into(),
                port: 8443
            }
        );
        for bad in ["wh", "wh.", ".ns", "wh.ns.svc", "wh.ns:x"] {
            assert!(Endpoint::parse_service(bad).is_err(), "{bad}");
        }
    }
}
