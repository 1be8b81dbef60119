//! The validating admission webhook: Slinky's checks of the six kinds (plus ours, see
//! [`validate`]) at Slinky's paths `/validate-slinky-slurm-net-v1beta1-<kind>`, over HTTPS,
//! AdmissionReview v1.
//!
//! Certificates, two ways:
//! - **cert dir** (default; what Slinky's chart does with cert-manager): `tls.crt`/`tls.key` in
//!   `--webhook-cert-dir`, read again when they change, so a renewal needs no restart; the chart
//!   (or cert-manager's CA injector) owns the configuration's `caBundle`.
//! - **`--webhook-self-signed`**: a CA and a serving certificate for the names of
//!   `--webhook-service <name>.<ns>` (or the host of `--webhook-url`) are made at start, and
//!   the CA goes into the `caBundle` of the ValidatingWebhookConfiguration
//!   `--webhook-configuration` (created from [`configuration`] if missing). No cert-manager and
//!   nothing to renew, but every start makes a new CA, so this suits one replica: with several,
//!   each would overwrite the others' `caBundle`.
//!
//! [`validate`] holds the pure rules, [`server`] the HTTP side, `lookup` the lookups (through the
//! operator's client: it needs get on configmaps, persistentvolumeclaims, controllers and secrets
//! (metadata only: whose a Token's Secret is), only in the namespace under review, and in
//! self-signed mode get/create/update on validatingwebhookconfigurations), [`config`] the
//! configuration. The TLS, the HTTPS server and the `caBundle` update are
//! [`kube_support::tls`] and [`kube_support::webhook`].

pub mod config;
mod lookup;
pub mod server;
pub mod validate;
pub mod verdict;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use kube_support::tls;

pub use config::{CONFIGURATION_NAME, configuration};
pub use kube_support::tls::DEFAULT_CERT_DIR;
pub use kube_support::webhook::Endpoint;
pub use validate::{
    validate_accounting, validate_controller, validate_loginset, validate_nodeset,
    validate_restapi, validate_token,
};
pub use verdict::{Lookup, Lookups, Verdict};

/// The self-signed mode's names: its CA is `slurm-operator-webhook-ca`.
pub const CERT_NAME: &str = "slurm-operator-webhook";

#[derive(clap::Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Address of the HTTPS admission webhook; `0` turns it off.
    #[arg(
        long,
        env = "SLURM_OPERATOR_WEBHOOK_ADDR",
        default_value = "0.0.0.0:9443"
    )]
    pub webhook_addr: String,
    /// Directory holding tls.crt and tls.key (cert-manager's Secret); re-read when they change.
    #[arg(long, env = "SLURM_OPERATOR_WEBHOOK_CERT_DIR", default_value = DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
    /// Make a CA and serving certificate at start and write the CA into the webhook
    /// configuration's caBundle (needs --webhook-service or --webhook-url).
    #[arg(long, env = "SLURM_OPERATOR_WEBHOOK_SELF_SIGNED")]
    pub webhook_self_signed: bool,
    /// The Service the API server calls: <name>.<namespace>[:<port>] (port 443 by default).
    #[arg(
        long,
        env = "SLURM_OPERATOR_WEBHOOK_SERVICE",
        conflicts_with = "webhook_url"
    )]
    pub webhook_service: Option<String>,
    /// Instead of a Service, the base URL the API server calls (e.g. https://127.0.0.1:9443).
    #[arg(long, env = "SLURM_OPERATOR_WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// Name of the ValidatingWebhookConfiguration whose caBundle the self-signed mode writes.
    #[arg(long, env = "SLURM_OPERATOR_WEBHOOK_CONFIGURATION", default_value = CONFIGURATION_NAME)]
    pub webhook_configuration: String,
    /// The configuration's timeoutSeconds: the API server's time for one review. The lookups of
    /// a review end three seconds before it (at least half of it), so an answer always makes it.
    #[arg(
        long,
        env = "SLURM_OPERATOR_WEBHOOK_TIMEOUT_SECONDS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=30)
    )]
    pub webhook_timeout_seconds: u64,
}

impl Default for WebhookArgs {
    fn default() -> Self {
        WebhookArgs {
            webhook_addr: "0.0.0.0:9443".into(),
            webhook_cert_dir: DEFAULT_CERT_DIR.into(),
            webhook_self_signed: false,
            webhook_service: None,
            webhook_url: None,
            webhook_configuration: CONFIGURATION_NAME.into(),
            webhook_timeout_seconds: lookup::DEFAULT_TIMEOUT.as_secs(),
        }
    }
}

impl WebhookArgs {
    /// The listen address; `None` when turned off (`0` or empty).
    pub fn addr(&self) -> anyhow::Result<Option<SocketAddr>> {
        kube_support::http::listen_addr(&self.webhook_addr).context("--webhook-addr")
    }

    /// How the API server reaches this server, if given.
    pub fn endpoint(&self) -> anyhow::Result<Option<Endpoint>> {
        match (&self.webhook_service, &self.webhook_url) {
            (Some(s), _) => Endpoint::parse_service(s)
                .map(Some)
                .context("--webhook-service"),
            (None, Some(u)) => Ok(Some(Endpoint::Url(u.clone()))),
            (None, None) => Ok(None),
        }
    }
}

/// Serves the webhook for good. Returns `Ok(())` at once when it is turned off
/// (`--webhook-addr 0`). In cert-dir mode it waits for the certificate files before it listens.
pub async fn serve(args: WebhookArgs, client: kube::Client) -> anyhow::Result<()> {
    serve_until(args, client, kube_support::shutdown::Shutdown::new()).await
}

/// [`serve`] until `shutdown` is triggered, then drains (the reviews in flight are answered)
/// and returns.
pub async fn serve_until(
    args: WebhookArgs,
    client: kube::Client,
    shutdown: kube_support::shutdown::Shutdown,
) -> anyhow::Result<()> {
    let Some(addr) = args.addr()? else {
        return Ok(());
    };
    let cert = if args.webhook_self_signed {
        let endpoint = args.endpoint()?.context(
            "--webhook-self-signed needs --webhook-service <name>.<namespace> or --webhook-url",
        )?;
        let made = tls::self_signed(CERT_NAME, &endpoint.certificate_names()?)
            .context("making the self-signed webhook certificate")?;
        tokio::spawn({
            let (client, name) = (client.clone(), args.webhook_configuration.clone());
            let fresh = configuration(&endpoint, None);
            async move {
                kube_support::webhook::inject_ca_bundle(
                    client,
                    &name,
                    config::WEBHOOK_SUFFIX,
                    made.ca_pem.as_bytes(),
                    fresh,
                )
                .await;
            }
        });
        tls::ServingCert::new(made.key)
    } else {
        tls::watch_dir(args.webhook_cert_dir.clone()).await?
    };
    let timeout = std::time::Duration::from_secs(args.webhook_timeout_seconds);
    let router = server::router_with_timeout(client, timeout);
    kube_support::webhook::serve_until(addr, cert, router, shutdown).await
}
