//! The Slurm side of a cluster as a reconciler sees it: its client (through the oldest RestApi
//! of the Controller) and its node view.

use kube::ResourceExt;
use secrecy::ExposeSecret;
use slurm_client::Client;

use super::{Context, Error, secrets};
use crate::crd::Controller;
use crate::render::hash::checksum;
use crate::slurm::{ClusterKey, Endpoint};

/// The cluster key of `controller`.
pub fn key(controller: &Controller) -> ClusterKey {
    ClusterKey {
        namespace: controller.namespace().unwrap_or_default(),
        controller: controller.name_any(),
    }
}

/// The Slurm client of `controller`'s cluster; `Ok(None)` when the cluster has no RestApi.
pub async fn client(ctx: &Context, controller: &Controller) -> Result<Option<Client>, Error> {
    let ns = controller.namespace().ok_or(Error::Unnamed)?;
    let name = controller.name_any();
    let mut ours = ctx
        .cache
        .restapis
        .list(&ns, |r| r.spec.controller_ref.name == name);
    // The oldest one, as Slinky's operator picks it: stable while others come and go.
    ours.sort_by_key(|r| {
        (
            r.metadata.creation_timestamp.clone().map(|t| t.0),
            r.name_any(),
        )
    });
    let Some(restapi) = ours.first() else {
        ctx.slurm.remove(&key(controller));
        return Ok(None);
    };
    let jwt_ref = controller.spec.jwt_key_ref().ok_or_else(|| {
        Error::InvalidSpec("spec.jwtKeyRef is required to reach slurmrestd".into())
    })?;
    let jwt_key = secrets::key(ctx, &ns, jwt_ref, "spec.jwtKeyRef").await?;
    let endpoint = Endpoint {
        url: format!("http://{}-restapi.{ns}:6820", restapi.name_any()),
        key_hash: checksum(jwt_key.expose_secret()),
    };
    Ok(Some(ctx.slurm.client(
        &key(controller),
        endpoint,
        jwt_key.expose_secret(),
    )?))
}
