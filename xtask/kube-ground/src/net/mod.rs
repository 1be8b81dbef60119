//! The pod network: one ground network namespace (`slurm-dev-kube`) holding a Linux bridge (`kube0`,
//! 10.244.0.1/16), and per pod sandbox its own network namespace (`kube-<short uid>`) whose `eth0` is
//! one end of a veth pair, the other end being a port of the bridge, with one address from
//! 10.244.0.0/16 and a default route via the bridge.
//!
//! These addresses exist only inside namespaces this module creates. The ground namespace has no
//! uplink (no interface to the host's namespaces; the forwarding and DNAT that `kube-ground netd`
//! turns on for Services stay inside it, between its bridge ports), so nothing sent to or from a
//! pod address ever leaves the machine or reaches the host's own network: pods reach each other
//! and the ground namespace, and nothing else. Bridge ports are in hairpin mode, for a pod reaching
//! itself through a Service.

pub mod alloc;
pub mod ip;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

pub use alloc::{IpPool, Record};

use crate::runtime::PodRef;

/// Serialises changes to the namespaces of this process: every sandbox operation is a handful of
/// `ip` commands taking milliseconds, and the ground namespace must be made only once.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Clone, Debug)]
pub struct NetConfig {
    pub ground_netns: String,
    pub bridge: String,
    pub gateway: Ipv4Addr,
    pub prefix_len: u8,
    /// Where [`Network::create`] takes addresses from.
    pub pool: IpPool,
    /// Sandbox namespaces are `<prefix><short uid>`; everything with the prefix is this ground's.
    pub sandbox_prefix: String,
    /// The IP allocation records (`<state_dir>/ips/<ip>`).
    pub state_dir: PathBuf,
}

impl NetConfig {
    /// The test ground's network.
    pub fn ground() -> Self {
        Self {
            ground_netns: "slurm-dev-kube".into(),
            bridge: "kube0".into(),
            gateway: Ipv4Addr::new(10, 244, 0, 1),
            prefix_len: 16,
            pool: IpPool {
                first: Ipv4Addr::new(10, 244, 0, 2),
                last: Ipv4Addr::new(10, 244, 255, 254),
            },
            sandbox_prefix: "kube-".into(),
            state_dir: "/var/lib/slurm-dev/kube/net".into(),
        }
    }

    /// The pool of node `n` (1-based): `10.244.n.2` … `10.244.n.254`, for a kubelet that gives each
    /// node its own pod CIDR.
    pub fn node_pool(n: u8) -> IpPool {
        IpPool {
            first: Ipv4Addr::new(10, 244, n, 2),
            last: Ipv4Addr::new(10, 244, n, 254),
        }
    }
}

/// A pod's network namespace, joined to the ground's bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// The namespace's name (`ip netns`).
    pub netns: String,
    /// `/run/netns/<netns>`, what a container joins (`podman run --network ns:<path>`).
    pub netns_path: PathBuf,
    pub ip: Ipv4Addr,
}

#[derive(Clone, Debug)]
pub struct Network {
    cfg: NetConfig,
}

impl Network {
    pub fn new(cfg: NetConfig) -> Self {
        Self { cfg }
    }

    pub fn config(&self) -> &NetConfig {
        &self.cfg
    }

    fn ips_dir(&self) -> PathBuf {
        self.cfg.state_dir.join("ips")
    }

    /// The sandbox namespace name of a pod.
    pub fn netns_name(&self, uid: &str) -> String {
        format!("{}{}", self.cfg.sandbox_prefix, short_id(uid))
    }

    /// Creates the pod's sandbox with an address from the configured pool, or returns it if it
    /// exists (also one a previous kubelet made).
    pub async fn create(&self, pod: &PodRef) -> Result<Sandbox> {
        self.create_in(pod, self.cfg.pool).await
    }

    /// As [`Network::create`], with an address from `pool`.
    pub async fn create_in(&self, pod: &PodRef, pool: IpPool) -> Result<Sandbox> {
        let _guard = LOCK.lock().await;
        self.make_ground().await?;
        let netns = self.netns_name(&pod.uid);
        let records = alloc::records(&self.ips_dir())?;
        if let Some(other) = records
            .iter()
            .find(|r| r.netns == netns && r.uid != pod.uid)
        {
            bail!(
                "sandbox for {pod}: namespace {netns} already belongs to pod {}/{} ({})",
                other.namespace,
                other.name,
                other.uid
            );
        }
        let record = match records.into_iter().find(|r| r.uid == pod.uid) {
            Some(r) if ip::link_exists(&r.netns, "eth0").await => return Ok(sandbox(&r)),
            // Recorded but gone (a reboot, or a crash half-way): rebuilt on the same address.
            Some(r) => r,
            None => alloc::allocate(
                &self.ips_dir(),
                pool,
                Record {
                    ip: Ipv4Addr::UNSPECIFIED,
                    uid: pod.uid.clone(),
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    netns,
                },
            )?,
        };
        if let Err(e) = self.build(&record).await {
            let _ = self.delete(&record).await;
            return Err(e.context(format!("creating the sandbox of {pod}")));
        }
        Ok(sandbox(&record))
    }

    /// Creates the ground namespace with its bridge unless they exist. [`Network::create`] does it
    /// too; this is for what must run in the namespace before the first pod (an API server
    /// listening on the gateway address for pods).
    pub async fn ensure_ground(&self) -> Result<()> {
        let _guard = LOCK.lock().await;
        self.make_ground().await
    }

    async fn make_ground(&self) -> Result<()> {
        let (g, bridge) = (&self.cfg.ground_netns, &self.cfg.bridge);
        if !ip::netns_exists(g) {
            ip::add_netns(g)
                .await
                .with_context(|| format!("creating the ground network namespace {g}"))?;
        }
        if !ip::link_exists(g, bridge).await {
            let gw = format!("{}/{}", self.cfg.gateway, self.cfg.prefix_len);
            ip::ip(&["-n", g, "link", "add", bridge, "type", "bridge"]).await?;
            ip::ip(&["-n", g, "addr", "add", &gw, "dev", bridge]).await?;
            ip::ip(&["-n", g, "link", "set", bridge, "up"]).await?;
        }
        // Also on a bridge an older ground made: setting the same address again changes nothing.
        ip::ip(&[
            "-n",
            g,
            "link",
            "set",
            bridge,
            "address",
            &mac_of(self.cfg.gateway),
        ])
        .await?;
        Ok(())
    }

    async fn build(&self, r: &Record) -> Result<()> {
        let g = self.cfg.ground_netns.as_str();
        let (ns, veth) = (r.netns.as_str(), veth_name(&r.netns));
        ip::delete_netns(ns).await?;
        ip::delete_link(g, &veth).await?;
        ip::add_netns(ns).await?;
        let mac = mac_of(r.ip);
        ip::ip(&[
            "-n", g, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "address", &mac,
            "netns", ns,
        ])
        .await?;
        ip::ip(&[
            "-n",
            g,
            "link",
            "set",
            &veth,
            "master",
            &self.cfg.bridge,
            "up",
        ])
        .await?;
        // Hairpin: a pod reaching itself through its Service's DNAT (kube-ground netd) is bridged
        // back out of the port it came in by.
        ip::ip(&[
            "-n",
            g,
            "link",
            "set",
            &veth,
            "type",
            "bridge_slave",
            "hairpin",
            "on",
        ])
        .await?;
        let addr = format!("{}/{}", r.ip, self.cfg.prefix_len);
        ip::ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]).await?;
        ip::ip(&["-n", ns, "link", "set", "eth0", "up"]).await?;
        let gw = self.cfg.gateway.to_string();
        ip::ip(&["-n", ns, "route", "add", "default", "via", &gw]).await?;
        Ok(())
    }

    async fn delete(&self, r: &Record) -> Result<()> {
        ip::delete_netns(&r.netns).await?;
        ip::delete_link(&self.cfg.ground_netns, &veth_name(&r.netns)).await?;
        alloc::release(&self.ips_dir(), r.ip)
    }

    /// Deletes the pod's sandbox and frees its address; fine if it does not exist.
    pub async fn destroy(&self, uid: &str) -> Result<()> {
        let _guard = LOCK.lock().await;
        let netns = self.netns_name(uid);
        for r in alloc::records(&self.ips_dir())? {
            if r.uid == uid {
                self.delete(&r)
                    .await
                    .with_context(|| format!("deleting the sandbox of pod {uid}"))?;
            }
        }
        ip::delete_netns(&netns).await?;
        ip::delete_link(&self.cfg.ground_netns, &veth_name(&netns)).await
    }

    /// The sandboxes recorded on disk, whether their namespaces still exist or not.
    pub fn recorded(&self) -> Result<Vec<Record>> {
        alloc::records(&self.ips_dir())
    }

    /// Deletes every sandbox of this ground: every namespace with the sandbox prefix, every veth in
    /// the ground namespace and every allocation record, whoever made them. The ground namespace
    /// itself stays.
    pub async fn destroy_all(&self) -> Result<()> {
        let _guard = LOCK.lock().await;
        for ns in ip::netns_with_prefix(&self.cfg.sandbox_prefix).await? {
            ip::delete_netns(&ns).await?;
        }
        for veth in ip::links(&self.cfg.ground_netns, "veth").await? {
            ip::delete_link(&self.cfg.ground_netns, &veth).await?;
        }
        for r in alloc::records(&self.ips_dir())? {
            alloc::release(&self.ips_dir(), r.ip)?;
        }
        Ok(())
    }

    /// [`Network::destroy_all`], then the ground namespace with its bridge.
    pub async fn teardown(&self) -> Result<()> {
        self.destroy_all().await?;
        let _guard = LOCK.lock().await;
        ip::delete_netns(&self.cfg.ground_netns).await
    }

    /// Names of the existing sandbox namespaces (with the configured prefix).
    pub async fn sandbox_namespaces(&self) -> Result<Vec<String>> {
        ip::netns_with_prefix(&self.cfg.sandbox_prefix).await
    }

    /// Names of the veths in the ground namespace.
    pub async fn veths(&self) -> Result<Vec<String>> {
        ip::links(&self.cfg.ground_netns, "veth").await
    }
}

fn sandbox(r: &Record) -> Sandbox {
    Sandbox {
        netns_path: ip::netns_path(&r.netns),
        netns: r.netns.clone(),
        ip: r.ip,
    }
}

/// Ten characters that tell pods apart: the start of the UID (a UUID's first ten hex digits), or
/// a hash of a UID too short or odd for that.
fn short_id(uid: &str) -> String {
    let clean: String = uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(10)
        .collect();
    if clean.len() == 10 {
        return clean;
    }
    // FNV-1a: stable across Rust releases, unlike std's hasher.
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{:010x}", hash & 0xff_ffff_ffff)
}

/// The ground-side end of a sandbox's veth, named for the short id: at most 15 characters, as
/// Linux requires.
fn veth_name(netns: &str) -> String {
    let short = netns.get(netns.len().saturating_sub(10)..).unwrap_or(netns);
    format!("veth{short}")
}

/// The MAC of the interface that has address `ip` (locally administered: `02:00:` and the
/// address's four bytes), for the bridge and for every pod's `eth0`.
///
/// - Unset, a Linux bridge takes the lowest MAC of its ports, so a pod's veth coming or going could
///   change it, and every pod's ARP entry for the gateway went stale: traffic between pods and the
///   ground stopped for seconds (in CI an admission webhook call from the API server timed out as
///   a pod was deleted).
/// - A pod that gets a deleted pod's IP gets its MAC too. With random MACs, a pod that had talked
///   to the old one kept sending its replies to the old MAC (the ARP entry stays REACHABLE for up
///   to 45 s), so a new client's connections through a Service timed out (CI, the Helm
///   end-to-end's CLI pods reaching slurmrestd).
pub fn mac_of(ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("02:00:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_linux_limits() {
        let net = Network::new(NetConfig::ground());
        let ns = net.netns_name("5A0c9e1b-7f3d-4c2e-9a1b-0123456789ab");
        assert_eq!(ns, "kube-5a0c9e1b7f");
        assert_eq!(veth_name(&ns), "veth5a0c9e1b7f");
        let short = net.netns_name("x");
        assert_eq!(short.len(), "kube-".len() + 10);
        assert_ne!(short, net.netns_name("y"));
        assert!(veth_name(&short).len() <= 15);
    }
}
