//! `cargo xtask slurm …`: real Slurm clusters on this machine, each in its own root and network namespace.

mod cluster;
pub mod config;
mod netns;
pub mod process;
mod proxy;
mod release;
pub mod rootfs;
pub mod sh;
pub mod state;

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Subcommand;

pub use cluster::running;
pub use release::Release;
pub use state::State;

#[derive(Debug, Subcommand)]
pub enum SlurmCmd {
    /// Build (once) and start a cluster: slurmctld, N slurmd, slurmrestd (and slurmdbd + MariaDB).
    Up(UpCmd),
    /// Stop a cluster (all running ones without --release), whatever state `up` left it in.
    Down {
        #[arg(long)]
        release: Option<Release>,
    },
    /// Show the running clusters.
    Status,
    /// Run a command inside a cluster, e.g. `cargo xtask slurm exec -- sinfo`.
    Exec {
        #[arg(long)]
        release: Option<Release>,
        /// Run as this user of the cluster instead of root.
        #[arg(long)]
        user: Option<String>,
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Build the root filesystems without starting anything.
    Build {
        #[arg(long)]
        release: Option<Release>,
    },
    /// Internal: the host-side TCP door to slurmrestd's unix socket.
    #[command(hide = true)]
    Proxy {
        #[arg(long)]
        listen: String,
        #[arg(long)]
        socket: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub struct UpCmd {
    #[command(flatten)]
    pub args: UpArgs,
    /// Also define N nodes (vnode1…vnodeN, partition `virtual`) that no slurmd serves: a large
    /// cluster for slurmctld and slurmrestd at the cost of a config line (powered-down cloud nodes).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub virtual_nodes: u32,
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Slurm release: 24.11 (Debian trixie) or 26.05 (Debian sid).
    #[arg(long, default_value = "26.05")]
    pub release: Release,
    /// Number of compute nodes (node1…nodeN), 1 to 64.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub nodes: u32,
    /// Also run slurmdbd with MariaDB, for the /slurmdb/ accounting API.
    #[arg(long)]
    pub accounting: bool,
    /// Host loopback port for slurmrestd (default 6824 for 24.11, 6826 for 26.05).
    #[arg(long)]
    pub port: Option<u16>,
}

pub fn run(cmd: SlurmCmd) -> Result<()> {
    if !matches!(cmd, SlurmCmd::Status | SlurmCmd::Proxy { .. }) {
        require_root()?;
    }
    match cmd {
        SlurmCmd::Up(cmd) => {
            let state = up_with_virtual_nodes(&cmd.args, cmd.virtual_nodes)?;
            print_summary(&state);
            Ok(())
        }
        SlurmCmd::Down { release } => {
            for release in release.map_or(Release::ALL.to_vec(), |r| vec![r]) {
                if cluster::down(release)? {
                    eprintln!("Slurm {release} cluster stopped");
                }
            }
            Ok(())
        }
        SlurmCmd::Status => status(),
        SlurmCmd::Exec {
            release,
            user,
            command,
        } => {
            let state = pick_running(release)?;
            let inside = process::Inside {
                netns: &state.netns,
                root: &state.root,
                hostname: config::CTL_HOST,
                private_run: false,
                user: user.as_deref(),
                argv: command,
            };
            let status = inside.command().status()?;
            std::process::exit(status.code().unwrap_or(1));
        }
        SlurmCmd::Build { release } => {
            for release in release.map_or(Release::ALL.to_vec(), |r| vec![r]) {
                let root = rootfs::ensure(release)?;
                eprintln!("Slurm {release} root: {}", root.display());
            }
            Ok(())
        }
        SlurmCmd::Proxy { listen, socket } => proxy::serve(&listen, &socket),
    }
}

pub fn up(args: &UpArgs) -> Result<State> {
    up_with_virtual_nodes(args, 0)
}

/// Like [`up`], with `virtual_nodes` more nodes that have no slurmd.
pub fn up_with_virtual_nodes(args: &UpArgs, virtual_nodes: u32) -> Result<State> {
    let shape = config::Shape {
        release: args.release,
        nodes: args.nodes,
        accounting: args.accounting,
        virtual_nodes,
    };
    cluster::up(&shape, args.port.unwrap_or(args.release.default_port()))
}

pub fn down(release: Release) -> Result<bool> {
    cluster::down(release)
}

fn print_summary(state: &State) {
    let env = state::env_file(state.release);
    println!(
        "Slurm {} cluster: {} node(s){}{}\n  REST:     http://127.0.0.1:{} (unix:{})\n  env file: {} (`set -a; . {}; set +a`)\n  logs:     {}\n  stop:     cargo xtask slurm down --release {}",
        state.release,
        state.nodes,
        if state.virtual_nodes > 0 {
            format!(
                " + {} virtual (partition {}, no slurmd)",
                state.virtual_nodes,
                config::VIRTUAL_PARTITION
            )
        } else {
            String::new()
        },
        if state.accounting {
            ", accounting (slurmdbd)"
        } else {
            ""
        },
        state.port,
        state.socket().display(),
        env.display(),
        env.display(),
        state.log_dir().display(),
        state.release,
    );
}

fn status() -> Result<()> {
    for release in Release::ALL {
        match running(release)? {
            Some(state) => {
                println!(
                    "Slurm {release}: running, REST http://127.0.0.1:{}, env {}",
                    state.port,
                    state::env_file(release).display()
                );
                for d in &state.daemons {
                    let alive = if process::is_running(d.pid) {
                        "running"
                    } else {
                        "STOPPED"
                    };
                    println!("  {:<10} pid {:<8} {alive}", d.name, d.pid);
                }
            }
            None => println!("Slurm {release}: not running"),
        }
    }
    Ok(())
}

fn pick_running(release: Option<Release>) -> Result<State> {
    if let Some(release) = release {
        return running(release)?.ok_or_else(|| {
            anyhow::anyhow!("no Slurm {release} cluster is running: start one with `cargo xtask slurm up --release {release}`")
        });
    }
    let mut all = Vec::new();
    for release in Release::ALL {
        all.extend(running(release)?);
    }
    match all.len() {
        0 => bail!("no Slurm cluster is running: start one with `cargo xtask slurm up`"),
        1 => Ok(all.remove(0)),
        _ => {
            bail!("several clusters are running: say which with --release 24.11 or --release 26.05")
        }
    }
}

fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "this needs root: it builds root filesystems with mmdebstrap, creates network namespaces and \
             mounts /proc inside them (run it as root, e.g. `sudo -E cargo xtask …`)"
        );
    }
    Ok(())
}
