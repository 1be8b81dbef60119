//! The Kubernetes test ground's own processes, started by `cargo xtask kube up`. Test-only: the
//! project's operator and bridge never depend on this crate and run unchanged on a real cluster.

mod controllers;
mod hollow;
mod kubelet;
mod netd;

use clap::{Parser, Subcommand};
use kube_ground::net::{NetConfig, Network};
use kube_ground::runtime::{Runtime, RuntimeConfig};

#[derive(Debug, Parser)]
#[command(
    name = "kube-ground",
    about = "Parts of the Kubernetes test ground (test-only)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Registers Node objects and runs the pods bound to them in containers (podman + runc).
    Kubelet(kubelet::Args),
    /// Serves many hollow nodes: Node objects and Leases, and their pods' status without
    /// containers (kubemark's hollow nodes, for scale tests).
    Hollow(hollow::Args),
    /// Test-only stand-ins for kube-controller-manager.
    Controllers(controllers::Args),
    /// The Service proxy and cluster DNS inside the ground's network namespace.
    Netd(netd::Args),
    /// Creates the ground's network namespace and bridge unless they exist; prints the namespace.
    Network,
    /// Removes every container and pod sandbox of the ground, also what a crashed kubelet left.
    Cleanup {
        /// Also delete the ground's network namespace and bridge.
        #[arg(long)]
        teardown: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match cli.cmd {
            Cmd::Kubelet(args) => kubelet::run(args).await,
            Cmd::Hollow(args) => hollow::run(args).await,
            Cmd::Controllers(args) => controllers::run(args).await,
            Cmd::Netd(args) => netd::run(args).await,
            Cmd::Network => {
                let net = Network::new(NetConfig::ground());
                net.ensure_ground().await?;
                println!("{}", net.config().ground_netns);
                Ok(())
            }
            Cmd::Cleanup { teardown } => cleanup(teardown).await,
        }
    })
}

async fn cleanup(teardown: bool) -> anyhow::Result<()> {
    let runtime = Runtime::new(RuntimeConfig::ground()).await?;
    let removed = runtime.remove_all().await?;
    let net = Network::new(NetConfig::ground());
    let sandboxes = net.sandbox_namespaces().await?.len();
    if teardown {
        net.teardown().await?;
    } else {
        net.destroy_all().await?;
    }
    tracing::info!(containers = removed, sandboxes, teardown, "cleaned up");
    Ok(())
}
