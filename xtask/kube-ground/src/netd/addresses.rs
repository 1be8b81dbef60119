//! The Service addresses of the ground namespace: `/32`s on its loopback interface, so that the
//! namespace delivers packets for them locally (whatever interface they come in by) and sockets
//! can bind them. Pods reach them through their default route to the bridge. (Loopback rather
//! than a dummy interface: this machine's kernel has no `dummy` module.)

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use kube_ground::net::ip::in_netns as ip;
use serde::Deserialize;

pub const IFACE: &str = "lo";

/// The addresses managed here: `/32`s in the Service range 10.96.0.0/16; the interface's other
/// addresses (127.0.0.1) are left alone.
fn managed(ip: Ipv4Addr, prefix_len: u8) -> bool {
    prefix_len == 32 && ip.octets()[..2] == [10, 96]
}

pub struct Addresses {
    netns: String,
    present: BTreeSet<Ipv4Addr>,
}

impl Addresses {
    /// Reads the Service addresses the namespace has (a previous run's included, so that stale
    /// ones go at the first [`Addresses::remove_others`]).
    pub async fn open(netns: &str) -> Result<Self> {
        ip(netns, &["link", "set", IFACE, "up"]).await?;
        #[derive(Deserialize)]
        struct Link {
            #[serde(default)]
            addr_info: Vec<AddrInfo>,
        }
        #[derive(Deserialize)]
        struct AddrInfo {
            family: String,
            local: String,
            prefixlen: u8,
        }
        let out = ip(netns, &["-json", "addr", "show", "dev", IFACE]).await?;
        let links: Vec<Link> = serde_json::from_str(&out)
            .with_context(|| format!("parsing `ip addr` output {out:?}"))?;
        let present = links
            .iter()
            .flat_map(|l| &l.addr_info)
            .filter(|a| a.family == "inet")
            .filter_map(|a| Some((a.local.parse().ok()?, a.prefixlen)))
            .filter(|(ip, len)| managed(*ip, *len))
            .map(|(ip, _)| ip)
            .collect();
        Ok(Self {
            netns: netns.into(),
            present,
        })
    }

    /// Adds what is missing of `wanted`.
    pub async fn add(&mut self, wanted: &BTreeSet<Ipv4Addr>) -> Result<()> {
        for ip4 in wanted.difference(&self.present.clone()) {
            ip(
                &self.netns,
                &["addr", "add", &format!("{ip4}/32"), "dev", IFACE],
            )
            .await?;
            self.present.insert(*ip4);
        }
        Ok(())
    }

    /// Removes what is not in `wanted`.
    pub async fn remove_others(&mut self, wanted: &BTreeSet<Ipv4Addr>) -> Result<()> {
        for ip4 in self.present.clone().difference(wanted) {
            ip(
                &self.netns,
                &["addr", "del", &format!("{ip4}/32"), "dev", IFACE],
            )
            .await?;
            self.present.remove(ip4);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::netns_socket::testing::TestNetns;
    use super::*;

    /// Needs root.
    #[tokio::test]
    async fn adds_and_removes_addresses() {
        let ns = TestNetns::new("addr");
        let mut addrs = Addresses::open(&ns.name).await.unwrap();
        let a: Ipv4Addr = "10.96.0.10".parse().unwrap();
        let b: Ipv4Addr = "10.96.5.5".parse().unwrap();
        addrs.add(&[a, b].into()).await.unwrap();
        // A second run finds them.
        let mut again = Addresses::open(&ns.name).await.unwrap();
        assert_eq!(again.present, [a, b].into());
        again.remove_others(&[a].into()).await.unwrap();
        assert_eq!(Addresses::open(&ns.name).await.unwrap().present, [a].into());
        // Loopback's own address is not the Service range's and stays.
        let out = ip(&ns.name, &["-4", "addr", "show", "dev", IFACE])
            .await
            .unwrap();
        assert!(out.contains("127.0.0.1/8"), "{out}");
    }
}
