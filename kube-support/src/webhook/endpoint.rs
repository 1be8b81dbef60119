//! How the API server reaches a webhook server: a Service or a URL.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{ServiceReference, WebhookClientConfig};

/// How the API server reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The Service in front of the server (in-cluster; the usual case).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service's port.
        port: i32,
    },
    /// A base URL such as `https://127.0.0.1:9443` (an API server outside the cluster network,
    /// e.g. the test ground's); each webhook's path is appended.
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

    /// The names the serving certificate must hold for the API server to accept it. A URL must
    /// be `https://`.
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

    /// The `clientConfig` of a webhook served at `path` (e.g. `/validate-…`), with `ca_bundle`
    /// (the PEM of the CA that signed the serving certificate; `None`: left to cert-manager's CA
    /// injector).
    pub fn client_config(&self, path: &str, ca_bundle: Option<&[u8]>) -> WebhookClientConfig {
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
                    path: Some(path.into()),
                    port: Some(*port),
                }),
                ca_bundle,
                url: None,
            },
            Endpoint::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service() {
        let ep = Endpoint::parse_service("slurm-operator-webhook.slinky").unwrap();
        assert_eq!(
            ep.certificate_names().unwrap(),
            [
                "slurm-operator-webhook.slinky.svc",
                "slurm-operator-webhook",
                "slurm-operator-webhook.slinky",
                "slurm-operator-webhook.slinky.svc.cluster.local"
            ]
        );
        assert_eq!(
            serde_json::to_value(ep.client_config("/validate-x", Some(b"PEM"))).unwrap(),
            serde_json::json!({
                "service": {
                    "namespace": "slinky",
                    "name": "slurm-operator-webhook",
                    "path": "/validate-x",
                    "port": 443
                },
                "caBundle": "UEVN"
            })
        );
    }

    #[test]
    fn url() {
        let ep = Endpoint::Url("https://127.0.0.1:9443/".into());
        let c = ep.client_config("/mutate-x", None);
        assert_eq!(c.url.as_deref(), Some("https://127.0.0.1:9443/mutate-x"));
        assert!(c.ca_bundle.is_none() && c.service.is_none());
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
