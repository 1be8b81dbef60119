//! `cargo xtask demo`: a real Slurm cluster, and the project's tools working against it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

const RELEASE: Release = Release::R26_05;

pub fn run(workspace: &Path) -> Result<()> {
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
    let slurm_bin = workspace.join("target/debug/slurm");

    let cli = |args: &[&str]| -> Result<()> {
        println!("\n$ slurm {}", args.join(" "));
        let status = Command::new(&slurm_bin)
            .args(args)
            .envs(env.iter().cloned())
            .status()?;
        if !status.success() {
            bail!("`slurm {}` failed ({status})", args.join(" "));
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
        "hostname; sleep 20",
    ])?;
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
