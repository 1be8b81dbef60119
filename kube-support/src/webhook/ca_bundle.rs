//! The self-signed mode's `caBundle`: the CA made at start written into the webhooks of a
//! Mutating- or ValidatingWebhookConfiguration, which is created when it does not exist.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Resource;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A webhook configuration kind: MutatingWebhookConfiguration or
/// ValidatingWebhookConfiguration.
pub trait WebhookConfiguration:
    Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Each webhook's name and client config.
    fn client_configs_mut(&mut self) -> Vec<(&str, &mut WebhookClientConfig)>;
}

impl WebhookConfiguration for ValidatingWebhookConfiguration {
    fn client_configs_mut(&mut self) -> Vec<(&str, &mut WebhookClientConfig)> {
        let hooks = self.webhooks.iter_mut().flatten();
        hooks
            .map(|h| (h.name.as_str(), &mut h.client_config))
            .collect()
    }
}

impl WebhookConfiguration for MutatingWebhookConfiguration {
    fn client_configs_mut(&mut self) -> Vec<(&str, &mut WebhookClientConfig)> {
        let hooks = self.webhooks.iter_mut().flatten();
        hooks
            .map(|h| (h.name.as_str(), &mut h.client_config))
            .collect()
    }
}

/// Puts `ca_pem` into the `caBundle` of every webhook of `configuration` whose name ends with
/// `webhook_suffix` (e.g. `.slinky.slurm.net`); returns how many it changed.
pub fn set_ca_bundle<C: WebhookConfiguration>(
    configuration: &mut C,
    webhook_suffix: &str,
    ca_pem: &[u8],
) -> usize {
    let mut ours = 0;
    for (name, client_config) in configuration.client_configs_mut() {
        if name.ends_with(webhook_suffix) {
            client_config.ca_bundle = Some(ByteString(ca_pem.to_vec()));
            ours += 1;
        }
    }
    ours
}

/// Puts `ca_pem` into the `caBundle` of every `*<webhook_suffix>` webhook of the configuration
/// `name` ([`set_ca_bundle`]), or creates it from `fresh` (renamed to `name`, with the same
/// `caBundle`s) when it does not exist. Anything else in an existing configuration (selectors,
/// policies, set by a chart) is kept. A configuration without such a webhook is an error. Retries,
/// backing off from 0.5 to 30 s, until it succeeds.
///
/// Needs get, create and update on the kind's resource (e.g. `validatingwebhookconfigurations`).
pub async fn inject_ca_bundle<C: WebhookConfiguration>(
    client: kube::Client,
    name: &str,
    webhook_suffix: &str,
    ca_pem: &[u8],
    fresh: C,
) {
    let api: Api<C> = Api::all(client);
    let mut delay = Duration::from_millis(500);
    loop {
        match try_inject(&api, name, webhook_suffix, ca_pem, &fresh).await {
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

async fn try_inject<C: WebhookConfiguration>(
    api: &Api<C>,
    name: &str,
    suffix: &str,
    ca_pem: &[u8],
    fresh: &C,
) -> anyhow::Result<()> {
    let (mut config, exists) = match api.get_opt(name).await? {
        Some(existing) => (existing, true),
        None => {
            let mut fresh = fresh.clone();
            fresh.meta_mut().name = Some(name.into());
            (fresh, false)
        }
    };
    if set_ca_bundle(&mut config, suffix, ca_pem) == 0 {
        anyhow::bail!("it has no *{suffix} webhook");
    }
    if exists {
        // `replace` carries the resourceVersion read above: a concurrent change fails and is
        // retried.
        api.replace(name, &PostParams::default(), &config).await?;
    } else {
        api.create(&PostParams::default(), &config).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, ValidatingWebhook};

    #[test]
    fn only_the_suffixed_webhooks_get_the_ca() {
        let mut validating = ValidatingWebhookConfiguration {
            webhooks: Some(
                ["a.example.com", "b.example.com", "c.other.io"]
                    .map(|name| ValidatingWebhook {
                        name: name.into(),
                        ..ValidatingWebhook::default()
                    })
                    .into(),
            ),
            ..ValidatingWebhookConfiguration::default()
        };
        assert_eq!(set_ca_bundle(&mut validating, ".example.com", b"PEM"), 2);
        let bundles: Vec<_> = validating
            .webhooks
            .unwrap()
            .into_iter()
            .map(|h| h.client_config.ca_bundle)
            .collect();
        assert_eq!(
            bundles,
            [
                Some(ByteString(b"PEM".to_vec())),
                Some(ByteString(b"PEM".to_vec())),
                None
            ]
        );

        let mut mutating = MutatingWebhookConfiguration {
            webhooks: Some(vec![MutatingWebhook {
                name: "pods.example.com".into(),
                ..MutatingWebhook::default()
            }]),
            ..MutatingWebhookConfiguration::default()
        };
        assert_eq!(set_ca_bundle(&mut mutating, ".example.com", b"PEM"), 1);
        assert_eq!(set_ca_bundle(&mut mutating, ".other.io", b"PEM"), 0);
        assert_eq!(
            MutatingWebhookConfiguration::default()
                .client_configs_mut()
                .len(),
            0
        );
    }
}
