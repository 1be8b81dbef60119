//! Reservations: nodes, cores, start and end.

use std::time::{SystemTime, UNIX_EPOCH};

use slurm_client::Reservation;

use super::labels::{list_label, state_label};
use super::{CollectFuture, Collected, Ctx, Source, SourceKind};
use crate::family::Family;

/// The reservation source.
pub struct Reservations;

impl Source for Reservations {
    fn kind(&self) -> SourceKind {
        SourceKind::Reservations
    }

    fn collect<'a>(&'a mut self, ctx: &'a Ctx) -> CollectFuture<'a> {
        Box::pin(async move {
            let list = ctx
                .call(ctx.client.list_reservations(None))
                .await?
                .into_value();
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            Ok(Collected::Families(families(&list.reservations, now)))
        })
    }
}

/// The reservation families, `now` in Unix seconds.
pub fn families(reservations: &[Reservation], now: i64) -> Vec<Family> {
    let r = &["reservation"];
    let mut info = Family::info(
        "slurm_reservation",
        "Facts about the reservation: partition, nodes, flags, users and accounts.",
        &[
            "reservation",
            "partition",
            "nodes",
            "flags",
            "users",
            "accounts",
        ],
    );
    let mut nodes = Family::gauge("slurm_reservation_nodes", "Nodes in the reservation.", r);
    let mut cores = Family::gauge("slurm_reservation_cores", "Cores in the reservation.", r);
    let mut start = Family::gauge(
        "slurm_reservation_start_timestamp_seconds",
        "When the reservation starts (Unix time).",
        r,
    );
    let mut end = Family::gauge(
        "slurm_reservation_end_timestamp_seconds",
        "When the reservation ends (Unix time).",
        r,
    );
    let mut active = Family::gauge(
        "slurm_reservation_active",
        "Whether the reservation is in effect at collection time (1) or not (0).",
        r,
    );
    for res in reservations {
        let name = [res.name.as_str()];
        let flags: Vec<String> = res.flags.iter().map(|f| state_label(f)).collect();
        info.info_series(&[
            res.name.as_str(),
            res.partition.as_deref().unwrap_or(""),
            res.nodes.as_deref().unwrap_or(""),
            &list_label(&flags),
            &list_label(&res.users),
            &list_label(&res.accounts),
        ]);
        nodes.set(&name, res.node_count.into());
        cores.set(&name, res.core_count.into());
        start.set_opt(&name, res.start_time.map(|t| t as f64));
        end.set_opt(&name, res.end_time.map(|t| t as f64));
        let started = res.start_time.is_some_and(|t| t <= now);
        let not_ended = res.end_time.is_none_or(|t| now < t);
        active.set(&name, if started && not_ended { 1.0 } else { 0.0 });
    }
    vec![info, nodes, cores, start, end, active]
}
