//! Hollow nodes, as kubemark's: one process serves many Node objects (labels, allocatable, a
//! Ready status, a Lease renewed every 10 s, all through the test kubelet's [`node`] code) and
//! runs the pods bound to them without containers ([`pod`]): status, events and deletion as
//! the test kubelet's workers write them, through the same functions. One watch of pods feeds
//! every hollow pod; the client sends at most [`IN_FLIGHT`] requests at a time. For scale tests
//! of the operator and the bridge: `cargo xtask kube up --hollow-nodes N`.

mod cost;
mod ips;
pub mod pod;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::runtime::events::{Recorder, Reporter};
use kube_ground::net::NetConfig;
use tokio::signal::unix::{SignalKind, signal};

use crate::kubelet::{dispatch, node};

/// Every hollow node has this label (`"true"`), and with `--taint` this NoSchedule taint.
pub const LABEL: &str = "kube-ground.slurm-rs.dev/hollow";
/// Requests the hollow process has in flight at most.
const IN_FLIGHT: usize = 32;
/// A hollow node writes its status every 5 minutes, as a kubelet does while its Lease says it is
/// alive (nodeStatusReportFrequency); the test kubelet writes every minute.
const STATUS_EVERY: Duration = Duration::from_secs(300);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many hollow nodes to serve.
    #[arg(long)]
    pub nodes: usize,
    /// Node names: the prefix followed by 1…N.
    #[arg(long, default_value = "hollow-")]
    pub prefix: String,
    /// What each node offers (capacity and allocatable), comma-separated, e.g.
    /// `cpu=8,memory=32Gi,pods=110`; what is not given is as on the test kubelet's nodes (4 CPUs,
    /// 8 GiB, 110 pods).
    #[arg(long, value_delimiter = ',', value_parser = crate::kubelet::parse_pair)]
    pub allocatable: Vec<(String, String)>,
    /// Taint the nodes `kube-ground.slurm-rs.dev/hollow=true:NoSchedule`, so that only pods
    /// tolerating it land on them.
    #[arg(long)]
    pub taint: bool,
    /// Log the process's cost (CPU seconds, peak RSS, API requests) every this many seconds
    /// (0: only when it stops).
    #[arg(long, default_value_t = 60)]
    pub cost_every: u64,
}

pub async fn run(args: Args) -> Result<()> {
    let counters = Arc::new(cost::Counters::default());
    let client = cost::client(counters.clone(), IN_FLIGHT)
        .await
        .context("connecting to the API server (KUBECONFIG)")?;
    let names: Vec<String> = (1..=args.nodes)
        .map(|i| format!("{}{i}", args.prefix))
        .collect();
    let shape = node::Shape {
        address: NetConfig::ground().gateway.to_string(),
        kubelet_port: 0,
        resources: args.allocatable.iter().cloned().collect(),
        labels: [(LABEL.to_string(), "true".to_string())].into(),
        taints: if args.taint {
            vec![(LABEL.into(), "true".into(), "NoSchedule".into())]
        } else {
            Vec::new()
        },
        os_image: "kube-ground hollow node".into(),
    };
    let started = std::time::Instant::now();
    node::register(&client, &names, &shape).await?;
    tracing::info!(
        nodes = names.len(),
        secs = format!("{:.1}", started.elapsed().as_secs_f64()),
        "hollow nodes registered"
    );
    tokio::spawn(node::heartbeat(
        client.clone(),
        names.clone(),
        shape.clone(),
        STATUS_EVERY,
    ));
    tokio::spawn(cost::every(
        counters.clone(),
        names.len(),
        Duration::from_secs(args.cost_every),
    ));
    let ctx = Arc::new(pod::Ctx {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: names.first().cloned(),
            },
        ),
        client: client.clone(),
        host_ip: shape.address.clone(),
        ips: ips::Ips::default(),
        counters: counters.clone(),
    });
    let nodes = names.len();
    let serve = dispatch::serve_pods(client, names.into_iter().collect(), move |rx| {
        pod::run(ctx.clone(), rx)
    });
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let result = tokio::select! {
        r = serve => r,
        _ = term.recv() => Ok(()),
        _ = int.recv() => Ok(()),
    };
    cost::log(&counters, nodes, "stopping");
    result
}
