//! The bridge's Mutating- and ValidatingWebhookConfiguration (what the chart installs, and what
//! `--webhook-self-signed` creates when missing). Unlike Slinky's, whose selector only leaves out
//! `kube-system` (so a bridge that is down blocks every pod of the cluster), the configurations
//! select only the managed namespaces: a listed `managedNamespaces` becomes a
//! `kubernetes.io/metadata.name In (…)` selector, a `managedNamespaceSelector` is used as it is.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube_support::webhook::Endpoint;

use super::{MUTATE_PATH, VALIDATE_PATH};
use crate::config::Config;

/// The configurations' name (both kinds).
pub const CONFIGURATION_NAME: &str = "slurm-bridge";
/// The webhooks' names end with this.
pub const WEBHOOK_SUFFIX: &str = ".slurm-bridge.slinky.slurm.net";

fn namespace_selector(config: &Config) -> LabelSelector {
    match &config.managed_namespace_selector {
        Some(s) => LabelSelector {
            match_labels: Some(s.match_labels.clone()).filter(|m| !m.is_empty()),
            match_expressions: Some(
                s.match_expressions
                    .iter()
                    .map(|r| LabelSelectorRequirement {
                        key: r.key.clone(),
                        operator: r.operator.clone(),
                        values: Some(r.values.clone()).filter(|v| !v.is_empty()),
                    })
                    .collect::<Vec<_>>(),
            )
            .filter(|e| !e.is_empty()),
        },
        None => LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "In".into(),
                values: Some(config.managed_namespaces.clone()),
            }]),
            match_labels: None,
        },
    }
}

fn rule(operations: &[&str]) -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["v1".into()]),
        operations: Some(operations.iter().map(|o| o.to_string()).collect()),
        resources: Some(vec!["pods".into()]),
        scope: Some("Namespaced".into()),
    }]
}

fn meta() -> ObjectMeta {
    ObjectMeta {
        name: Some(CONFIGURATION_NAME.into()),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".into(),
            "slurm-bridge".into(),
        )])),
        ..ObjectMeta::default()
    }
}

/// The mutating configuration calling `endpoint`.
pub fn mutating(
    config: &Config,
    endpoint: &Endpoint,
    ca: Option<&[u8]>,
) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: meta(),
        webhooks: Some(vec![MutatingWebhook {
            name: format!("mutate-pod{WEBHOOK_SUFFIX}"),
            admission_review_versions: vec!["v1".into()],
            client_config: endpoint.client_config(MUTATE_PATH, ca),
            failure_policy: Some("Fail".into()),
            namespace_selector: Some(namespace_selector(config)),
            rules: Some(rule(&["CREATE"])),
            side_effects: "None".into(),
            timeout_seconds: Some(10),
            reinvocation_policy: Some("IfNeeded".into()),
            ..MutatingWebhook::default()
        }]),
    }
}

/// The validating configuration calling `endpoint`.
pub fn validating(
    config: &Config,
    endpoint: &Endpoint,
    ca: Option<&[u8]>,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: meta(),
        webhooks: Some(vec![ValidatingWebhook {
            name: format!("validate-pod{WEBHOOK_SUFFIX}"),
            admission_review_versions: vec!["v1".into()],
            client_config: endpoint.client_config(VALIDATE_PATH, ca),
            failure_policy: Some("Fail".into()),
            namespace_selector: Some(namespace_selector(config)),
            rules: Some(rule(&["CREATE", "UPDATE"])),
            side_effects: "None".into(),
            timeout_seconds: Some(10),
            ..ValidatingWebhook::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_only_managed_namespaces() {
        let config = Config::default();
        let endpoint = Endpoint::Url("https://127.0.0.1:9443".into());
        let m = mutating(&config, &endpoint, None);
        let selector = m.webhooks.unwrap()[0].namespace_selector.clone().unwrap();
        let expr = &selector.match_expressions.unwrap()[0];
        assert_eq!(expr.key, "kubernetes.io/metadata.name");
        assert_eq!(expr.values.as_deref().unwrap(), ["slurm-bridge"]);
    }
}
