//! ScheduledUpdate's Slurm reservation (`SlurmOperatorMaint-<N>`): looked up, created,
//! updated or deleted as [`crate::planner::scheduled::reservation_action`] decides, with the
//! finalizer `nodeset.slinky.slurm.net/reservation` held while it may exist and the
//! `ReservationCreated` condition.
//!
//! Fail closed: when the reservation cannot be looked up nothing is created, deleted or
//! replaced. A Slurm whose REST API cannot write reservations (Slurm 24.11) gets a condition
//! and one event naming the missing feature; the rest of the NodeSet keeps working.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use slurm_client::model::{Node, Reservation};
use slurm_client::{Client, ErrorKind};

use super::super::apply::FIELD_MANAGER;
use super::super::conditions::Wanted;
use super::super::{Context, Error};
use crate::crd::{NodeSet, UpdateStrategyType};
use crate::planner::PodView;
use crate::planner::scheduled::{
    CONDITION, FINALIZER, ReservationAction, ReservationInput, Schedule, reservation_action,
    reservation_name,
};

/// What the pass learned about the reservation.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The reservation's name when it exists in Slurm (pods in maintenance inside it are
    /// replaced); `None` when it does not or could not be looked up.
    pub replace_under: Option<String>,
    /// The `ReservationCreated` condition to set, if any.
    pub condition: Option<Wanted>,
    /// A failure to report after everything else was done.
    pub error: Option<Error>,
}

fn wants_reservation(nodeset: &NodeSet) -> bool {
    nodeset.spec.update_strategy_type() == UpdateStrategyType::ScheduledUpdate
}

fn has_finalizer(nodeset: &NodeSet) -> bool {
    nodeset.finalizers().iter().any(|f| f == FINALIZER)
}

fn current_condition(nodeset: &NodeSet) -> Option<Condition> {
    let value = serde_json::to_value(nodeset).ok()?;
    let conditions: Vec<Condition> =
        serde_json::from_value(value.pointer("/status/conditions")?.clone()).ok()?;
    conditions.into_iter().find(|c| c.type_ == CONDITION)
}

fn condition(exists: bool, message: String) -> Wanted {
    Wanted {
        type_: CONDITION.into(),
        status: if exists { "True" } else { "False" },
        reason: if exists { "Created" } else { "NotExists" }.into(),
        message,
    }
}

/// Adds (`true`) or removes the finalizer, guarded by the object's resourceVersion.
pub async fn set_finalizer(ctx: &Context, nodeset: &NodeSet, present: bool) -> Result<(), Error> {
    if has_finalizer(nodeset) == present {
        return Ok(());
    }
    let mut finalizers: Vec<String> = nodeset
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if present {
        finalizers.push(FINALIZER.into());
    }
    let ns = nodeset.namespace().ok_or(Error::Unnamed)?;
    let api: Api<NodeSet> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({ "metadata": {
        "finalizers": finalizers,
        "resourceVersion": nodeset.resource_version(),
    }});
    api.patch(
        &nodeset.name_any(),
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}

async fn lookup(ctx: &Context, slurm: &Client, name: &str) -> Result<Option<Reservation>, Error> {
    let r = slurm.get_reservation(name).await;
    ctx.metrics.slurm_call("get_reservation", &r);
    match r {
        Ok(found) => Ok(Some(found.value)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the reservation if it exists; `Ok` once it is gone (or cannot exist).
async fn remove(ctx: &Context, nodeset: &NodeSet, slurm: &Client) -> Result<(), Error> {
    let name = reservation_name(&nodeset.name_any());
    if lookup(ctx, slurm, &name).await?.is_none() {
        return Ok(());
    }
    let r = slurm.delete_reservation(&name).await;
    ctx.metrics.slurm_call("delete_reservation", &r);
    match r {
        Ok(_) => {
            ctx.event(
                nodeset,
                false,
                "ReservationDeleted",
                "Delete",
                format!("deleted Slurm reservation {name}"),
            )
            .await;
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The NodeSet is being deleted: delete its reservation, then let it go. Without a cluster
/// (Controller or RestApi gone) there is nothing to delete and the finalizer is removed.
pub async fn finalize(
    ctx: &Context,
    nodeset: &NodeSet,
    slurm: Option<&Client>,
) -> Result<(), Error> {
    if !has_finalizer(nodeset) {
        return Ok(());
    }
    if let Some(slurm) = slurm {
        remove(ctx, nodeset, slurm).await?;
    }
    set_finalizer(ctx, nodeset, false).await
}

/// One pass: decide and apply the reservation's next step. `pods` are the NodeSet's pods,
/// `nodes` the cluster's Slurm nodes (`None`: unknown, nothing is done).
pub async fn sync(
    ctx: &Context,
    nodeset: &NodeSet,
    slurm: Option<&Client>,
    pods: &[PodView],
    nodes: Option<&HashMap<String, Node>>,
) -> Outcome {
    let mut out = Outcome::default();
    let wanted = wants_reservation(nodeset);
    if !wanted && !has_finalizer(nodeset) {
        return out;
    }
    let name = reservation_name(&nodeset.name_any());
    let Some(slurm) = slurm else {
        // No RestApi: no reservation can exist.
        if !wanted {
            out.error = set_finalizer(ctx, nodeset, false).await.err();
        }
        return out;
    };
    if !wanted {
        // The strategy changed away: delete the reservation, then drop the finalizer.
        out.error = match remove(ctx, nodeset, slurm).await {
            Ok(()) => set_finalizer(ctx, nodeset, false).await.err(),
            Err(e) => Some(e),
        };
        if out.error.is_none() && current_condition(nodeset).is_some() {
            out.condition = Some(condition(
                false,
                format!("updateStrategy is not ScheduledUpdate; reservation {name} deleted"),
            ));
        }
        return out;
    }

    let spec = &nodeset.spec;
    let sched = &spec.update_strategy.scheduled_update;
    let (Some(start), Some(duration)) = (&sched.start_time, spec.scheduled_update_duration())
    else {
        out.error = Some(Error::InvalidSpec(
            "updateStrategy.scheduledUpdate needs a startTime and a valid duration".into(),
        ));
        return out;
    };
    let schedule = Schedule::new(start.0, duration, &sched.flags);
    let Some(nodes) = nodes else {
        return out; // Slurm nodes unknown: the node-listing error is reported by the caller.
    };
    let existing = match lookup(ctx, slurm, &name).await {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let registered: Vec<&Node> = pods
        .iter()
        // Terminating pods too: their nodes stay reserved until the replacement registers.
        .filter(|p| !p.wrong_scaling_mode)
        .filter_map(|p| nodes.get(&p.slurm_node))
        .collect();
    let action = reservation_action(&ReservationInput {
        name: &name,
        schedule: Some(&schedule),
        replicas: spec.replicas().max(0) as u32,
        nodes: &registered,
        existing: existing.as_ref(),
        now: jiff::Timestamp::now(),
    });
    if !matches!(
        action,
        ReservationAction::Keep(_) | ReservationAction::Delete
    ) {
        // Held before anything is created, so that a deletion always cleans up.
        if let Err(e) = set_finalizer(ctx, nodeset, true).await {
            out.error = Some(e);
            return out;
        }
    }
    let (result, verb) = match &action {
        ReservationAction::Keep(why) => {
            let exists = existing.is_some();
            out.replace_under = exists.then(|| name.clone());
            out.condition = Some(condition(
                exists,
                if exists {
                    format!("Slurm reservation {name} exists")
                } else {
                    format!("Slurm reservation {name} not created: {why}")
                },
            ));
            if exists && let Err(e) = set_finalizer(ctx, nodeset, true).await {
                out.error = Some(e);
            }
            return out;
        }
        ReservationAction::Create(spec) => {
            let r = slurm.create_reservation(spec).await;
            ctx.metrics.slurm_call("create_reservation", &r);
            (r, "created")
        }
        ReservationAction::Update(update) => {
            let r = slurm.update_reservation(&name, update).await;
            ctx.metrics.slurm_call("update_reservation", &r);
            (r, "updated")
        }
        ReservationAction::Delete => {
            let r = slurm.delete_reservation(&name).await;
            ctx.metrics.slurm_call("delete_reservation", &r);
            (r, "deleted")
        }
    };
    let exists_after = match &action {
        ReservationAction::Delete => result.is_err() && existing.is_some(),
        ReservationAction::Update(_) => true,
        _ => result.is_ok(),
    };
    // Pods are replaced only under a reservation that was there before this pass.
    out.replace_under = (existing.is_some() && exists_after).then(|| name.clone());
    match result {
        Ok(_) => {
            ctx.event(
                nodeset,
                false,
                "ReservationSynced",
                "Reservation",
                format!("{verb} Slurm reservation {name}"),
            )
            .await;
            out.condition = Some(condition(
                exists_after,
                format!("Slurm reservation {name} {verb}"),
            ));
        }
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            let message = format!(
                "updateStrategy ScheduledUpdate needs Slurm reservations written through the REST API (v0.0.43+, Slurm 25.05 or later): {e}; pods are not replaced"
            );
            let already = current_condition(nodeset).is_some_and(|c| c.reason == "Unsupported");
            if !already {
                ctx.event(
                    nodeset,
                    true,
                    "ReservationUnsupported",
                    "Reservation",
                    message.clone(),
                )
                .await;
            }
            out.condition = Some(Wanted {
                type_: CONDITION.into(),
                status: "False",
                reason: "Unsupported".into(),
                message,
            });
        }
        Err(e) => out.error = Some(e.into()),
    }
    out
}
