//! Choosing the REST version: the newest one both compiled in and served.

use serde::de::IgnoredAny;

use crate::client::Client;
use crate::envelope::Meta;
use crate::error::Error;
use crate::request::Request;
use crate::version::ApiVersion;

/// The outcome of version negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Negotiated {
    /// The REST version requests use.
    pub version: ApiVersion,
    /// The server's Slurm release (`meta.slurm.release`), e.g. `"24.11.5"`.
    pub release: Option<String>,
    /// The cluster name (`meta.slurm.cluster`).
    pub cluster: Option<String>,
}

/// Pings `version`; `None` when the server does not serve it (HTTP 404).
async fn ping(client: &Client, version: ApiVersion) -> Result<Option<Meta>, Error> {
    let path = format!("/slurm/{version}/ping");
    match client.request::<IgnoredAny>(Request::get(path)).await {
        Ok(response) => Ok(Some(response.meta)),
        Err(Error::NotFound { status: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) async fn negotiate(client: &Client) -> Result<Negotiated, Error> {
    let candidates: Vec<ApiVersion> = match client.pinned_version() {
        Some(v) => vec![v],
        None => ApiVersion::compiled().into_iter().rev().collect(),
    };
    for &version in &candidates {
        if let Some(meta) = ping(client, version).await? {
            tracing::debug!(%version, release = ?meta.release, "negotiated Slurm REST version");
            return Ok(Negotiated {
                version,
                release: meta.release,
                cluster: meta.cluster,
            });
        }
    }
    Err(Error::NoCommonVersion { tried: candidates })
}

pub(crate) async fn served_versions(client: &Client) -> Result<Vec<ApiVersion>, Error> {
    let mut served = Vec::new();
    for version in ApiVersion::ALL {
        if ping(client, version).await?.is_some() {
            served.push(version);
        }
    }
    Ok(served)
}
