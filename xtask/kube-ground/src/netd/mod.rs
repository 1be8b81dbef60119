//! `kube-ground netd`: the ground's cluster network daemon, in place of kube-proxy and CoreDNS.
//! Runs on the host as root; everything it serves is inside the ground's network namespace, on
//! addresses of its loopback interface ([`addresses`]):
//!
//! - every pod-backed Service ClusterIP:port (TCP and UDP) as nftables DNAT to its ready endpoints,
//!   keeping the client pod's source address as kube-proxy does ([`nft`], [`routes`]);
//! - a userspace TCP proxy only for 10.96.0.1:443, to the API server on the host's loopback
//!   ([`proxy`]);
//! - DNS for `cluster.local` on 10.96.0.10:53, UDP and TCP ([`dns_server`], [`names`], [`dns`]);
//! - on the host, a unix socket where the API server has connections to Services made from inside
//!   the ground, for webhooks given as a Service reference ([`dial`]).
//!
//! It watches Services, EndpointSlices and Pods, and rebuilds both tables from the caches after
//! every change (a tenth of a second after, to take a burst at once), and every 10 s.

mod addresses;
mod dial;
mod dns;
mod dns_server;
#[cfg(test)]
mod ground_test;
mod names;
mod netns_socket;
mod nft;
mod proxy;
mod routes;
mod services;
#[cfg(test)]
mod webhook_test;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, watch};

use addresses::Addresses;
use names::Index;
use netns_socket::NetnsSockets;
use proxy::Proxy;
use routes::{DNS_SERVICE, Routes};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The API server on the host, where `kubernetes.default` (10.96.0.1:443) leads.
    #[arg(long, default_value = "127.0.0.1:6443")]
    apiserver: SocketAddr,
    /// The ground's network namespace (`kube-ground network` makes it).
    #[arg(long, default_value = "slurm-dev-kube")]
    netns: String,
    /// A unix socket (made mode 0600) where the API server on the host asks for connections to
    /// the ground's Services (webhooks given as a Service reference); none: not served.
    #[arg(long)]
    dial_socket: Option<PathBuf>,
}

pub async fn run(args: Args) -> Result<()> {
    let mut ground = Ground::open(&args.netns).await?;
    let mut dial_socket = args.dial_socket;
    let client = Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG)")?;
    tokio::spawn(services::ensure(client.clone()));

    let changed = Arc::new(Notify::new());
    let (services, watch_services) = cache::<Service>(client.clone(), changed.clone());
    let (slices, watch_slices) = cache::<EndpointSlice>(client.clone(), changed.clone());
    let (pods, watch_pods) = cache::<Pod>(client, changed.clone());
    tokio::spawn(watch_services);
    tokio::spawn(watch_slices);
    tokio::spawn(watch_pods);
    for ready in [
        services.wait_until_ready().await,
        slices.wait_until_ready().await,
        pods.wait_until_ready().await,
    ] {
        ready.context("a watch ended before its first listing")?;
    }
    loop {
        let (svcs, eps) = (services.state(), slices.state());
        let index = Index::build(&svcs, &eps, &pods.state());
        let routes = Routes::build(&svcs, &eps, args.apiserver);
        // Tried again at the next change or in 10 s.
        if let Err(e) = ground.apply(index, routes).await {
            tracing::warn!("netd: {e:#}");
        }
        // From the first tables on, so that no request is answered from empty ones.
        if let Some(path) = dial_socket.take() {
            ground.serve_dial(&path)?;
        }
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What netd serves in one network namespace.
struct Ground {
    netns: String,
    sockets: NetnsSockets,
    addresses: Addresses,
    proxy: Proxy,
    names: watch::Sender<Arc<Index>>,
    routes: watch::Sender<Arc<Routes>>,
    dns_started: bool,
}

impl Ground {
    async fn open(netns: &str) -> Result<Self> {
        let path = Path::new("/run/netns").join(netns);
        if !path.exists() {
            bail!("network namespace {netns} does not exist: run `kube-ground network` first");
        }
        let sockets = NetnsSockets::enter(&path)?;
        nft::prepare(netns).await?;
        let addresses = Addresses::open(netns).await?;
        let names = watch::Sender::new(Arc::new(Index::default()));
        let routes = watch::Sender::new(Arc::new(Routes::default()));
        Ok(Self {
            netns: netns.into(),
            proxy: Proxy::new(sockets.clone(), routes.subscribe()),
            sockets,
            addresses,
            names,
            routes,
            dns_started: false,
        })
    }

    /// Serves the dial endpoint ([`dial`]) on `path` from now on.
    fn serve_dial(&self, path: &Path) -> Result<()> {
        let listener =
            dial::listen(path).with_context(|| format!("the dial socket {}", path.display()))?;
        tokio::spawn(dial::serve(
            listener,
            self.sockets.clone(),
            self.names.subscribe(),
            self.routes.subscribe(),
        ));
        tracing::info!(socket = %path.display(), "netd: serving the dial endpoint for the API server");
        Ok(())
    }

    /// Serves `index` and `routes` from now on: the DNAT table, addresses and listeners follow the
    /// routes (the DNS server's are there from the first call on, which starts it).
    async fn apply(&mut self, index: Index, routes: Routes) -> Result<()> {
        let dns_ip = *DNS_SERVICE.ip();
        let mut wanted: BTreeSet<_> = routes.addresses().collect();
        wanted.insert(dns_ip);
        let rules = nft::ruleset(&routes);
        self.names.send_replace(Arc::new(index));
        self.routes.send_replace(Arc::new(routes));
        let loaded = nft::load(&self.netns, &rules).await;
        if let Err(e) = nft::hairpin(&self.netns).await {
            tracing::warn!("hairpin mode on the bridge ports: {e:#}");
        }
        self.proxy.stop_unrouted();
        if let Err(e) = self.addresses.remove_others(&wanted).await {
            tracing::warn!("removing service addresses: {e:#}");
        }
        self.addresses
            .add(&wanted)
            .await
            .context("adding service addresses")?;
        self.proxy.start_routed().await;
        loaded.context("loading the Service DNAT rules")?;
        if !self.dns_started {
            let addr = SocketAddr::V4(DNS_SERVICE);
            let udp = self.sockets.udp_socket(addr).await.context("DNS on UDP")?;
            let tcp = self
                .sockets
                .tcp_listener(addr)
                .await
                .context("DNS on TCP")?;
            tokio::spawn(dns_server::serve_udp(udp, self.names.subscribe()));
            tokio::spawn(dns_server::serve_tcp(tcp, self.names.subscribe()));
            tracing::info!(%addr, netns = %self.netns, "netd: serving DNS and the Service proxy");
            self.dns_started = true;
        }
        Ok(())
    }
}

/// A cache of every `K`, and the watch that fills it, which signals `changed` after each event.
fn cache<K>(client: Client, changed: Arc<Notify>) -> (Store<K>, impl Future<Output = ()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let kind = K::kind(&()).into_owned();
    let stream = watcher(Api::<K>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(move |event| {
            if let Err(e) = event {
                tracing::warn!("watching {kind}: {e}");
            }
            changed.notify_one();
            futures::future::ready(())
        });
    (store, stream)
}
