//! `slurm reservations …`: advanced reservations (`scontrol show reservation`).

use clap::Subcommand;
use slurm_client::Reservation;

use crate::cmd::Context;
use crate::format;
use crate::output::{self, emit};
use crate::table::{Details, Table};

#[derive(Subcommand, Debug)]
pub enum ReservationsCommand {
    /// List reservations (the default; JSON: an array of Reservation).
    #[command(visible_alias = "ls")]
    List,
    /// Show one reservation in detail (JSON: a Reservation).
    Show {
        /// Reservation name.
        name: String,
    },
}

pub async fn run(ctx: &Context, command: Option<ReservationsCommand>) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match command.unwrap_or(ReservationsCommand::List) {
        ReservationsCommand::List => {
            let response = client.list_reservations(None).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value.reservations, |r| table(r))
        }
        ReservationsCommand::Show { name } => {
            let response = client.get_reservation(&name).await?;
            output::warnings(&response.warnings);
            emit(ctx.output, &response.value, show)
        }
    }
}

fn table(reservations: &[Reservation]) -> String {
    let mut t = Table::new(&[
        "RESERVATION",
        "START",
        "END",
        "NODES",
        "USERS",
        "ACCOUNTS",
        "FLAGS",
    ]);
    for r in reservations {
        t.row(vec![
            r.name.clone(),
            format::time(r.start_time),
            format::time(r.end_time),
            format::opt(r.nodes.as_deref()),
            format::list(&r.users),
            format::list(&r.accounts),
            format::list(&r.flags),
        ]);
    }
    t.render()
}

fn show(r: &Reservation) -> String {
    let mut d = Details::new();
    d.add("ReservationName", r.name.clone())
        .add("StartTime", format::time(r.start_time))
        .add("EndTime", format::time(r.end_time))
        .add("Nodes", format::opt(r.nodes.as_deref()))
        .add("NodeCount", r.node_count.to_string())
        .add("CoreCount", r.core_count.to_string())
        .add("Partition", format::opt(r.partition.as_deref()))
        .add("Users", format::list(&r.users))
        .add("Accounts", format::list(&r.accounts))
        .add("Groups", format::list(&r.groups))
        .add("Flags", format::list(&r.flags))
        .add("Features", format::opt(r.features.as_deref()))
        .add("Licenses", format::opt(r.licenses.as_deref()))
        .add("TRES", super::tres(&r.tres))
        .add("BurstBuffer", format::opt(r.burst_buffer.as_deref()))
        .add(
            "MaxStartDelay",
            format::opt(r.max_start_delay.map(|s| format!("{s}s"))),
        );
    d.render()
}
