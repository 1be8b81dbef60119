//! Nodes: list, get, update (drain/resume/down, features, …), delete, create.

use crate::model::{Node, NodeList, NodeQuery, NodeStateChange, NodeUpdate};
use crate::{Client, Error, Meta, Request, Response, path_segment};

impl Client {
    /// Lists nodes (`GET /slurm/vX/nodes/`).
    ///
    /// With [`NodeQuery::update_time`] set, slurmctld answers with every node if anything
    /// changed since then, and with none ([`NodeList::unchanged`], HTTP 304) otherwise.
    /// Slurm 24.11 cannot answer that question while its partitions are unchanged (HTTP 500
    /// "Unable to query partitions"); the listing then falls back to every node.
    pub async fn list_nodes(&self, query: &NodeQuery) -> Result<Response<NodeList>, Error> {
        let version = self.version().await?;
        let base = Request::get(format!("/slurm/{version}/nodes/"));
        let base = if query.all {
            base.query("flags", "ALL")
        } else {
            base
        };
        let Some(time) = query.update_time else {
            return dispatch!(self, "node listing", list(self, base));
        };
        let since = base
            .clone()
            .query("update_time", super::jobs::update_time_param(version, time));
        match not_modified(dispatch!(self, "node listing", list(self, since))) {
            Err(e) if partitions_unchanged(&e) => {
                dispatch!(self, "node listing", list(self, base))
            }
            other => other,
        }
    }

    /// One node (`GET /slurm/vX/node/{name}`); [`Error::NotFound`] if there is no such node.
    pub async fn get_node(&self, name: &str) -> Result<Response<Node>, Error> {
        let path = node_path(self, name).await?;
        // An unknown node comes back as error 0 "Failure to query node …" (HTTP 200).
        let missing = |e: &crate::SlurmError| e.error_number == Some(0);
        let response = dispatch!(self, "node query", list(self, Request::get(path.clone())))
            .map_err(|e| super::rejected_as_not_found(e, missing))?;
        super::single(response, path, |list| list.nodes, |n| n.name == name)
    }

    /// Changes a node (`POST /slurm/vX/node/{name}`; `name` may be a hostlist such as
    /// `node[1-3]`).
    pub async fn update_node(
        &self,
        name: &str,
        update: &NodeUpdate,
    ) -> Result<Response<()>, Error> {
        update
            .validate()
            .map_err(|e| Error::Config(format!("invalid update of node {name}: {e}")))?;
        let path = node_path(self, name).await?;
        dispatch!(self, "node update", update(self, path, update))
            .map_err(|e| super::rejected_as_not_found(e, invalid_node_name))
    }

    /// Drains a node: no new jobs, running ones finish (`scontrol update state=DRAIN`).
    pub async fn drain_node(&self, name: &str, reason: &str) -> Result<Response<()>, Error> {
        let update = NodeUpdate::state(NodeStateChange::Drain, Some(reason));
        self.update_node(name, &update).await
    }

    /// Returns a drained, down or failed node to service (`state=RESUME`).
    pub async fn resume_node(&self, name: &str) -> Result<Response<()>, Error> {
        self.update_node(name, &NodeUpdate::state(NodeStateChange::Resume, None))
            .await
    }

    /// Sets a node down, killing its jobs (`state=DOWN`).
    pub async fn down_node(&self, name: &str, reason: &str) -> Result<Response<()>, Error> {
        let update = NodeUpdate::state(NodeStateChange::Down, Some(reason));
        self.update_node(name, &update).await
    }

    /// Deletes a (dynamic or future) node (`DELETE /slurm/vX/node/{name}`).
    pub async fn delete_node(&self, name: &str) -> Result<Response<()>, Error> {
        let path = node_path(self, name).await?;
        dispatch!(self, "node deletion", delete(self, path))
            .map_err(|e| super::rejected_as_not_found(e, invalid_node_name))
    }

    /// Creates a dynamic node from a `slurm.conf` node line, e.g.
    /// `NodeName=dyn1 CPUs=2 RealMemory=1024 State=FUTURE` (`POST /slurm/vX/new/node/`).
    /// REST v0.0.44 and later (Slurm 25.11+); [`Error::Unsupported`] before.
    pub async fn create_node(&self, node_conf: &str) -> Result<Response<()>, Error> {
        if !node_conf
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("nodename=")
        {
            return Err(Error::Config(format!(
                "invalid node definition {node_conf:?}: expected a slurm.conf line starting with NodeName="
            )));
        }
        let version = self.version().await?;
        let path = format!("/slurm/{version}/new/node/");
        dispatch!(self, "node creation", create(self, path, node_conf))
    }
}

/// Slurm error 2018, ESLURM_INVALID_NODE_NAME: what updating or deleting an unknown node gives.
fn invalid_node_name(e: &crate::SlurmError) -> bool {
    e.error_number == Some(2018)
}

async fn node_path(client: &Client, name: &str) -> Result<String, Error> {
    if name.trim().is_empty() {
        return Err(Error::Config("node name is empty".into()));
    }
    let version = client.version().await?;
    Ok(format!("/slurm/{version}/node/{}", path_segment(name)))
}

/// slurmrestd answers `update_time` polls of an unchanged cluster with HTTP 304 and no body.
/// Slurm 24.11 answers a node listing with `update_time` by HTTP 500 "Unable to query
/// partitions" whenever the partitions did not change since then, even if nodes did: its
/// slurmrestd treats the partitions' "no change" as a failure. The full listing works.
fn partitions_unchanged(e: &Error) -> bool {
    matches!(e, Error::Rejected { errors, .. } if errors.iter().any(|e| {
        e.source.as_deref() == Some("_dump_nodes")
            && e.description.as_deref() == Some("Unable to query partitions")
    }))
}

fn not_modified(result: Result<Response<NodeList>, Error>) -> Result<Response<NodeList>, Error> {
    match result {
        Err(Error::Status { status: 304, .. }) => Ok(Response {
            value: NodeList {
                unchanged: true,
                ..NodeList::default()
            },
            warnings: Vec::new(),
            meta: Meta::default(),
            status: 304,
        }),
        other => other,
    }
}

/// What [`Client::list_nodes`] does with a 2xx answer of `version`, without the HTTP
/// request: the same decoding and conversion (for the fuzz targets, `crate::__fuzz`).
pub(crate) fn listing_from_body(
    version: crate::ApiVersion,
    body: Vec<u8>,
) -> Result<Response<NodeList>, Error> {
    let path = format!("/slurm/{version}/nodes/");
    #[allow(unreachable_patterns)]
    match version {
        #[cfg(feature = "v0_0_40")]
        crate::ApiVersion::V0_0_40 => v0_0_40::list_from_body(&path, body),
        #[cfg(feature = "v0_0_41")]
        crate::ApiVersion::V0_0_41 => v0_0_41::list_from_body(&path, body),
        #[cfg(feature = "v0_0_42")]
        crate::ApiVersion::V0_0_42 => v0_0_42::list_from_body(&path, body),
        #[cfg(feature = "v0_0_43")]
        crate::ApiVersion::V0_0_43 => v0_0_43::list_from_body(&path, body),
        #[cfg(feature = "v0_0_44")]
        crate::ApiVersion::V0_0_44 => v0_0_44::list_from_body(&path, body),
        #[cfg(feature = "v0_0_45")]
        crate::ApiVersion::V0_0_45 => v0_0_45::list_from_body(&path, body),
        other => Err(Error::unsupported("node listing", other, None)),
    }
}

/// The part every version shares; expects the aliases `NodesResp`, `NodeItem`,
/// `UpdateReq`, `PlainResp` and the functions `topology` and `set_topology` in scope.
macro_rules! nodes_version {
    () => {
        use crate::model::{
            Limit, Node, NodeFlag, NodeList, NodeState, NodeUpdate, Tres, epoch, split_states, text,
        };
        use crate::ops::{id32, strings, wire};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn list(
            client: &Client,
            request: Request,
        ) -> Result<Response<NodeList>, Error> {
            let response = client.request::<NodesResp>(request).await?;
            Ok(response.map(node_list))
        }

        /// What [`list`] does with a 2xx answer, without the request (for the fuzz targets).
        pub(super) fn list_from_body(
            path: &str,
            body: Vec<u8>,
        ) -> Result<Response<NodeList>, Error> {
            let reply =
                crate::transport::read_answer::<NodesResp>(&crate::Method::GET, path, 200, body)?;
            Ok(Response::from(reply).map(node_list))
        }

        fn node_list(r: NodesResp) -> NodeList {
            NodeList {
                nodes: r
                    .nodes
                    .map(Vec::<NodeItem>::from)
                    .unwrap_or_default()
                    .into_iter()
                    .map(node)
                    .collect(),
                last_update: epoch(noval!(r.last_update).value()),
                unchanged: false,
            }
        }

        fn node(n: NodeItem) -> Node {
            let topology = topology(&n);
            let (state, state_flags) = split_states(
                strings(n.state),
                NodeState::parse,
                NodeFlag::parse,
                NodeState::Unknown,
            );
            Node {
                name: n.name.unwrap_or_default(),
                hostname: text(n.hostname),
                address: text(n.address),
                state,
                state_flags,
                reason: text(n.reason),
                reason_set_by: text(n.reason_set_by_user),
                reason_changed_at: epoch(noval!(n.reason_changed_at).value()),
                cpus: id32(n.cpus).unwrap_or_default(),
                cpus_allocated: id32(n.alloc_cpus).unwrap_or_default(),
                cpus_idle: id32(n.alloc_idle_cpus).unwrap_or_default(),
                cpu_load: id32(n.cpu_load),
                sockets: id32(n.sockets),
                cores_per_socket: id32(n.cores),
                threads_per_core: id32(n.threads),
                memory_mb: n
                    .real_memory
                    .and_then(|m| u64::try_from(m).ok())
                    .unwrap_or_default(),
                memory_allocated_mb: n
                    .alloc_memory
                    .and_then(|m| u64::try_from(m).ok())
                    .unwrap_or_default(),
                memory_free_mb: noval!(n.free_mem).narrow(),
                gres: text(n.gres),
                gres_used: text(n.gres_used),
                tres: Tres::parse(n.tres.as_deref().unwrap_or_default()),
                tres_used: Tres::parse(n.tres_used.as_deref().unwrap_or_default()),
                features: strings(n.features),
                active_features: strings(n.active_features),
                partitions: strings(n.partitions),
                reservation: text(n.reservation),
                weight: id32(n.weight),
                comment: text(n.comment),
                extra: text(n.extra),
                boot_time: epoch(noval!(n.boot_time).value()),
                slurmd_start_time: epoch(noval!(n.slurmd_start_time).value()),
                last_busy: epoch(noval!(n.last_busy).value()),
                version: text(n.version),
                architecture: text(n.architecture),
                operating_system: text(n.operating_system),
                topology,
            }
        }

        pub(super) async fn update(
            client: &Client,
            path: String,
            update: &NodeUpdate,
        ) -> Result<Response<()>, Error> {
            let u = update.clone();
            let mut body = UpdateReq::default();
            if let Err(operation) = set_topology(&mut body, u.topology) {
                return Err(client.unsupported(operation).await);
            }
            body.state = u.state.map(|s| vec![s.as_str().to_string()].into());
            body.reason = u.reason;
            body.features = u.features.map(Into::into);
            body.features_act = u.active_features.map(Into::into);
            body.comment = u.comment;
            body.extra = u.extra;
            if let Some(weight) = u.weight {
                body.weight = wire(Limit::Value(weight));
            }
            let request = Request::post(path).json(&body);
            Ok(client.request::<PlainResp>(request).await?.map(|_| ()))
        }

        pub(super) async fn delete(client: &Client, path: String) -> Result<Response<()>, Error> {
            Ok(client
                .request::<PlainResp>(Request::delete(path))
                .await?
                .map(|_| ()))
        }
    };
}

/// A node's topology (`topology`, update `topology_str`): v0.0.43+.
#[allow(unused_macros)] // not every version needs it
macro_rules! node_topology {
    () => {
        fn topology(n: &NodeItem) -> Option<String> {
            n.topology.clone().filter(|t| !t.is_empty())
        }

        fn set_topology(
            body: &mut UpdateReq,
            topology: Option<String>,
        ) -> Result<(), &'static str> {
            body.topology_str = topology;
            Ok(())
        }
    };
}

/// Before v0.0.43 (Slurm 25.05) nodes have no topology of their own.
#[allow(unused_macros)] // not every version needs it
macro_rules! no_node_topology {
    () => {
        fn topology(_: &NodeItem) -> Option<String> {
            None
        }

        fn set_topology(_: &mut UpdateReq, topology: Option<String>) -> Result<(), &'static str> {
            match topology {
                Some(_) => Err("node topology update"),
                None => Ok(()),
            }
        }
    };
}

/// `POST /new/node/` (v0.0.44+).
#[allow(unused_macros)] // not every version needs it
macro_rules! create_node {
    ($create:ty) => {
        pub(super) async fn create(
            client: &Client,
            path: String,
            node_conf: &str,
        ) -> Result<Response<()>, Error> {
            let mut body = <$create>::default();
            body.node_conf = Some(node_conf.to_string());
            let request = Request::post(path).json(&body);
            Ok(client.request::<PlainResp>(request).await?.map(|_| ()))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type NodesResp = t::V0040OpenapiNodesResp;
    type NodeItem = t::V0040Node;
    type UpdateReq = t::V0040UpdateNodeMsg;
    type PlainResp = t::V0040OpenapiResp;
    no_node_topology!();
    nodes_version!();
    unsupported! { create(path: String, conf: &str) -> Response<()> = "node creation"; }
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type NodesResp = t::V0041OpenapiNodesResp;
    type NodeItem = t::V0041OpenapiNodesRespNodesItem;
    type UpdateReq = t::V0041UpdateNodeMsg;
    type PlainResp = t::V0041OpenapiResp;
    no_node_topology!();
    nodes_version!();
    unsupported! { create(path: String, conf: &str) -> Response<()> = "node creation"; }
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type NodesResp = t::V0042OpenapiNodesResp;
    type NodeItem = t::V0042Node;
    type UpdateReq = t::V0042UpdateNodeMsg;
    type PlainResp = t::V0042OpenapiResp;
    no_node_topology!();
    nodes_version!();
    unsupported! { create(path: String, conf: &str) -> Response<()> = "node creation"; }
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type NodesResp = t::V0043OpenapiNodesResp;
    type NodeItem = t::V0043Node;
    type UpdateReq = t::V0043UpdateNodeMsg;
    type PlainResp = t::V0043OpenapiResp;
    node_topology!();
    nodes_version!();
    unsupported! { create(path: String, conf: &str) -> Response<()> = "node creation"; }
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type NodesResp = t::V0044OpenapiNodesResp;
    type NodeItem = t::V0044Node;
    type UpdateReq = t::V0044UpdateNodeMsg;
    type PlainResp = t::V0044OpenapiResp;
    node_topology!();
    nodes_version!();
    create_node!(t::V0044OpenapiCreateNodeReq);
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type NodesResp = t::V0045OpenapiNodesResp;
    type NodeItem = t::V0045Node;
    type UpdateReq = t::V0045UpdateNodeMsg;
    type PlainResp = t::V0045OpenapiResp;
    node_topology!();
    nodes_version!();
    create_node!(t::V0045OpenapiCreateNodeReq);
}
