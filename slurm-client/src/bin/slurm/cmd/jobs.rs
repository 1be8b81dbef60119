//! `slurm jobs …`: the queue (`squeue`, `scontrol show job`), `sbatch`, `scancel`,
//! `scontrol hold/release/requeue`.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use slurm_client::{Client, Job, JobQuery, JobState, JobSubmission, Limit, SubmittedJob};

use crate::batch;
use crate::cmd::{Context, directives};
use crate::exit::usage;
use crate::format::{self, NONE};
use crate::output::{self, Output, emit};
use crate::table::{Details, Table};

#[derive(Subcommand, Debug)]
pub enum JobsCommand {
    /// List jobs in the queue, like squeue (JSON: an array of Job).
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// Show one job in detail, like `scontrol show job` (JSON: a Job).
    Show {
        /// Job id.
        id: u32,
    },
    /// Submit a batch script or a command, like sbatch (JSON: a SubmittedJob). The script's
    /// #SBATCH lines are applied (slurmrestd itself ignores them); flags take precedence.
    Submit(Box<SubmitArgs>),
    /// Cancel jobs, like scancel (JSON: one {job_id, action, ok, error} per job).
    Cancel {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<u32>,
        /// Send this signal instead of killing the job (e.g. TERM, USR1, 15).
        #[arg(long, short = 's', value_name = "SIGNAL")]
        signal: Option<String>,
    },
    /// Hold pending jobs (they will not start until released).
    Hold {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<u32>,
    },
    /// Release held jobs.
    Release {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<u32>,
    },
    /// Finished and running jobs from slurmdbd, like sacct (JSON: an array of JobRecord).
    #[command(visible_alias = "sacct")]
    History(super::accounting::HistoryArgs),
    /// Requeue jobs (REST v0.0.45, Slurm 26.05, and later).
    Requeue {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<u32>,
    },
}

#[derive(clap::Args, Debug, Default)]
pub struct ListArgs {
    /// Only jobs of these users (comma-separated).
    #[arg(long, short = 'u', value_delimiter = ',', value_name = "USER")]
    users: Vec<String>,
    /// Only jobs in these partitions (comma-separated).
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "PARTITION")]
    partitions: Vec<String>,
    /// Only jobs in these states, e.g. pending,running (comma-separated).
    #[arg(long, short = 't', value_delimiter = ',', value_name = "STATE")]
    states: Vec<String>,
    /// Only jobs with these names (comma-separated).
    #[arg(long, short = 'n', value_delimiter = ',', value_name = "NAME")]
    names: Vec<String>,
    /// Include jobs in hidden partitions.
    #[arg(long, short = 'a')]
    all: bool,
}

/// `sbatch`'s options; the script's `#SBATCH` lines fill those not given here.
#[derive(clap::Args, Debug, Default)]
pub struct SubmitArgs {
    /// Batch script file (`-` reads standard input); must start with `#!`.
    #[arg(
        value_name = "SCRIPT",
        required_unless_present = "wrap",
        conflicts_with = "wrap"
    )]
    pub(super) script: Option<PathBuf>,
    /// Run this shell command instead of a script (like sbatch --wrap).
    #[arg(long, value_name = "COMMAND")]
    pub(super) wrap: Option<String>,
    /// Job name.
    #[arg(long, short = 'J', value_name = "NAME")]
    pub(super) name: Option<String>,
    /// Partition.
    #[arg(long, short = 'p', value_name = "PARTITION")]
    pub(super) partition: Option<String>,
    /// Account to charge.
    #[arg(long, short = 'A', value_name = "ACCOUNT")]
    pub(super) account: Option<String>,
    /// Quality of service.
    #[arg(long, short = 'q', value_name = "QOS")]
    pub(super) qos: Option<String>,
    /// Reservation to run in.
    #[arg(long, value_name = "NAME")]
    pub(super) reservation: Option<String>,
    /// Time limit: minutes, [D-]HH:MM:SS, or with a unit (2h).
    #[arg(long, short = 't', value_name = "TIME", value_parser = format::parse_time_limit)]
    pub(super) time: Option<Limit<u32>>,
    /// Number of nodes.
    #[arg(long, short = 'N', value_name = "N")]
    pub(super) nodes: Option<u32>,
    /// Number of tasks.
    #[arg(long, short = 'n', value_name = "N")]
    pub(super) ntasks: Option<u32>,
    /// CPUs per task.
    #[arg(long, short = 'c', value_name = "N")]
    pub(super) cpus_per_task: Option<u32>,
    /// Memory per node: MiB, or with a unit (512M, 4G).
    #[arg(long, value_name = "SIZE", value_parser = format::parse_memory_mb)]
    pub(super) mem: Option<u64>,
    /// Memory per CPU: MiB, or with a unit.
    #[arg(long, value_name = "SIZE", value_parser = format::parse_memory_mb, conflicts_with = "mem")]
    pub(super) mem_per_cpu: Option<u64>,
    /// Generic resources per node, e.g. gres/gpu:1.
    #[arg(long, value_name = "TRES")]
    pub(super) gres: Option<String>,
    /// Required node features.
    #[arg(long, short = 'C', value_name = "LIST")]
    pub(super) constraint: Option<String>,
    /// Working directory of the job, on the cluster's nodes (this machine's current
    /// directory may not exist there) [default: /tmp].
    #[arg(long, short = 'D', value_name = "DIR")]
    pub(super) chdir: Option<String>,
    /// Environment variable for the job, NAME=VALUE (repeatable; default only PATH).
    #[arg(long, value_name = "NAME=VALUE")]
    pub(super) env: Vec<String>,
    /// File for the job's standard output.
    #[arg(long, value_name = "FILE")]
    pub(super) stdout: Option<String>,
    /// File for the job's standard error.
    #[arg(long, value_name = "FILE")]
    pub(super) stderr: Option<String>,
    /// Comment.
    #[arg(long, value_name = "TEXT")]
    pub(super) comment: Option<String>,
    /// Dependency, e.g. afterok:123.
    #[arg(long, short = 'd', value_name = "DEPENDENCY")]
    pub(super) dependency: Option<String>,
    /// Job array indices, e.g. 0-9 or 1,3,5%2.
    #[arg(long, short = 'a', value_name = "INDICES")]
    pub(super) array: Option<String>,
    /// Submit held.
    #[arg(long, short = 'H')]
    pub(super) hold: bool,
    /// Nice value.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub(super) nice: Option<i64>,
}

pub async fn run(ctx: &Context, command: Option<JobsCommand>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(JobsCommand::List(ListArgs::default())) {
        JobsCommand::List(args) => list(ctx, &client, args).await,
        JobsCommand::Show { id } => {
            let response = client.get_job(id).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, show_job)
        }
        JobsCommand::Submit(args) => submit(ctx, &client, *args).await,
        JobsCommand::History(args) => super::accounting::history(ctx, args).await,
        JobsCommand::Cancel { ids, signal } => {
            let (action, done) = match signal {
                Some(_) => ("signal", "signalled"),
                None => ("cancel", "cancelled"),
            };
            each_job(ctx.output, action, done, &ids, |&id| {
                let client = client.clone();
                let signal = signal.clone();
                async move {
                    match signal {
                        Some(s) => client.signal_job(id, &s).await.map(|_| ()),
                        None => client.cancel_job(id).await.map(|_| ()),
                    }
                }
            })
            .await
        }
        JobsCommand::Hold { ids } => {
            each_job(ctx.output, "hold", "held", &ids, |&id| {
                let client = client.clone();
                async move { client.hold_job(id).await.map(|_| ()) }
            })
            .await
        }
        JobsCommand::Release { ids } => {
            each_job(ctx.output, "release", "released", &ids, |&id| {
                let client = client.clone();
                async move { client.release_job(id).await.map(|_| ()) }
            })
            .await
        }
        JobsCommand::Requeue { ids } => {
            each_job(ctx.output, "requeue", "requeued", &ids, |&id| {
                let client = client.clone();
                async move { client.requeue_job(id).await.map(|_| ()) }
            })
            .await
        }
    }
}

async fn list(ctx: &Context, client: &Client, args: ListArgs) -> anyhow::Result<()> {
    let mut query = JobQuery::new();
    query.all = args.all;
    query.users = args.users;
    query.partitions = args.partitions;
    query.names = args.names;
    query.states = args.states.iter().map(|s| JobState::parse(s)).collect();
    let response = client.list_jobs(&query).await?;
    output::warnings(&response.warnings);
    emit(ctx.output, &response.value.jobs, |jobs| job_table(jobs))
}

fn job_table(jobs: &[Job]) -> String {
    let now = format::now();
    let mut t = Table::new(&[
        "JOBID",
        "PARTITION",
        "NAME",
        "USER",
        "STATE",
        "TIME",
        "TIME_LIMIT",
        "NODES",
        "NODELIST(REASON)",
    ]);
    for job in jobs {
        let where_ = if job.is_pending() || job.nodes.is_none() {
            format!("({})", job.reason.as_deref().unwrap_or("None"))
        } else {
            format::opt(job.nodes.as_deref())
        };
        t.row(vec![
            job_id(job),
            format::opt(job.partition.as_deref()),
            job.name.clone(),
            job.user.clone(),
            state(job),
            run_time(job, now),
            format::minutes(job.time_limit_minutes),
            format::limit(job.node_count),
            where_,
        ]);
    }
    t.render()
}

/// `123`, or `123_4` / `123_[0-9]` for array jobs, as squeue shows them.
fn job_id(job: &Job) -> String {
    match &job.array {
        Some(a) => match (a.task_id, &a.task_string) {
            (Some(task), _) => format!("{}_{task}", a.job_id),
            (None, Some(tasks)) => format!("{}_[{tasks}]", a.job_id),
            (None, None) => job.id.to_string(),
        },
        None => job.id.to_string(),
    }
}

/// The base state with its flags, e.g. `RUNNING+COMPLETING`.
fn state(job: &Job) -> String {
    std::iter::once(job.state.to_string())
        .chain(job.state_flags.iter().map(ToString::to_string))
        .collect::<Vec<_>>()
        .join("+")
}

/// How long the job has run (so far).
fn run_time(job: &Job, now: i64) -> String {
    match job.start_time {
        Some(start) if !job.is_pending() => {
            let end = job
                .end_time
                .filter(|e| *e >= start && *e <= now)
                .unwrap_or(now);
            format::elapsed((end - start).max(0) as u64)
        }
        _ => "0:00".into(),
    }
}

fn show_job(job: &Job) -> String {
    let mut d = Details::new();
    d.add("JobId", job_id(job))
        .add("Name", job.name.clone())
        .add("User", job.user.clone())
        .add("Account", format::opt(job.account.as_deref()))
        .add("Partition", format::opt(job.partition.as_deref()))
        .add("QOS", format::opt(job.qos.as_deref()))
        .add("Reservation", format::opt(job.reservation.as_deref()))
        .add("State", state(job))
        .add("Reason", format::opt(job.reason.as_deref()))
        .add("Description", format::opt(job.state_description.as_deref()))
        .add("Held", if job.held { "yes" } else { "" })
        .add("Priority", format::limit(job.priority))
        .add("Nodes", format::opt(job.nodes.as_deref()))
        .add("NodeCount", format::limit(job.node_count))
        .add("CPUs", format::limit(job.cpus))
        .add("Tasks", format::limit(job.tasks))
        .add("CPUsPerTask", format::limit(job.cpus_per_task))
        .add("MemPerNode", memory(job.memory_per_node_mb))
        .add("MemPerCPU", memory(job.memory_per_cpu_mb))
        .add("TRES requested", super::tres(&job.tres_requested))
        .add("TRES allocated", super::tres(&job.tres_allocated))
        .add("TimeLimit", format::minutes(job.time_limit_minutes))
        .add("RunTime", run_time(job, format::now()))
        .add("SubmitTime", format::time(job.submit_time))
        .add("EligibleTime", format::time(job.eligible_time))
        .add("StartTime", format::time(job.start_time))
        .add("EndTime", format::time(job.end_time))
        .add(
            "ExitCode",
            if job.state.is_finished() {
                exit_code(job)
            } else {
                String::new()
            },
        )
        .add("BatchHost", format::opt(job.batch_host.as_deref()))
        .add("WorkDir", format::opt(job.working_directory.as_deref()))
        .add("StdOut", format::opt(job.stdout.as_deref()))
        .add("StdErr", format::opt(job.stderr.as_deref()))
        .add("Command", format::opt(job.command.as_deref()))
        .add("Dependency", format::opt(job.dependency.as_deref()))
        .add("Comment", format::opt(job.comment.as_deref()))
        .add(
            "Restarts",
            if job.restart_count > 0 {
                job.restart_count.to_string()
            } else {
                String::new()
            },
        );
    d.render()
}

/// A memory size, or nothing when unset or 0 (Slurm's "not asked for").
fn memory(mb: Limit<u64>) -> String {
    match mb {
        Limit::Value(0) | Limit::Unset => String::new(),
        Limit::Value(mb) => format::memory_mb(mb),
        Limit::Infinite => "UNLIMITED".into(),
    }
}

fn exit_code(job: &Job) -> String {
    let Some(e) = &job.exit_code else {
        return NONE.into();
    };
    match (e.return_code, &e.signal_name, e.signal) {
        (Some(rc), Some(name), _) => format!("{rc} (signal {name})"),
        (Some(rc), None, Some(sig)) if sig != 0 => format!("{rc}:{sig}"),
        (Some(rc), _, _) => rc.to_string(),
        _ => format::list(&e.status),
    }
}

async fn submit(ctx: &Context, client: &Client, mut args: SubmitArgs) -> anyhow::Result<()> {
    let mut job = match (args.script.clone(), &args.wrap) {
        (_, Some(command)) => JobSubmission::wrap(command),
        (Some(path), None) => {
            let script = read_script(&path)?;
            let ignored =
                directives::apply(&mut args, &directives::words(&script)).map_err(usage)?;
            for warning in ignored {
                eprintln!("warning: {warning}");
            }
            JobSubmission::script(script)
        }
        (None, None) => {
            return Err(usage(
                "give a script file (or - for standard input) or --wrap COMMAND",
            ));
        }
    };
    job.name = args.name.or_else(|| match &args.script {
        Some(path) if path.as_os_str() != "-" => {
            path.file_name().map(|n| n.to_string_lossy().into_owned())
        }
        _ => Some("wrap".into()),
    });
    job.partition = args.partition;
    job.account = args.account;
    job.qos = args.qos;
    job.reservation = args.reservation;
    job.time_limit_minutes = match args.time {
        Some(Limit::Value(m)) => Some(m),
        Some(_) => {
            return Err(usage(
                "--time needs a finite limit; leave it out for the partition's default",
            ));
        }
        None => None,
    };
    job.nodes = args.nodes;
    job.tasks = args.ntasks;
    job.cpus_per_task = args.cpus_per_task;
    job.memory_per_node_mb = args.mem;
    job.memory_per_cpu_mb = args.mem_per_cpu;
    job.tres_per_node = args.gres;
    job.constraints = args.constraint;
    job.working_directory = Some(args.chdir.unwrap_or_else(|| "/tmp".into()));
    for entry in &args.env {
        if !entry.contains('=') {
            return Err(usage(format!(
                "--env {entry:?} is not of the form NAME=VALUE"
            )));
        }
    }
    job.environment = args.env;
    job.stdout = args.stdout;
    job.stderr = args.stderr;
    job.comment = args.comment;
    job.dependency = args.dependency;
    job.array = args.array;
    job.hold = args.hold;
    job.nice = args.nice;

    let response = client
        .submit_job(&job)
        .await
        .with_context(|| submission(&job))?;
    output::warnings(&response.warnings);
    emit(ctx.output, &response.value, |s: &SubmittedJob| {
        let mut text = format!("Submitted job {}\n", s.job_id);
        if let Some(msg) = &s.user_message {
            text.push_str(msg);
            text.push('\n');
        }
        text
    })
}

/// What a rejected submission asked for: Slurm's reason ("Invalid partition name
/// specified") does not say which name it means.
fn submission(job: &JobSubmission) -> String {
    let named = [
        ("partition", &job.partition),
        ("account", &job.account),
        ("qos", &job.qos),
        ("reservation", &job.reservation),
    ];
    let asked: Vec<String> = named
        .iter()
        .filter_map(|(what, name)| name.as_ref().map(|n| format!("{what} {n}")))
        .collect();
    if asked.is_empty() {
        "job submission".into()
    } else {
        format!("job submission ({})", asked.join(", "))
    }
}

fn read_script(path: &std::path::Path) -> anyhow::Result<String> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| usage(format!("cannot read the script from standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read script {}: {e}", path.display())))?
    };
    if !text.starts_with("#!") {
        return Err(usage(format!(
            "script {} does not start with `#!` (e.g. #!/bin/sh)",
            path.display()
        )));
    }
    Ok(text)
}

/// Runs `op` on each job; see [`batch::each`]. JSON: one {job_id, action, ok, error} per job.
async fn each_job<F, Fut>(
    output: Output,
    action: &str,
    done: &str,
    ids: &[u32],
    op: F,
) -> anyhow::Result<()>
where
    F: Fn(&u32) -> Fut,
    Fut: std::future::Future<Output = Result<(), slurm_client::Error>>,
{
    batch::each(output, "Job", "job_id", action, done, ids, op).await
}
