//! The ValidatingWebhookConfiguration that sends the six kinds' CREATE and UPDATE requests to
//! the webhook server (the self-signed mode writes its `caBundle` with
//! [`kube_support::webhook::inject_ca_bundle`]).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube_support::webhook::Endpoint;

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

/// What the names of the operator's webhooks end with (`.` and [`GROUP`]): the self-signed mode
/// writes the `caBundle` of these in an existing configuration.
pub const WEBHOOK_SUFFIX: &str = ".slinky.slurm.net";

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
            client_config: endpoint.client_config(&path(kind), ca_bundle),
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
    }

    /// The self-signed mode creates a missing configuration from `configuration(ep, None)`
    /// with the CA put into every `*.slinky.slurm.net` webhook: all six, as if made with it.
    #[test]
    fn the_self_signed_ca_reaches_every_webhook() {
        assert_eq!(WEBHOOK_SUFFIX, format!(".{GROUP}"));
        let ep = Endpoint::parse_service("slurm-operator-webhook.slinky").unwrap();
        let mut fresh = configuration(&ep, None);
        assert_eq!(
            kube_support::webhook::set_ca_bundle(&mut fresh, WEBHOOK_SUFFIX, b"PEM"),
            KINDS.len()
        );
        assert_eq!(fresh, configuration(&ep, Some(b"PEM")));
    }
}
