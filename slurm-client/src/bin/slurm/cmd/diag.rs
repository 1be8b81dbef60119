//! `slurm diag`: slurmctld statistics, like `sdiag`.

use slurm_client::Diag;

use crate::cmd::Context;
use crate::format;
use crate::output::{self, emit};
use crate::table::{Details, Table};

/// JSON: a Diag.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also list the RPC statistics by message type and by user.
    #[arg(long)]
    rpcs: bool,
}

pub async fn run(ctx: &Context, args: Args) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let response = client.diag().await?;
    output::warnings(&response.warnings);
    emit(ctx.output, &response.value, |d| render(d, args.rpcs))
}

fn render(d: &Diag, rpcs: bool) -> String {
    let us = |v: u64| format!("{:.1}ms", v as f64 / 1000.0);
    let mut general = Details::new();
    general
        .add("Time", format::time(d.time))
        .add("Statistics since", format::time(d.since))
        .add("Server threads", d.server_thread_count.to_string())
        .add("Agent queue size", d.agent_queue_size.to_string())
        .add("Agent count", d.agent_count.to_string())
        .add("Agent threads", d.agent_thread_count.to_string())
        .add("DBD agent queue size", d.dbd_agent_queue_size.to_string());
    let j = &d.jobs;
    let mut jobs = Details::new();
    jobs.add("Jobs submitted", j.submitted.to_string())
        .add("Jobs started", j.started.to_string())
        .add("Jobs completed", j.completed.to_string())
        .add("Jobs canceled", j.canceled.to_string())
        .add("Jobs failed", j.failed.to_string())
        .add("Jobs pending", j.pending.to_string())
        .add("Jobs running", j.running.to_string());
    let s = &d.scheduler;
    let mut main = Details::new();
    main.add("Main scheduler cycles", s.cycles.to_string())
        .add("Last cycle", us(s.cycle_last_us))
        .add("Max cycle", us(s.cycle_max_us))
        .add("Mean cycle", us(s.cycle_mean_us))
        .add("Mean depth", s.mean_depth.to_string())
        .add("Cycles per minute", s.cycles_per_minute.to_string())
        .add("Last queue length", s.queue_length.to_string());
    let b = &d.backfill;
    let mut backfill = Details::new();
    backfill
        .add("Backfill cycles", b.cycles.to_string())
        .add("Active", if b.active { "yes" } else { "no" })
        .add("Backfilled jobs", b.backfilled_jobs.to_string())
        .add(
            "Backfilled since last cycle",
            b.last_backfilled_jobs.to_string(),
        )
        .add("Last cycle", us(b.cycle_last_us))
        .add("Last cycle at", format::time(b.last_cycle_time))
        .add("Max cycle", us(b.cycle_max_us))
        .add("Mean cycle", us(b.cycle_mean_us))
        .add(
            "Last depth (tried)",
            format!("{} ({})", b.last_depth, b.last_depth_try),
        )
        .add("Last queue length", b.queue_length.to_string());
    let mut out = [general, jobs, main, backfill]
        .iter()
        .map(Details::render)
        .collect::<Vec<_>>()
        .join("\n");
    if rpcs {
        let mut by_type = Table::new(&["RPC", "COUNT", "AVG_TIME", "TOTAL_TIME"]);
        let mut types: Vec<_> = d.rpcs_by_type.iter().collect();
        types.sort_by_key(|r| std::cmp::Reverse(r.count));
        for r in types {
            by_type.row(vec![
                r.message_type.clone(),
                r.count.to_string(),
                us(r.average_time_us),
                us(r.total_time_us),
            ]);
        }
        let mut by_user = Table::new(&["USER", "COUNT", "AVG_TIME", "TOTAL_TIME"]);
        let mut users: Vec<_> = d.rpcs_by_user.iter().collect();
        users.sort_by_key(|r| std::cmp::Reverse(r.count));
        for r in users {
            by_user.row(vec![
                r.user.clone(),
                r.count.to_string(),
                us(r.average_time_us),
                us(r.total_time_us),
            ]);
        }
        out.push('\n');
        out.push_str(&by_type.render());
        out.push('\n');
        out.push_str(&by_user.render());
    }
    out
}
