//! A running job's resources, node by node (`GET /slurm/vX/resources/{id}`).

use crate::model::NodeLayout;
use crate::{Client, Error, Request, Response, path_segment};

impl Client {
    /// Where running job `id` holds its resources, node by node in Slurm's order (REST
    /// v0.0.44+, Slurm 25.11+; older versions give [`Error::Unsupported`] for `"job resource
    /// layout"` and nothing is sent). About 1 KiB a node against the 10 KiB of
    /// [`Client::get_job`]: the cheap way to learn where a job that just started runs.
    ///
    /// A job that is not running is an error (Slurm's "Job is not running"); one slurmctld
    /// does not know is [`Error::NotFound`].
    pub async fn job_layout(&self, id: u32) -> Result<Response<Vec<NodeLayout>>, Error> {
        let version = self.version().await?;
        let request = Request::get(format!(
            "/slurm/{version}/resources/{}",
            path_segment(&id.to_string())
        ))
        .idempotent(true);
        dispatch!(self, "job resource layout", layout(self, request))
    }
}

/// Shared by every version that has the call; expects the alias `LayoutResp`.
macro_rules! layout_version {
    () => {
        use crate::model::{GresLayout, NodeLayout};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn layout(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<NodeLayout>>, Error> {
            let response = client.request::<LayoutResp>(request).await?;
            Ok(response.map(|r| {
                r.nodes
                    .map(Vec::from)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| NodeLayout {
                        node: n.node.unwrap_or_default(),
                        sockets: n.sockets_per_node.and_then(|v| u32::try_from(v).ok()),
                        cores_per_socket: n.cores_per_socket.and_then(|v| u32::try_from(v).ok()),
                        core_bitmap: n.core_bitmap.filter(|b| !b.is_empty()),
                        memory_mb: n.mem_alloc.and_then(|v| u64::try_from(v).ok()),
                        gres: n
                            .gres
                            .map(Vec::from)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|g| GresLayout {
                                name: g.name.unwrap_or_default(),
                                kind: g.type_.filter(|t| !t.is_empty()),
                                count: g.count.and_then(|v| u64::try_from(v).ok()).unwrap_or(0),
                                index: g.index.filter(|i| !i.is_empty()),
                            })
                            .collect(),
                    })
                    .collect()
            }))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    unsupported! { layout(request: crate::Request) -> crate::Response<Vec<crate::model::NodeLayout>> = "job resource layout"; }
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    unsupported! { layout(request: crate::Request) -> crate::Response<Vec<crate::model::NodeLayout>> = "job resource layout"; }
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    unsupported! { layout(request: crate::Request) -> crate::Response<Vec<crate::model::NodeLayout>> = "job resource layout"; }
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    unsupported! { layout(request: crate::Request) -> crate::Response<Vec<crate::model::NodeLayout>> = "job resource layout"; }
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    type LayoutResp = crate::v0_0_44::types::V0044OpenapiResourceLayoutResp;
    layout_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    type LayoutResp = crate::v0_0_45::types::V0045OpenapiResourceLayoutResp;
    layout_version!();
}
