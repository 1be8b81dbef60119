//! What the rules of one review need from the cluster, fetched before the (pure) validation:
//! only in the namespace of the object under review (the server checks that the request and
//! the object agree on it first), all at once, and under one deadline for the whole review, so
//! that the answer is in before the API server's webhook timeout however many references the
//! object has and however slow the API server is. A lookup still out at the deadline is a
//! [`Lookup::Failed`] that says so; the rules then deny or warn, naming what was not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use kube::{Api, ResourceExt};
use tokio::time::Instant;

use super::verdict::{Lookup, Lookups};
use crate::crd::{Accounting, Controller, LoginSet, NodeSet, RestApi, Token};

/// The API server's default webhook timeout (`timeoutSeconds` of the configuration and chart).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the lookups of one review may take when the API server gives the call `timeout`:
/// three seconds less (the API server's connection, the body, validating and answering), but
/// never less than half of it.
pub fn lookup_time(timeout: Duration) -> Duration {
    timeout
        .saturating_sub(Duration::from_secs(3))
        .max(timeout / 2)
}

/// The ConfigMaps of a Controller's `configFileRefs` (their keys), and its HA claim's access
/// modes when HA is on.
pub async fn controller(client: &kube::Client, ns: &str, new: &Controller, by: Instant) -> Lookups {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let names: BTreeSet<&str> = new
        .spec
        .config_file_refs
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let config_maps = join_all(names.into_iter().map(|name| {
        let get = maps.get_opt(name);
        async move {
            let keys = |cm: ConfigMap| -> BTreeSet<String> {
                let data = cm.data.unwrap_or_default().into_keys();
                let binary = cm.binary_data.unwrap_or_default().into_keys();
                data.chain(binary).collect()
            };
            (name.to_string(), lookup(by, get, keys).await)
        }
    }));
    let claim = async {
        let claim = new.spec.existing_claim().filter(|_| new.spec.ha.enabled)?;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        let modes =
            |pvc: PersistentVolumeClaim| pvc.spec.and_then(|s| s.access_modes).unwrap_or_default();
        Some((
            claim.to_string(),
            lookup(by, claims.get_opt(claim), modes).await,
        ))
    };
    let (config_maps, claim) = futures::join!(config_maps, claim);
    Lookups {
        config_maps: config_maps.into_iter().collect(),
        claims: claim.into_iter().collect(),
        ..Lookups::default()
    }
}

/// A new NodeSet's Controller (whether it exists).
pub async fn nodeset(
    client: &kube::Client,
    ns: &str,
    new: &NodeSet,
    created: bool,
    by: Instant,
) -> Lookups {
    let name = new.spec.controller_ref.name.as_str();
    let mut found = Lookups::default();
    if created && !name.is_empty() {
        let controllers: Api<Controller> = Api::namespaced(client.clone(), ns);
        let l = lookup(by, controllers.get_metadata_opt(name), |_| ()).await;
        found.controllers.insert(name.to_string(), l);
    }
    found
}

/// The metadata (never the data) of the Secret a Token writes, to tell whose it is.
pub async fn token(client: &kube::Client, ns: &str, new: &Token, by: Instant) -> Lookups {
    let name = new.spec.secret_ref(&new.name_any()).name;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let l = lookup(by, secrets.get_metadata_opt(&name), |s| s.metadata).await;
    Lookups {
        secrets: BTreeMap::from([(name, l)]),
        ..Lookups::default()
    }
}

/// A kind whose rules need lookups: [`Looked::lookups`] makes them for one review.
pub(super) trait Looked: Sized {
    /// The lookups for `self` (with `old` on UPDATE) in `ns`, all given up at `by`.
    fn lookups<'a>(
        &'a self,
        old: Option<&'a Self>,
        client: &'a kube::Client,
        ns: &'a str,
        by: Instant,
    ) -> impl Future<Output = Lookups> + Send + 'a;
}

impl Looked for Controller {
    fn lookups<'a>(
        &'a self,
        _: Option<&'a Self>,
        client: &'a kube::Client,
        ns: &'a str,
        by: Instant,
    ) -> impl Future<Output = Lookups> + Send + 'a {
        controller(client, ns, self, by)
    }
}

impl Looked for NodeSet {
    fn lookups<'a>(
        &'a self,
        old: Option<&'a Self>,
        client: &'a kube::Client,
        ns: &'a str,
        by: Instant,
    ) -> impl Future<Output = Lookups> + Send + 'a {
        nodeset(client, ns, self, old.is_none(), by)
    }
}

impl Looked for Token {
    fn lookups<'a>(
        &'a self,
        _: Option<&'a Self>,
        client: &'a kube::Client,
        ns: &'a str,
        by: Instant,
    ) -> impl Future<Output = Lookups> + Send + 'a {
        token(client, ns, self, by)
    }
}

/// Kinds whose rules look nothing up.
macro_rules! no_lookups {
    ($($kind:ty),*) => {$(
        impl Looked for $kind {
            fn lookups<'a>(
                &'a self,
                _: Option<&'a Self>,
                _: &'a kube::Client,
                _: &'a str,
                _: Instant,
            ) -> impl Future<Output = Lookups> + Send + 'a {
                std::future::ready(Lookups::default())
            }
        }
    )*};
}

no_lookups!(LoginSet, RestApi, Accounting);

/// A GET turned into a [`Lookup`], given up at `by`.
pub(super) async fn lookup<T, U>(
    by: Instant,
    get: impl Future<Output = kube::Result<Option<T>>>,
    keep: impl FnOnce(T) -> U,
) -> Lookup<U> {
    match tokio::time::timeout_at(by, get).await {
        Ok(Ok(Some(obj))) => Lookup::Found(keep(obj)),
        Ok(Ok(None)) => Lookup::NotFound,
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(_) => Lookup::Failed(
            "no answer from the API server within the review's lookup deadline".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_time_leaves_room_inside_the_timeout() {
        assert_eq!(lookup_time(DEFAULT_TIMEOUT), Duration::from_secs(7));
        assert_eq!(
            lookup_time(Duration::from_secs(30)),
            Duration::from_secs(27)
        );
        assert_eq!(lookup_time(Duration::from_secs(4)), Duration::from_secs(2));
        assert_eq!(
            lookup_time(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
    }

    /// A GET that answers after `after` (on the paused clock).
    async fn slow(after: Duration) -> kube::Result<Option<u32>> {
        tokio::time::sleep(after).await;
        Ok(Some(7))
    }

    #[tokio::test(start_paused = true)]
    async fn lookups_run_at_once_and_stop_at_the_deadline() {
        let start = Instant::now();
        // Three lookups of 2 s each in 3 s: all in, after 2 s (one after another: 6 s).
        let by = start + Duration::from_secs(3);
        let found = join_all((0..3).map(|_| lookup(by, slow(Duration::from_secs(2)), |n| n))).await;
        assert_eq!(found, vec![Lookup::Found(7); 3]);
        assert_eq!(start.elapsed(), Duration::from_secs(2));

        // Three lookups that would take a minute: all given up at the deadline together.
        let start = Instant::now();
        let by = start + Duration::from_secs(3);
        let found =
            join_all((0..3).map(|_| lookup(by, slow(Duration::from_secs(60)), |n| n))).await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        for l in found {
            assert!(
                matches!(&l, Lookup::Failed(why) if why.contains("lookup deadline")),
                "{l:?}"
            );
        }
    }
}
