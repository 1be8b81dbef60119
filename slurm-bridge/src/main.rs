//! `slurm-bridge`: the scheduler binary. Its `run` is a list of watchers (pods, nodes, the
//! bridge's Slurm jobs, Slurm's nodes) feeding one scheduling loop, plus the admission webhook.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube_support::logs::LogFormat;
use kube_support::{http, leader, logs, tls, webhook as hook};
use slurm_bridge::config::Config;
use slurm_bridge::jobs::{self, JobBook};
use slurm_bridge::metrics::Metrics;
use slurm_bridge::nodes;
use slurm_bridge::scheduler::{Scheduler, Wake};
use slurm_bridge::slurm_nodes::SlurmNodes;
use slurm_bridge::storage::Storage;
use slurm_bridge::webhook::{self, config as hook_config};
use slurm_client::{ApiVersion, ClientBuilder, TokenFile};
use tokio::sync::mpsc;

#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// The config file (Slinky's keys: schedulerName, slurmRestApi, managedNamespaces, …). A
    /// missing file at the default path means the defaults.
    #[arg(
        long,
        env = "SLURM_BRIDGE_CONFIG",
        default_value = "/etc/slurm-bridge/config.yaml"
    )]
    config: PathBuf,
    /// The file holding the Slurm JWT (re-read when it changes).
    #[arg(
        long,
        env = "SLURM_JWT_FILE",
        default_value = "/var/run/secrets/slurm/auth-token"
    )]
    slurm_jwt_file: PathBuf,
    /// Hold a Lease so that only one replica acts.
    #[arg(long, env = "SLURM_BRIDGE_LEADER_ELECT")]
    leader_elect: bool,
    /// Namespace of the leader-election Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "SLURM_BRIDGE_LEADER_ELECT_NAMESPACE")]
    leader_elect_namespace: Option<String>,
    /// Address of /healthz and /readyz; `0` turns them off.
    #[arg(long, env = "SLURM_BRIDGE_HEALTH_ADDR", default_value = "0.0.0.0:8081")]
    health_addr: String,
    /// Address of /metrics; `0` turns it off.
    #[arg(
        long,
        env = "SLURM_BRIDGE_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    metrics_addr: String,
    /// How often the bridge's pending and running jobs are read.
    #[arg(long, env = "SLURM_BRIDGE_JOB_POLL", default_value = "1s", value_parser = parse_duration)]
    job_poll: Duration,
    /// How often Slurm's node list is polled (an unchanged list answers in a few bytes).
    #[arg(long, env = "SLURM_BRIDGE_NODE_POLL", default_value = "5s", value_parser = parse_duration)]
    node_poll: Duration,
    /// How often every workload is looked at again (retries, overdue deletions, orphan jobs).
    #[arg(long, env = "SLURM_BRIDGE_RESYNC", default_value = "5s", value_parser = parse_duration)]
    resync: Duration,
    /// Address of the HTTPS admission webhook; `0` turns it off.
    #[arg(
        long,
        env = "SLURM_BRIDGE_WEBHOOK_ADDR",
        default_value = "0.0.0.0:9443"
    )]
    webhook_addr: String,
    /// Directory holding tls.crt and tls.key (cert-manager's Secret); re-read when they change.
    #[arg(long, env = "SLURM_BRIDGE_WEBHOOK_CERT_DIR", default_value = tls::DEFAULT_CERT_DIR)]
    webhook_cert_dir: PathBuf,
    /// Make a CA and certificate at start and write the webhook configurations (created when
    /// missing) with that CA; needs --webhook-service or --webhook-url.
    #[arg(long, env = "SLURM_BRIDGE_WEBHOOK_SELF_SIGNED")]
    webhook_self_signed: bool,
    /// The Service the API server calls: <name>.<namespace>[:<port>].
    #[arg(long, env = "SLURM_BRIDGE_WEBHOOK_SERVICE")]
    webhook_service: Option<String>,
    /// The URL the API server calls instead of a Service (e.g. https://10.0.0.5:9443).
    #[arg(long, env = "SLURM_BRIDGE_WEBHOOK_URL")]
    webhook_url: Option<String>,
    /// Log line format.
    #[arg(
        long,
        env = "SLURM_BRIDGE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    logs::init(args.log_format);
    tls::install_crypto_provider();
    let config = Arc::new(load_config(&args.config)?);
    let client =
        kube_support::client::connect(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).await?;
    let shutdown = kube_support::shutdown::Shutdown::on_signal();
    let slurm = ClientBuilder::new(config.slurm_rest_api.clone())
        .token(TokenFile::new(&args.slurm_jwt_file))
        .request_timeout(slurm_bridge::slurm_nodes::CALL_TIMEOUT)
        .call_timeout(slurm_bridge::slurm_nodes::CALL_TIMEOUT)
        .build()
        .with_context(|| format!("slurmRestApi {}", config.slurm_rest_api))?;

    let metrics = Arc::new(Metrics::default());
    let ready = http::Readiness::default();
    // The servers drain on `shutdown`; `run` waits for them before it returns.
    let health_server = tokio::spawn({
        let (health, metrics_addr) = (
            http::listen_addr(&args.health_addr)?,
            http::listen_addr(&args.metrics_addr)?,
        );
        let (metrics, ready, shutdown) = (metrics.clone(), ready.clone(), shutdown.clone());
        async move {
            let encode = move || metrics.encode();
            let served = http::serve_until(health, metrics_addr, Arc::new(encode), ready, shutdown);
            if let Err(e) = served.await {
                tracing::error!(error = %e, "health/metrics server stopped");
                std::process::exit(1);
            }
        }
    });
    // Every replica answers admission reviews, leader or not.
    let mut webhook_server = None;
    if let Some(webhook_addr) = http::listen_addr(&args.webhook_addr)? {
        let router = webhook::router(client.clone(), config.clone());
        let cert = webhook_cert(&args, &client, &config).await?;
        let shutdown = shutdown.clone();
        webhook_server = Some(tokio::spawn(async move {
            if let Err(e) = hook::serve_until(webhook_addr, cert, router, shutdown).await {
                tracing::error!(error = %e, "admission webhook stopped");
                std::process::exit(1);
            }
        }));
    }

    check_slurm(&slurm).await;
    let leader = if args.leader_elect {
        let namespace = leader::namespace(args.leader_elect_namespace.as_deref());
        let acquire = leader::acquire(
            client.clone(),
            &namespace,
            "slurm-bridge",
            "slurm-bridge-leader",
        );
        let leader = tokio::select! {
            leader = acquire => leader?,
            () = shutdown.triggered() => {
                tracing::info!("SIGTERM or SIGINT while waiting for leadership; stopping");
                return Ok(());
            }
        };
        // Ends the process at the renew deadline, wherever the rest of it is.
        tokio::spawn(leader.fence());
        Some(leader)
    } else {
        None
    };

    let book = load_book(&slurm, &config.mcs_label).await;
    let (wake_tx, wake_rx) = mpsc::unbounded_channel();
    let (pods, pod_writer) = reflector::store();
    let (k8s_nodes, node_writer) = reflector::store();
    let mut watchers = tokio::task::JoinSet::new();

    // Pods of the bridge's scheduler → their workload.
    let pod_api: Api<Pod> = Api::all(client.clone());
    let pod_watch =
        watcher::Config::default().fields(&format!("spec.schedulerName={}", config.scheduler_name));
    let members = slurm_bridge::members::Members::default();
    watchers.spawn({
        let (wake, members) = (wake_tx.clone(), members.clone());
        reflector(
            pod_writer,
            watcher(pod_api, pod_watch).modify(slurm_bridge::stored::trim),
        )
        .default_backoff()
        .touched_objects()
        .for_each(move |pod| {
            if let Ok(pod) = pod {
                let _ = wake.send(Wake::Workload(members.note(&pod)));
            }
            futures::future::ready(())
        })
    });
    // Every bound pod, whoever bound it → what it takes of its node (the Kubernetes-side fit).
    let usage = slurm_bridge::usage::Usage::new(&config.scheduler_name);
    watchers.spawn(usage.clone().follow(Api::all(client.clone())));
    // Claims, PersistentVolumes, StorageClasses → unbound pods that use claims.
    let (storage, storage_watches) = Storage::watch(&client, wake_tx.clone());
    for watch in storage_watches {
        watchers.spawn(watch);
    }
    // Kubernetes nodes → waiting workloads.
    let node_api: Api<Node> = Api::all(client.clone());
    watchers.spawn({
        let wake = wake_tx.clone();
        reflector(
            node_writer,
            watcher(node_api, watcher::Config::default()).modify(slurm_bridge::stored::trim_node),
        )
        .default_backoff()
        .touched_objects()
        .predicate_filter(
            |node: &Node| Some(slurm_bridge::feasible::fit_state(node)),
            PredicateConfig::default(),
        )
        .for_each(move |_| {
            let _ = wake.send(Wake::Nodes);
            futures::future::ready(())
        })
    });
    // The bridge's jobs in Slurm → the workloads of their pods.
    let (job_tx, mut job_rx) = mpsc::unbounded_channel();
    watchers.spawn(jobs::follow(
        book.clone(),
        slurm.clone(),
        args.job_poll,
        job_tx,
        metrics.clone(),
    ));
    watchers.spawn({
        let wake = wake_tx.clone();
        async move {
            while let Some(pods) = job_rx.recv().await {
                let _ = wake.send(Wake::Pods(pods));
            }
        }
    });
    // Slurm's nodes → waiting workloads.
    let slurm_nodes = SlurmNodes::default();
    watchers.spawn({
        let (nodes, slurm, wake) = (slurm_nodes.clone(), slurm.clone(), wake_tx.clone());
        async move {
            nodes
                .follow(slurm, args.node_poll, move || {
                    let _ = wake.send(Wake::Nodes);
                })
                .await
        }
    });
    // Node labels, cordons → Slurm external nodes and drains; Slurm nodes → the node taint.
    watchers.spawn({
        let slurm_nodes = slurm_nodes.clone();
        nodes::run(
            client.clone(),
            slurm.clone(),
            config.clone(),
            k8s_nodes.clone(),
            metrics.clone(),
            move || slurm_nodes.poll_now(),
        )
    });

    pods.wait_until_ready()
        .await
        .context("the pod watch never started")?;
    k8s_nodes
        .wait_until_ready()
        .await
        .context("the node watch never started")?;
    storage
        .wait_until_ready()
        .await
        .context("the claim, volume and storage class watches never started")?;
    ready.set_ready();
    let reporter = Reporter {
        controller: "slurm-bridge".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let scheduler = Scheduler {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        slurm,
        config,
        book,
        pods,
        nodes: k8s_nodes,
        slurm_nodes,
        metrics,
        assumed: Default::default(),
        usage,
        groups: Default::default(),
        members,
        storage,
    };
    tracing::info!("scheduling");
    let stopped = tokio::select! {
        _ = scheduler.run(wake_rx, args.resync) => anyhow::bail!("the scheduling loop stopped"),
        _ = watchers.join_next() => anyhow::bail!("a watcher stopped"),
        () = shutdown.triggered() => {
            tracing::info!("SIGTERM or SIGINT; stopping");
            // The scheduling loop has stopped (its future is dropped); the watchers stop too
            // before the Lease goes, so that the next leader never acts beside them.
            watchers.shutdown().await;
            if let Some(leader) = leader {
                leader.release().await;
            }
            Ok(())
        }
    };
    // In-flight reviews and probes are answered (the servers stopped accepting at the trigger).
    if let Some(webhook_server) = webhook_server {
        let _ = webhook_server.await;
    }
    let _ = health_server.await;
    stopped
}

fn load_config(path: &std::path::Path) -> anyhow::Result<Config> {
    if !path.exists() && path == std::path::Path::new("/etc/slurm-bridge/config.yaml") {
        tracing::info!(path = %path.display(), "no config file; using the defaults");
        return Ok(Config::default());
    }
    Config::load(path)
}

/// Waits until slurmrestd answers, then refuses a Slurm without external jobs (REST v0.0.43,
/// Slurm 25.05+) with an error naming its release.
async fn check_slurm(slurm: &slurm_client::Client) {
    let mut delay = Duration::from_secs(1);
    loop {
        match slurm.negotiate().await {
            Ok(n) if n.version < ApiVersion::V0_0_43 => {
                tracing::error!(
                    release = n.release.as_deref().unwrap_or("unknown"),
                    version = %n.version,
                    "this Slurm has no external jobs (REST v0.0.43+, Slurm 25.05 or later); slurm-bridge cannot place pods through it"
                );
                std::process::exit(2);
            }
            Ok(n) => {
                tracing::info!(release = n.release.as_deref().unwrap_or("unknown"), version = %n.version, "slurmrestd answers");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?delay, "slurmrestd does not answer yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// Lists the cluster's jobs once to find the bridge's own again (retried until it works: no
/// workload is touched before the bridge knows its jobs, so none is submitted twice).
async fn load_book(slurm: &slurm_client::Client, mcs_label: &str) -> JobBook {
    let mut delay = Duration::from_secs(1);
    loop {
        match JobBook::load(slurm, mcs_label).await {
            Ok(book) => {
                tracing::info!(jobs = book.active().len(), "found the bridge's active jobs");
                return book;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?delay, "cannot list the jobs yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

async fn webhook_cert(
    args: &Args,
    client: &kube::Client,
    config: &Config,
) -> anyhow::Result<Arc<tls::ServingCert>> {
    if !args.webhook_self_signed {
        return tls::watch_dir(args.webhook_cert_dir.clone()).await;
    }
    let endpoint = match (&args.webhook_service, &args.webhook_url) {
        (Some(service), _) => hook::Endpoint::parse_service(service)?,
        (None, Some(url)) => hook::Endpoint::Url(url.clone()),
        (None, None) => {
            anyhow::bail!("--webhook-self-signed needs --webhook-service or --webhook-url")
        }
    };
    let made = tls::self_signed("slurm-bridge-webhook", &endpoint.certificate_names()?)?;
    let ca = made.ca_pem.clone().into_bytes();
    let mutating = hook_config::mutating(config, &endpoint, Some(&ca));
    let validating = hook_config::validating(config, &endpoint, Some(&ca));
    tokio::spawn({
        let client = client.clone();
        async move {
            hook::inject_ca_bundle(
                client.clone(),
                hook_config::CONFIGURATION_NAME,
                hook_config::WEBHOOK_SUFFIX,
                &ca,
                mutating,
            )
            .await;
            hook::inject_ca_bundle(
                client,
                hook_config::CONFIGURATION_NAME,
                hook_config::WEBHOOK_SUFFIX,
                &ca,
                validating,
            )
            .await;
        }
    });
    Ok(tls::ServingCert::new(made.key))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    slurm_client::parse_duration(text).map_err(|e| e.to_string())
}
