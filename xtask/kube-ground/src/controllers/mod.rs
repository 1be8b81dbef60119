//! Test-only stand-ins for kube-controller-manager and kube-scheduler, no more clever than the
//! operator's and the bridge's tests need: the default scheduler (binds pods of
//! `default-scheduler` to a fitting node), ReplicaSet, Deployment (through ReplicaSets; old ones
//! scaled to zero at once), StatefulSet (ordinal pods, PVCs from claim templates, OrderedReady or
//! Parallel, pods replaced highest ordinal first on a template change), Job (completions,
//! parallelism, backoffLimit, activeDeadlineSeconds), Service → EndpointSlice and Endpoints, and a
//! binder that marks every PersistentVolumeClaim Bound (the kubelet gives each claim a directory),
//! except that a WaitForFirstConsumer claim waits for its selected node and gets a volume there.

mod common;
mod deployment;

mod endpoints;
mod job;
mod replicaset;
mod scheduler;
mod statefulset;
mod volumes;

use anyhow::{Context, Result};
use kube::Client;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> Result<()> {
    let client = Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG)")?;
    tracing::info!("controllers running");
    tokio::try_join!(
        scheduler::run(client.clone()),
        replicaset::run(client.clone()),
        deployment::run(client.clone()),
        statefulset::run(client.clone()),
        job::run(client.clone()),
        endpoints::run(client.clone()),
        volumes::run(client),
    )?;
    Ok(())
}
