//! `cargo xtask kube …`: the Kubernetes test ground. A real API server, the project's own
//! (`xtask/kube/apiserver`, Go, built from the upstream libraries Debian sid packages), with etcd,
//! both on the host's loopback, and the ground's own processes from `xtask/kube-ground` (the
//! test kubelet, the pod network, DNS and Services, the stand-in controllers), so that the
//! operator and the bridge are tested against real Kubernetes.

pub mod apiserver;
pub mod ground;
pub mod packages;
pub mod parts;
pub mod state;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::slurm::Release;

#[derive(Debug, Subcommand)]
pub enum KubeCmd {
    /// Build (once) and start the ground: etcd and the API server on 127.0.0.1:6443, the pod
    /// network, DNS and Services, the stand-in controllers and a test kubelet that runs pods.
    Up(UpArgs),
    /// Stop the ground, whatever state `up` left it in.
    Down,
    /// Show the ground's processes.
    Status,
    /// Run Debian sid's kubectl with the ground's kubeconfig, e.g. `cargo xtask kube kubectl -- get ns`.
    Kubectl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a command inside the ground's network namespace, where pod IPs, ClusterIPs and Service
    /// names are reachable, e.g. `cargo xtask kube exec -- curl http://10.96.0.1:443`.
    Exec {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Number of Kubernetes nodes the test kubelet registers and runs pods on, 1 to 16.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub nodes: u32,
    /// Name the nodes after the Slurm cluster's (node1…nodeN, as `cargo xtask slurm up` names them),
    /// for tests where Kubernetes and Slurm nodes are the same machines.
    #[arg(long)]
    pub slurm: Option<Release>,
    /// Hollow nodes besides (`hollow-1` … `hollow-N`), served by one process: Node objects with
    /// Leases whose pods run without containers, Running and Ready at once, `Succeeded` after
    /// the seconds of their `kube-ground.slurm-rs.dev/hollow-run-seconds` annotation. For scale
    /// tests; see the ground's section in the README.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=5000))]
    pub hollow_nodes: u32,
    /// What each hollow node offers, e.g. `cpu=8,memory=32Gi,pods=110` (default: as the test
    /// kubelet's nodes, 4 CPUs, 8 GiB, 110 pods; no GPUs).
    #[arg(long, default_value = "")]
    pub hollow_allocatable: String,
    /// Taint the hollow nodes `kube-ground.slurm-rs.dev/hollow=true:NoSchedule`: only pods that
    /// tolerate it land on them.
    #[arg(long)]
    pub hollow_taint: bool,
}

pub fn run(cmd: KubeCmd, workspace: &std::path::Path) -> Result<()> {
    if !matches!(cmd, KubeCmd::Status) && !nix::unistd::geteuid().is_root() {
        bail!("cargo xtask kube needs root (it writes /run/slurm-dev and /var/cache/slurm-dev)");
    }
    match cmd {
        KubeCmd::Up(args) => {
            let shape = ground::Shape {
                nodes: args.nodes,
                slurm: args.slurm,
                hollow: (args.hollow_nodes > 0).then(|| state::Hollow {
                    nodes: args.hollow_nodes,
                    allocatable: args.hollow_allocatable.clone(),
                    taint: args.hollow_taint,
                }),
            };
            let (state, built) = ground::up(&shape, workspace)?;
            print_summary(&state, &built);
            Ok(())
        }
        KubeCmd::Down => {
            if ground::down()? {
                eprintln!("Kubernetes test ground stopped");
            } else {
                eprintln!("Kubernetes test ground: nothing was running");
            }
            Ok(())
        }
        KubeCmd::Status => status(),
        KubeCmd::Kubectl { args } => {
            let Some(state) = ground::running()? else {
                bail!(
                    "the Kubernetes test ground is not running: start it with `cargo xtask kube up`"
                );
            };
            let status = ground::kubectl(&state).args(args).status()?;
            std::process::exit(status.code().unwrap_or(1));
        }
        KubeCmd::Exec { command } => {
            if ground::running()?.is_none() {
                bail!(
                    "the Kubernetes test ground is not running: start it with `cargo xtask kube up`"
                );
            }
            // `ip netns exec` mounts this over /etc/resolv.conf: the ground's DNS (netd's, the
            // kube-dns Service address), with the search path a pod in `default` has.
            let etc = std::path::Path::new("/etc/netns/slurm-dev-kube");
            std::fs::create_dir_all(etc)?;
            std::fs::write(
                etc.join("resolv.conf"),
                "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
            )?;
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", "slurm-dev-kube"])
                .args(&command)
                .env("KUBECONFIG", state::kubeconfig())
                .status()?;
            std::process::exit(status.code().unwrap_or(1));
        }
    }
}

fn print_summary(state: &state::State, built: &apiserver::Built) {
    let env = state::env_file();
    let kubeconfig = state::kubeconfig();
    println!(
        "Kubernetes test ground: API server https://{}{}\n  kubeconfig: {} (client certificate, system:masters)\n  env file:   {} (`set -a; . {}; set +a`)\n  kubectl:    cargo xtask kube kubectl -- get ns   (or KUBECONFIG={} {} get ns)\n  logs:       {} (audit log: {})\n  nodes:      {}{} (pods run for real from the images in {}){}\n  inside:     cargo xtask kube exec -- <command>   (pod IPs, ClusterIPs and Service names resolve)\n  stop:       cargo xtask kube down",
        ground::API_ADDR,
        built
            .build_secs
            .map(|s| format!(" (API server built in {s:.0} s)"))
            .unwrap_or_default(),
        kubeconfig.display(),
        env.display(),
        env.display(),
        kubeconfig.display(),
        state.kubectl.display(),
        state::log_dir().display(),
        state::audit_log().display(),
        parts::node_names(state).join(", "),
        state
            .slurm
            .map(|r| format!(", standing for Slurm {r}'s nodes"))
            .unwrap_or_default(),
        crate::image::store_path().display(),
        state
            .hollow
            .as_ref()
            .map(|h| format!(
                "\n  hollow:     {}1 … {}{} (pods run without containers; cost in {})",
                parts::HOLLOW_PREFIX,
                parts::HOLLOW_PREFIX,
                h.nodes,
                state::log_dir().join("hollow.log").display()
            ))
            .unwrap_or_default(),
    );
}

fn status() -> Result<()> {
    let Some(state) = state::State::load()? else {
        println!("Kubernetes test ground: not running");
        return Ok(());
    };
    let alive = state
        .daemons
        .iter()
        .filter(|d| crate::slurm::process::is_running(d.pid))
        .count();
    println!(
        "Kubernetes test ground: {}, API https://{}, kubeconfig {}, nodes {} (recorded)",
        if alive == state.daemons.len() && alive > 0 {
            "running"
        } else if alive > 0 {
            "PARTLY running (`cargo xtask kube down`, then `up` again)"
        } else {
            "NOT running (stale state; `cargo xtask kube down` cleans up)"
        },
        ground::API_ADDR,
        state::kubeconfig().display(),
        state.nodes,
    );
    for d in &state.daemons {
        let s = if crate::slurm::process::is_running(d.pid) {
            "running"
        } else {
            "STOPPED"
        };
        println!("  {:<10} pid {:<8} {s}", d.name, d.pid);
    }
    Ok(())
}
