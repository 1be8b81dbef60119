//! The test kubelet: registers Node objects and runs every pod bound to them as real processes
//! from OCI images, through [`kube_ground::runtime`] (podman + runc) in sandboxes from
//! [`kube_ground::net`], writing pod status as a kubelet does. One process serves all the
//! ground's nodes; each pod has its own worker task.

mod container;
pub(crate) mod dispatch;
mod env;
mod hosts;
mod images;
pub(crate) mod node;
mod probes;
mod refs;
pub(crate) mod report;
pub(crate) mod resources;
mod sources;
pub(crate) mod status;
mod tokens;
mod volumes;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube_ground::net::{NetConfig, Network};
use kube_ground::runtime::{Runtime, RuntimeConfig};
use tokens::Tokens;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Node names this kubelet registers and serves, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Pods' files (volumes, hosts) live in `<state-dir>/pods/<uid>`, claims in `<state-dir>/claims`.
    #[arg(long, default_value = "/var/lib/slurm-dev/kube")]
    pub state_dir: PathBuf,
    /// The cluster CA, given to pods as the service account's ca.crt.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// A token the API server accepts, given to pods as the service account's token.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The API server's static token file: when given, each pod gets a token of its own service
    /// account, added to it (see `tokens`), instead of the one of `--token-file`.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// The OCI image layout that images missing from podman's store are copied from.
    #[arg(long, default_value = "/var/cache/slurm-dev/images")]
    pub image_layout: PathBuf,
    /// The port of the nodes' kubelet API (logs, exec, attach, port-forward), advertised in each
    /// Node's `status.daemonEndpoints`; the API server serves it (`kube-apiserver kubelet-api`).
    #[arg(long, default_value_t = 0)]
    pub kubelet_port: u16,
    /// Extended resources every node offers, e.g. `nvidia.com/gpu=2`.
    #[arg(long = "extended-resource", value_parser = parse_pair)]
    pub extended: Vec<(String, String)>,
}

pub(crate) fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?}: expected NAME=QUANTITY"))
}

pub async fn run(args: Args) -> Result<()> {
    let client = Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG)")?;
    let runtime = Runtime::new(RuntimeConfig::ground()).await?;
    let network = Network::new(NetConfig::ground());
    // A kubelet that crashed left containers and sandboxes; their pods start again from scratch.
    runtime.remove_all().await?;
    network.destroy_all().await?;
    let shape = node::Shape {
        address: network.config().gateway.to_string(),
        kubelet_port: args.kubelet_port,
        resources: args.extended.iter().cloned().collect(),
        labels: Default::default(),
        taints: Vec::new(),
        os_image: "kube-ground test node".into(),
    };
    node::register(&client, &args.nodes, &shape).await?;
    tokio::spawn(node::heartbeat(
        client.clone(),
        args.nodes.clone(),
        shape.clone(),
        node::STATUS_EVERY,
    ));
    let read = |p: &Option<PathBuf>| -> Result<Vec<u8>> {
        match p {
            Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display())),
            None => Ok(Vec::new()),
        }
    };
    let ctx = Arc::new(worker::Ctx {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: args.nodes.first().cloned(),
            },
        ),
        client: client.clone(),
        runtime,
        network,
        pods_dir: args.state_dir.join("pods"),
        claims_dir: args.state_dir.join("claims"),
        ca_crt: read(&args.ca_file)?,
        tokens: Tokens::new(
            args.token_auth_file.clone(),
            String::from_utf8(read(&args.token_file)?)
                .context("the token file is not UTF-8")?
                .trim()
                .to_string(),
        ),
        host_ip: shape.address.clone(),
        sources: sources::Sources::start(&client),
        image_layout: args.image_layout.clone(),
    });
    tracing::info!(nodes = ?args.nodes, "kubelet running");
    dispatch::serve_pods(client, args.nodes.into_iter().collect(), move |rx| {
        worker::run(ctx.clone(), rx)
    })
    .await
}
