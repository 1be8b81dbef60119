//! `slurm`: a command-line client for slurmrestd, for people and scripts, built on the
//! version-neutral API of `slurm-client` (cargo feature `cli`).
//!
//! # Output
//!
//! Tables by default; `--output json` prints JSON whose field names are those of the
//! library's model types (`slurm_client::Job`, `slurm_client::SubmittedJob`, …, serialized
//! with serde), the same whichever REST version the server speaks: a list command prints
//! an array of them, a `show` command one object. `get PATH` prints the server's answer
//! as it is.
//!
//! # Exit codes
//!
//! See [`exit`]: 0 ok, 1 rejected by Slurm or other error, 2 usage or configuration
//! error, 3 authentication failed, 4 not found, 5 server unreachable or timed out,
//! 6 not supported by the server's REST version.

mod batch;
mod cmd;
mod config;
mod exit;
mod format;
mod output;
mod table;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::Connection;
use crate::output::Output;

const AFTER_HELP: &str = "\
Configuration:
  The connection flags default to the environment variables of slurm_client::Client::from_env:
  SLURM_REST_URL, SLURM_JWT (a token; environment only), SLURM_JWT_FILE, SLURM_JWT_KEY with
  SLURM_USER_NAME (tokens minted locally, lifespan SLURM_JWT_LIFESPAN, e.g. 30m), SLURM_REST_VERSION,
  SLURM_REST_CA_FILE, SLURM_REST_CLIENT_CERT/KEY. Flags override variables; of the token sources,
  a flag wins, then SLURM_JWT, SLURM_JWT_FILE, SLURM_JWT_KEY in that order.

JSON output (--output json):
  Field names are those of the slurm_client model types (Job, Node, SubmittedJob, ...), stable
  across REST versions: lists print an array, `show` prints one object. Times are UNIX epoch
  seconds, memory MiB, time limits minutes; \"infinite\" or null for unlimited or unset numbers.

Exit codes:
  0  success
  1  Slurm rejected the request, or another error
  2  usage or configuration error (bad flags, unreadable file, missing SLURM_REST_URL)
  3  authentication failed (token rejected, expired or missing)
  4  not found (unknown job, node, ...)
  5  slurmrestd unreachable, connection failed or timed out (or it cannot reach slurmctld)
  6  not supported by the REST version the server speaks

Examples:
  export SLURM_REST_URL=http://127.0.0.1:6820 SLURM_JWT=$(slurm token --key jwt_hs256.key --user root)
  slurm ping
  slurm jobs submit --wrap 'sleep 60' --partition debug --time 5
  slurm jobs list --users alice --output json | jq '.[].id'
  slurm get /slurm/{version}/diag";

/// Talk to Slurm through slurmrestd: jobs, nodes, partitions, accounting, tokens.
#[derive(Parser, Debug)]
#[command(
    name = "slurm",
    version,
    after_long_help = AFTER_HELP,
    after_help = "Configuration, JSON fields and exit codes: see `slurm --help`.",
    propagate_version = true,
    disable_help_subcommand = true
)]
struct Cli {
    /// Output format.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Table)]
    output: Output,

    /// Log requests to stderr (repeat for more detail); tokens are never logged.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(flatten)]
    connection: Connection,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check that slurmrestd and slurmctld answer; show REST version and Slurm release.
    Ping(cmd::ping::Args),
    /// List (the default), show, submit, cancel, hold, release and requeue jobs; job history.
    Jobs {
        #[command(subcommand)]
        command: Option<cmd::jobs::JobsCommand>,
    },
    /// List (the default) and show nodes; drain, resume or down them.
    Nodes {
        #[command(subcommand)]
        command: Option<cmd::nodes::NodesCommand>,
    },
    /// List (the default) or show partitions.
    Partitions {
        #[command(subcommand)]
        command: Option<cmd::partitions::PartitionsCommand>,
    },
    /// List (the default) or show advanced reservations.
    Reservations {
        #[command(subcommand)]
        command: Option<cmd::reservations::ReservationsCommand>,
    },
    /// Licenses slurmctld manages (JSON: an array of License).
    Licenses,
    /// slurmctld statistics, like sdiag (JSON: a Diag).
    Diag(cmd::diag::Args),
    /// Accounts in slurmdbd, like `sacctmgr show account` (JSON: Account objects).
    Accounts {
        #[command(subcommand)]
        command: Option<cmd::accounting::ListOrShow>,
    },
    /// Users in slurmdbd, like `sacctmgr show user` (JSON: User objects).
    Users {
        #[command(subcommand)]
        command: Option<cmd::accounting::ListOrShow>,
    },
    /// Quality-of-service levels, like `sacctmgr show qos` (JSON: Qos objects).
    Qos {
        #[command(subcommand)]
        command: Option<cmd::accounting::ListOrShow>,
    },
    /// Mint a JWT from the cluster's HS256 key (prints only the token).
    Token(cmd::token::Args),
    /// GET any slurmrestd path and print the JSON answer (`{version}` = the REST version).
    Get(cmd::get::Args),
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::report(&anyhow::Error::new(e).context("cannot start runtime")),
    };
    let ctx = cmd::Context {
        connection: cli.connection,
        output: cli.output,
    };
    match runtime.block_on(run(cli.command, &ctx)) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => exit::report(&e),
    }
}

async fn run(command: Command, ctx: &cmd::Context) -> anyhow::Result<()> {
    match command {
        Command::Ping(args) => cmd::ping::run(ctx, args).await,
        Command::Jobs { command } => cmd::jobs::run(ctx, command).await,
        Command::Nodes { command } => cmd::nodes::run(ctx, command).await,
        Command::Partitions { command } => cmd::partitions::run(ctx, command).await,
        Command::Reservations { command } => cmd::reservations::run(ctx, command).await,
        Command::Licenses => cmd::licenses::run(ctx).await,
        Command::Diag(args) => cmd::diag::run(ctx, args).await,
        Command::Accounts { command } => cmd::accounting::accounts(ctx, command).await,
        Command::Users { command } => cmd::accounting::users(ctx, command).await,
        Command::Qos { command } => cmd::accounting::qos(ctx, command).await,
        Command::Token(args) => cmd::token::run(ctx, args),
        Command::Get(args) => cmd::get::run(ctx, args).await,
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => "slurm_client=debug",
        _ => "slurm_client=trace,reqwest=debug",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::new(level))
        .init();
}
