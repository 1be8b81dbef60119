//! `cargo xtask demo`: the whole system deployed with the project's images and Helm charts on the
//! Kubernetes test ground ([`stack`]); `cargo xtask demo client`: a real Slurm cluster, and the
//! client and CLI working against it; `cargo xtask demo operator`: a Slurm cluster made from
//! Slinky-style custom resources by the operator run from source ([`operator`]).

mod operator;
pub mod prometheus;
mod stack;

/// Host ports into the ground, shared with test-support.
#[path = "../test-support/src/ground/forward.rs"]
mod forward;
/// The one copy of "run a process inside the ground as if in a pod", shared with test-support.
#[path = "../test-support/src/ground/netns.rs"]
mod netns;
/// ServiceMonitors as Prometheus scrape jobs, shared with test-support.
#[path = "../test-support/src/prometheus/scrape.rs"]
mod scrape;

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

const RELEASE: Release = Release::R26_05;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    #[command(subcommand)]
    what: Option<DemoCmd>,
    #[command(flatten)]
    stack: stack::StackArgs,
}

#[derive(Debug, clap::Subcommand)]
enum DemoCmd {
    /// A real Slurm 26.05 cluster on this machine (started if needed), and the client and the
    /// `slurm` CLI working against it.
    Client,
    /// A Slurm cluster made from Slinky-style custom resources by slurm-operator, on the
    /// Kubernetes test ground (started if needed); left running until Ctrl-C or `--down`.
    Operator(operator::OperatorArgs),
    /// What `cargo xtask demo` leaves running beside its Prometheus: target discovery and the
    /// host port (see `demo/prometheus.rs`).
    #[command(hide = true)]
    PrometheusServe,
}

pub fn run(workspace: &Path, args: &DemoArgs) -> Result<()> {
    match &args.what {
        None => stack::run(workspace, &args.stack),
        Some(DemoCmd::Client) => run_client(workspace),
        Some(DemoCmd::Operator(args)) => operator::run(workspace, args),
        Some(DemoCmd::PrometheusServe) => prometheus::serve(),
    }
}

fn run_client(workspace: &Path) -> Result<()> {
    let state = match slurm::running(RELEASE)? {
        Some(state) => {
            eprintln!("==> using the running Slurm {RELEASE} cluster");
            state
        }
        None => {
            eprintln!("==> starting a Slurm {RELEASE} cluster (4 nodes, with accounting)");
            slurm::up(&UpArgs {
                release: RELEASE,
                nodes: 4,
                accounting: true,
                port: None,
            })?
        }
    };
    let env_file = slurm::state::env_file(RELEASE);
    let env = read_env(&env_file)?;

    eprintln!("==> building the slurm CLI");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(&cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "slurm-client",
            "--features",
            "cli",
            "--bin",
            "slurm",
        ])
        .status()?;
    if !built.success() {
        bail!("building the slurm CLI failed");
    }
    let slurm_bin = crate::target_dir(workspace).join("debug/slurm");
    let slurm = |args: &[&str]| {
        let mut cmd = Command::new(&slurm_bin);
        cmd.args(args).envs(env.iter().cloned());
        cmd
    };
    let cli = |args: &[&str]| -> Result<()> {
        println!("\n$ slurm {}", shell_words(args));
        let status = slurm(args).status()?;
        if !status.success() {
            bail!("`slurm {}` failed ({status})", shell_words(args));
        }
        Ok(())
    };
    cli(&["ping"])?;
    cli(&["nodes", "list"])?;
    cli(&[
        "jobs",
        "submit",
        "--name",
        "demo",
        "--wrap",
        "hostname; sleep 60",
    ])?;
    // The scheduler starts a new job within a few seconds; list it once it runs.
    for _ in 0..30 {
        let out = slurm(&["jobs", "list", "--output", "json"]).output()?;
        if !String::from_utf8_lossy(&out.stdout).contains("PENDING") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    cli(&["jobs", "list"])?;
    cli(&["accounts"])?;
    cli(&["qos"])?;

    println!(
        "\nThe cluster keeps running. Try it yourself:\n  set -a; . {env}; set +a\n  cargo run -p slurm-client --features cli --bin slurm -- jobs list\n  cargo xtask slurm exec -- squeue\nStop it with `cargo xtask slurm down`.",
        env = env_file.display()
    );
    let _ = state;
    Ok(())
}

/// `args` as one would type them in a shell: quoted where they hold spaces or shell characters.
fn shell_words(args: &[&str]) -> String {
    let word = |a: &&str| {
        if a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
        {
            a.to_string()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    args.iter().map(word).collect::<Vec<_>>().join(" ")
}

fn read_env(path: &Path) -> Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}
