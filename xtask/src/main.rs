//! The project's own tasks: `cargo xtask --help`.

mod generate;
mod slurm;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Development tasks for the slurm-rs workspace"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Local Slurm clusters for development and tests.
    #[command(subcommand)]
    Slurm(slurm::SlurmCmd),
    /// Generate slurm-client's per-version modules from openapi/*.json and openapi/overlay.json.
    Generate {
        /// Fail, naming the stale files, if the committed generated code differs.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Slurm(cmd) => slurm::run(cmd),
        Cmd::Generate { check } => generate::run(check),
    }
}
