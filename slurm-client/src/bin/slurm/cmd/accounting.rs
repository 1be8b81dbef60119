//! Accounting through slurmdbd (`/slurmdb/`): `slurm accounts`, `users`, `qos` (like
//! `sacctmgr show …`) and `slurm jobs history` (like `sacct`).

use clap::Subcommand;
use slurm_client::{Account, JobRecord, JobRecordQuery, JobState, Qos, User};

use crate::cmd::Context;
use crate::format::{self, NONE};
use crate::output::{self, emit};
use crate::table::{Details, Table};

/// `list` (the default) or `show NAME`.
#[derive(Subcommand, Debug, Clone)]
pub enum ListOrShow {
    /// List them all (the default).
    #[command(visible_alias = "ls")]
    List,
    /// Show one in detail.
    Show {
        /// Name.
        name: String,
    },
}

pub async fn accounts(ctx: &Context, command: Option<ListOrShow>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(ListOrShow::List) {
        ListOrShow::List => {
            let response = client.list_accounts().await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, |accounts| {
                let mut t = Table::new(&["ACCOUNT", "DESCRIPTION", "ORGANIZATION", "COORDINATORS"]);
                for a in accounts {
                    t.row(account_row(a));
                }
                t.render()
            })
        }
        ListOrShow::Show { name } => {
            let response = client.get_account(&name).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, |a| {
                let mut d = Details::new();
                d.add("Account", a.name.clone())
                    .add("Description", format::opt(a.description.as_deref()))
                    .add("Organization", format::opt(a.organization.as_deref()))
                    .add("Coordinators", format::list(&a.coordinators))
                    .add("Flags", format::list(&a.flags));
                d.render()
            })
        }
    }
}

fn account_row(a: &Account) -> Vec<String> {
    vec![
        a.name.clone(),
        format::opt(a.description.as_deref()),
        format::opt(a.organization.as_deref()),
        format::list(&a.coordinators),
    ]
}

pub async fn users(ctx: &Context, command: Option<ListOrShow>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(ListOrShow::List) {
        ListOrShow::List => {
            let response = client.list_users().await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, |users| {
                let mut t = Table::new(&["USER", "DEFAULT_ACCOUNT", "ADMIN", "ACCOUNTS"]);
                for u in users {
                    t.row(user_row(u));
                }
                t.render()
            })
        }
        ListOrShow::Show { name } => {
            let response = client.get_user(&name).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, |u| {
                let mut d = Details::new();
                d.add("User", u.name.clone())
                    .add("DefaultAccount", format::opt(u.default_account.as_deref()))
                    .add("DefaultWCKey", format::opt(u.default_wckey.as_deref()))
                    .add("AdminLevel", format::opt(u.administrator_level.as_deref()))
                    .add("Accounts", format::list(&u.accounts))
                    .add("CoordinatorOf", format::list(&u.coordinator_of))
                    .add("Flags", format::list(&u.flags));
                d.render()
            })
        }
    }
}

fn user_row(u: &User) -> Vec<String> {
    vec![
        u.name.clone(),
        format::opt(u.default_account.as_deref()),
        format::opt(u.administrator_level.as_deref()),
        format::list(&u.accounts),
    ]
}

pub async fn qos(ctx: &Context, command: Option<ListOrShow>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(ListOrShow::List) {
        ListOrShow::List => {
            let response = client.list_qos().await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, |list| {
                let mut t = Table::new(&[
                    "QOS",
                    "PRIORITY",
                    "MAX_WALL",
                    "MAX_JOBS_PU",
                    "MAX_SUBMIT_PU",
                    "MAX_TRES_PU",
                    "PREEMPT_MODE",
                    "FLAGS",
                ]);
                for q in list {
                    t.row(qos_row(q));
                }
                t.render()
            })
        }
        ListOrShow::Show { name } => {
            let response = client.get_qos(&name).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, show_qos)
        }
    }
}

fn qos_row(q: &Qos) -> Vec<String> {
    let l = &q.limits;
    vec![
        q.name.clone(),
        format::limit(q.priority),
        format::minutes(l.max_wall_minutes_per_job),
        format::limit(l.max_jobs_per_user),
        format::limit(l.max_submit_jobs_per_user),
        tres_or_none(&l.max_tres_per_user),
        format::list(&q.preempt_mode),
        format::list(&q.flags),
    ]
}

fn show_qos(q: &Qos) -> String {
    let l = &q.limits;
    let mut d = Details::new();
    d.add("QOS", q.name.clone())
        .add("Description", format::opt(q.description.as_deref()))
        .add("Priority", format::limit(q.priority))
        .add("UsageFactor", format::limit(q.usage_factor))
        .add("UsageThreshold", format::limit(q.usage_threshold))
        .add("LimitFactor", format::limit(q.limit_factor))
        .add(
            "GraceTime",
            format::opt(q.grace_time_seconds.map(|s| format!("{s}s"))),
        )
        .add("Flags", format::list(&q.flags))
        .add("Preempt", format::list(&q.preempt))
        .add("PreemptMode", format::list(&q.preempt_mode))
        .add("PreemptExemptTime", format::limit(q.preempt_exempt_seconds))
        .add("MaxJobsPerUser", format::limit(l.max_jobs_per_user))
        .add("MaxJobsPerAccount", format::limit(l.max_jobs_per_account))
        .add(
            "MaxSubmitJobsPerUser",
            format::limit(l.max_submit_jobs_per_user),
        )
        .add(
            "MaxSubmitJobsPerAccount",
            format::limit(l.max_submit_jobs_per_account),
        )
        .add("MaxTRESPerUser", super::tres(&l.max_tres_per_user))
        .add("MaxTRESPerAccount", super::tres(&l.max_tres_per_account))
        .add("MaxTRESPerJob", super::tres(&l.max_tres_per_job))
        .add("MaxTRESPerNode", super::tres(&l.max_tres_per_node))
        .add("MaxWall", format::minutes(l.max_wall_minutes_per_job))
        .add("GrpJobs", format::limit(l.grp_jobs))
        .add("GrpSubmitJobs", format::limit(l.grp_submit_jobs))
        .add("GrpTRES", super::tres(&l.grp_tres))
        .add("GrpWall", format::minutes(l.grp_wall_minutes));
    d.render()
}

fn tres_or_none(tres: &slurm_client::Tres) -> String {
    if tres.is_empty() {
        NONE.into()
    } else {
        super::tres(tres)
    }
}

/// `slurm jobs history`: finished and running jobs from slurmdbd.
#[derive(clap::Args, Debug, Default)]
pub struct HistoryArgs {
    /// Only these job ids (comma-separated).
    #[arg(long, short = 'j', value_delimiter = ',', value_name = "ID")]
    jobs: Vec<u32>,
    /// Only jobs of these users (comma-separated).
    #[arg(long, short = 'u', value_delimiter = ',', value_name = "USER")]
    users: Vec<String>,
    /// Only jobs charged to these accounts (comma-separated).
    #[arg(long, short = 'A', value_delimiter = ',', value_name = "ACCOUNT")]
    accounts: Vec<String>,
    /// Only jobs in these partitions (comma-separated).
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "PARTITION")]
    partitions: Vec<String>,
    /// Only jobs in these states, e.g. completed,failed (comma-separated).
    #[arg(long, short = 't', value_delimiter = ',', value_name = "STATE")]
    states: Vec<String>,
    /// Only jobs with these names (comma-separated).
    #[arg(long, short = 'n', value_delimiter = ',', value_name = "NAME")]
    names: Vec<String>,
    /// Only jobs in these QOS (comma-separated).
    #[arg(long, short = 'q', value_delimiter = ',', value_name = "QOS")]
    qos: Vec<String>,
    /// Jobs eligible or running since: a time ago (2h, 7d), `YYYY-MM-DD` or
    /// `YYYY-MM-DDTHH:MM[:SS]` (UTC) [default: midnight, as sacct].
    #[arg(long, short = 'S', value_name = "WHEN", value_parser = format::parse_time)]
    since: Option<i64>,
    /// Jobs eligible or running until (same forms as --since) [default: now].
    #[arg(long, short = 'E', value_name = "WHEN", value_parser = format::parse_time)]
    until: Option<i64>,
    /// Also list each job's steps (batch, extern, …).
    #[arg(long)]
    steps: bool,
}

pub async fn history(ctx: &Context, args: HistoryArgs) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let mut query = JobRecordQuery::new();
    query.job_ids = args.jobs;
    query.users = args.users;
    query.accounts = args.accounts;
    query.partitions = args.partitions;
    query.states = args.states.iter().map(|s| JobState::parse(s)).collect();
    query.names = args.names;
    query.qos = args.qos;
    query.start_time = args.since;
    query.end_time = args.until;
    query.skip_steps = !args.steps && ctx.output == output::Output::Table;
    let response = client.job_history(&query).await?;
    output::warnings(&response.warnings);
    emit(ctx.output, &response.value, |jobs| {
        history_table(jobs, args.steps)
    })
}

fn history_table(jobs: &[JobRecord], steps: bool) -> String {
    let mut t = Table::new(&[
        "JOBID",
        "NAME",
        "USER",
        "ACCOUNT",
        "PARTITION",
        "STATE",
        "EXITCODE",
        "START",
        "ELAPSED",
        "NODELIST",
    ]);
    for j in jobs {
        let id = match (j.array_job_id, j.array_task_id) {
            (Some(array), Some(task)) if array != j.id || task > 0 => format!("{array}_{task}"),
            _ => j.id.to_string(),
        };
        t.row(vec![
            id.clone(),
            j.name.clone(),
            j.user.clone(),
            format::opt(j.account.as_deref()),
            format::opt(j.partition.as_deref()),
            j.state.to_string(),
            exit_code(j.exit_code.as_ref()),
            format::time(j.start_time),
            format::elapsed(j.elapsed_seconds),
            format::opt(j.nodes.as_deref()),
        ]);
        if steps {
            for s in &j.steps {
                t.row(vec![
                    format!("{id}.{}", s.id.rsplit('.').next().unwrap_or(&s.id)),
                    format::opt(s.name.as_deref()),
                    String::new(),
                    String::new(),
                    String::new(),
                    s.state.to_string(),
                    exit_code(s.exit_code.as_ref()),
                    format::time(s.start_time),
                    format::elapsed(s.elapsed_seconds),
                    format::opt(s.nodes.as_deref()),
                ]);
            }
        }
    }
    t.render()
}

/// `rc:signal`, as sacct shows it.
fn exit_code(code: Option<&slurm_client::ExitCode>) -> String {
    match code {
        Some(e) => format!(
            "{}:{}",
            e.return_code.unwrap_or_default(),
            e.signal.unwrap_or_default()
        ),
        None => NONE.into(),
    }
}
