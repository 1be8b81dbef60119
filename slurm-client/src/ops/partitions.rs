//! Partitions: list and get.

use crate::model::{Partition, PartitionList};
use crate::{Client, Error, Meta, Request, Response, path_segment};

impl Client {
    /// Lists partitions (`GET /slurm/vX/partitions/`). With `update_time`, an unchanged
    /// set gives [`PartitionList::unchanged`].
    pub async fn list_partitions(
        &self,
        update_time: Option<i64>,
    ) -> Result<Response<PartitionList>, Error> {
        let version = self.version().await?;
        let mut request = Request::get(format!("/slurm/{version}/partitions/"));
        if let Some(time) = update_time {
            let value = super::jobs::update_time_param(version, time);
            request = request.query("update_time", value);
        }
        match dispatch!(self, "partition listing", list(self, request)) {
            Err(Error::Status { status: 304, .. }) => Ok(Response {
                value: PartitionList {
                    unchanged: true,
                    ..PartitionList::default()
                },
                warnings: Vec::new(),
                meta: Meta::default(),
                status: 304,
            }),
            other => other,
        }
    }

    /// One partition (`GET /slurm/vX/partition/{name}`); [`Error::NotFound`] if unknown.
    pub async fn get_partition(&self, name: &str) -> Result<Response<Partition>, Error> {
        if name.trim().is_empty() {
            return Err(Error::Config("partition name is empty".into()));
        }
        let version = self.version().await?;
        let path = format!("/slurm/{version}/partition/{}", path_segment(name));
        let missing = |e: &crate::SlurmError| {
            e.description
                .as_deref()
                .is_some_and(|d| d.contains("Unable to find partition"))
        };
        let response = dispatch!(
            self,
            "partition query",
            list(self, Request::get(path.clone()))
        )
        .map_err(|e| super::rejected_as_not_found(e, missing))?;
        super::single(response, path, |list| list.partitions, |p| p.name == name)
    }
}

/// The part every version shares; expects the aliases `PartitionsResp` and `PartitionItem`.
macro_rules! partitions_version {
    () => {
        use crate::model::{Partition, PartitionList, Tres, epoch, text};
        use crate::ops::{id32, strings};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn list(
            client: &Client,
            request: Request,
        ) -> Result<Response<PartitionList>, Error> {
            let response = client.request::<PartitionsResp>(request).await?;
            Ok(response.map(|r| PartitionList {
                partitions: r
                    .partitions
                    .map(Vec::<PartitionItem>::from)
                    .unwrap_or_default()
                    .into_iter()
                    .map(partition)
                    .collect(),
                last_update: epoch(noval!(r.last_update).value()),
                unchanged: false,
            }))
        }

        fn partition(p: PartitionItem) -> Partition {
            let nodes = p.nodes.unwrap_or_default();
            let maximums = p.maximums.unwrap_or_default();
            let defaults = p.defaults.unwrap_or_default();
            let priority = p.priority.unwrap_or_default();
            let qos = p.qos.unwrap_or_default();
            let accounts = p.accounts.unwrap_or_default();
            let tres = p.tres.unwrap_or_default();
            Partition {
                name: p.name.unwrap_or_default(),
                state: strings(p.partition.unwrap_or_default().state),
                nodes: text(nodes.configured),
                node_count: id32(nodes.total).unwrap_or_default(),
                cpus: id32(p.cpus.unwrap_or_default().total).unwrap_or_default(),
                default_time_minutes: noval!(defaults.time).narrow(),
                max_time_minutes: noval!(maximums.time).narrow(),
                max_nodes: noval!(maximums.nodes).narrow(),
                min_nodes: id32(p.minimums.unwrap_or_default().nodes).unwrap_or_default(),
                max_cpus_per_node: noval!(maximums.cpus_per_node).narrow(),
                priority_tier: id32(priority.tier).unwrap_or_default(),
                priority_job_factor: id32(priority.job_factor).unwrap_or_default(),
                qos: text(qos.assigned),
                allowed_accounts: text(accounts.allowed),
                denied_accounts: text(accounts.deny),
                allowed_groups: text(p.groups.unwrap_or_default().allowed),
                allowed_qos: text(qos.allowed),
                tres: Tres::parse(tres.configured.as_deref().unwrap_or_default()),
                billing_weights: text(tres.billing_weights),
                alternate: text(p.alternate),
                grace_time: id32(p.grace_time).unwrap_or_default(),
                cluster: text(p.cluster),
            }
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type PartitionsResp = t::V0040OpenapiPartitionResp;
    type PartitionItem = t::V0040PartitionInfo;
    partitions_version!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type PartitionsResp = t::V0041OpenapiPartitionResp;
    type PartitionItem = t::V0041OpenapiPartitionRespPartitionsItem;
    partitions_version!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type PartitionsResp = t::V0042OpenapiPartitionResp;
    type PartitionItem = t::V0042PartitionInfo;
    partitions_version!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type PartitionsResp = t::V0043OpenapiPartitionResp;
    type PartitionItem = t::V0043PartitionInfo;
    partitions_version!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type PartitionsResp = t::V0044OpenapiPartitionResp;
    type PartitionItem = t::V0044PartitionInfo;
    partitions_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type PartitionsResp = t::V0045OpenapiPartitionResp;
    type PartitionItem = t::V0045PartitionInfo;
    partitions_version!();
}
