//! `slurm-operator`: runs Slurm clusters on Kubernetes from Slinky-compatible custom resources.
//!
//! `slurm-operator run` watches the six kinds and their children; `slurm-operator crds` prints
//! (or writes) the CRD manifests generated from the Rust types.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kube_support::http::Readiness;
use kube_support::logs::{self, LogFormat};
use slurm_operator::reconcile::cache::Cache;
use slurm_operator::reconcile::{self, Context, Scope};
use slurm_operator::slurm::SlurmClusters;
use slurm_operator::telemetry::Metrics;
use slurm_operator::{crd, leader, webhook};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against the cluster of the kubeconfig (or the in-cluster config).
    Run(Box<RunArgs>),
    /// Print the CRDs as YAML, or write one file per CRD into a directory.
    Crds {
        /// Write `slinky.slurm.net_<plural>.yaml` files here instead of printing.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Namespaces to watch, comma-separated; empty: all namespaces.
    #[arg(
        long,
        env = "SLURM_OPERATOR_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    namespaces: Vec<String>,
    /// Hold a Lease so that only one replica acts.
    #[arg(long, env = "SLURM_OPERATOR_LEADER_ELECT")]
    leader_elect: bool,
    /// Namespace of the leader-election Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "SLURM_OPERATOR_LEADER_ELECT_NAMESPACE")]
    leader_elect_namespace: Option<String>,
    /// Address of /healthz and /readyz; `0` turns them off.
    #[arg(
        long,
        env = "SLURM_OPERATOR_HEALTH_ADDR",
        default_value = "0.0.0.0:8081"
    )]
    health_addr: String,
    /// Address of /metrics; `0` turns it off.
    #[arg(
        long,
        env = "SLURM_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    metrics_addr: String,
    /// How often each cluster's Slurm nodes are polled (an unchanged cluster answers in a few bytes).
    #[arg(long, env = "SLURM_OPERATOR_SLURM_POLL", default_value = "5s", value_parser = parse_duration)]
    slurm_poll: Duration,
    /// The cluster's DNS domain (default: read from /etc/resolv.conf, else `cluster.local`).
    #[arg(long, env = "SLURM_OPERATOR_CLUSTER_DOMAIN")]
    cluster_domain: Option<String>,
    /// Kubernetes node condition types, comma-separated: when a node is cordoned without a
    /// `node-cordon-reason` annotation, its `True` conditions of these types make the drain reason.
    #[arg(
        long,
        env = "SLURM_OPERATOR_PROPAGATED_NODE_CONDITIONS",
        value_delimiter = ',',
        default_value = ""
    )]
    propagated_node_conditions: Vec<String>,
    /// Log line format.
    #[arg(
        long,
        env = "SLURM_OPERATOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(flatten)]
    webhook: webhook::WebhookArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds { out_dir: None } => {
            for (_, yaml) in crd::yaml_files() {
                print!("---\n{yaml}");
            }
            Ok(())
        }
        Command::Crds { out_dir: Some(dir) } => {
            for path in crd::print::write_dir(&dir)
                .with_context(|| format!("writing CRDs into {}", dir.display()))?
            {
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
        Command::Run(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(run(*args)),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    logs::init(args.log_format);
    // kube's rustls needs a process-wide crypto provider; ring is what slurm-client uses too.
    kube_support::tls::install_crypto_provider();
    let client =
        kube_support::client::connect(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).await?;
    let shutdown = kube_support::shutdown::Shutdown::on_signal();
    let metrics = Arc::new(Metrics::default());
    let ready = Readiness::default();
    // The servers drain on `shutdown`; `run` waits for them before it returns.
    let health_server = tokio::spawn({
        let (health, metrics_addr) = (
            kube_support::http::listen_addr(&args.health_addr)?,
            kube_support::http::listen_addr(&args.metrics_addr)?,
        );
        let (metrics, ready, shutdown) = (metrics.clone(), ready.clone(), shutdown.clone());
        async move {
            let served =
                kube_support::http::serve_until(health, metrics_addr, metrics, ready, shutdown);
            if let Err(e) = served.await {
                tracing::error!(error = %e, "health/metrics server stopped");
                std::process::exit(1);
            }
        }
    });

    // Every replica answers admission reviews, leader or not.
    let webhook_server = tokio::spawn({
        let (args, client, shutdown) = (args.webhook.clone(), client.clone(), shutdown.clone());
        async move {
            if let Err(e) = webhook::serve_until(args, client, shutdown).await {
                tracing::error!(error = %e, "admission webhook stopped");
                std::process::exit(1);
            }
        }
    });

    let leader = if args.leader_elect {
        let namespace = leader::namespace(args.leader_elect_namespace.as_deref());
        let leader = tokio::select! {
            leader = leader::acquire(client.clone(), &namespace) => leader?,
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

    let (changed_tx, changed_rx) = tokio::sync::mpsc::unbounded_channel();
    let slurm = SlurmClusters::new(args.slurm_poll, changed_tx);
    let cluster_domain = args.cluster_domain.clone().unwrap_or_else(cluster_domain);
    let propagated: Vec<String> = args
        .propagated_node_conditions
        .iter()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    let slurm_changes = reconcile::nodeset::SlurmChanges::fan_out(changed_rx);

    let nodes = Cache::nodes(&client);
    let mut watchers = tokio::task::JoinSet::new();
    for scope in Scope::from_list(&args.namespaces) {
        tracing::info!(?scope, "watching");
        let cache = Cache::start(&client, &scope, nodes.clone());
        // Fail closed: no reconciler acts on a store before its first listing is in.
        cache.ready().await;
        metrics
            .objects
            .watch(cache.nodesets.store(), cache.tokens.store());
        let mut ctx = Context::new(
            client.clone(),
            metrics.clone(),
            slurm.clone(),
            cluster_domain.clone(),
            cache,
        );
        ctx.propagated_node_conditions = propagated.clone();
        let ctx = Arc::new(ctx);
        watchers.spawn(reconcile::controller::run(ctx.clone()));
        watchers.spawn(reconcile::restapi::run(ctx.clone()));
        watchers.spawn(reconcile::accounting::run(ctx.clone()));
        watchers.spawn(reconcile::loginset::run(ctx.clone()));
        watchers.spawn(reconcile::token::run(ctx.clone()));
        watchers.spawn(reconcile::nodeset::run(ctx, slurm_changes.subscribe()));
    }
    ready.set_ready();

    let stopped = tokio::select! {
        _ = watchers.join_next() => anyhow::bail!("a watcher stopped"),
        () = shutdown.triggered() => {
            tracing::info!("SIGTERM or SIGINT; stopping");
            // The controllers stop before the Lease goes, so that the next leader never acts
            // beside them.
            watchers.shutdown().await;
            if let Some(leader) = leader {
                leader.release().await;
            }
            Ok(())
        }
    };
    // In-flight reviews and probes are answered (the servers stopped accepting at the trigger).
    let _ = tokio::join!(webhook_server, health_server);
    stopped
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    crd::parse_go_duration(text).ok_or_else(|| format!("not a duration: {text:?} (e.g. 5s, 1m)"))
}

/// The cluster domain from the `search` line of /etc/resolv.conf (`<ns>.svc.<domain>`).
fn cluster_domain() -> String {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()
        .and_then(|text| {
            text.lines()
                .filter(|l| l.starts_with("search"))
                .flat_map(|l| l.split_whitespace().skip(1))
                .find_map(|d| d.strip_prefix("svc.").map(str::to_owned))
        })
        .unwrap_or_else(|| "cluster.local".into())
}
