//! Pod-backed Services as kube-proxy makes them: nftables DNAT in the ground namespace, so that the
//! endpoint sees the client pod's own address. One table, `ip kube-ground`, rewritten whole and
//! atomically (`nft -f -`) from the routes:
//!
//! - `services` (nat prerouting): ClusterIP:port/proto → one ready endpoint, drawn at random;
//! - `refuse` (filter prerouting, after it): a ClusterIP:port without a ready endpoint is reset
//!   (TCP) or answered port-unreachable (UDP), as kube-proxy rejects it;
//! - `snat-hairpin` (nat postrouting): a pod sent to itself through its Service is masqueraded
//!   (to the gateway address), else it would answer itself directly and drop the reply.
//!
//! Pods send ClusterIP traffic to their gateway (the bridge address); the ground forwards it after
//! DNAT (`ip_forward`), and the endpoint's reply, crossing the bridge straight to the client, is
//! un-DNATed because the bridge hands bridged frames to netfilter (`bridge-nf-call-iptables`,
//! per network namespace). [`prepare`] sets both in the ground namespace only.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::routes::{Protocol, Routes, Target};
use kube_ground::net::ip::in_netns as ip;

pub const TABLE: &str = "kube-ground";

/// The whole table for `routes` (the routes to the host are the userspace proxy's, not here).
pub fn ruleset(routes: &Routes) -> String {
    let mut dnat = String::new();
    let mut refuse = String::new();
    let mut endpoint_ips = BTreeSet::new();
    for ((proto, at), route) in &routes.0 {
        let Target::Endpoints(eps) = &route.target else {
            continue;
        };
        let (p, ip, port) = (proto.nft(), at.ip(), at.port());
        let _ = writeln!(dnat, "    # {}", route.service);
        let _ = writeln!(refuse, "    # {}", route.service);
        let matches = format!("ip daddr {ip} {p} dport {port}");
        match eps.as_slice() {
            [] => {
                let how = match proto {
                    Protocol::Tcp => "reject with tcp reset",
                    Protocol::Udp => "reject",
                };
                let _ = writeln!(refuse, "    {matches} {how}");
            }
            [ep] => {
                let _ = writeln!(dnat, "    {matches} dnat to {ep}");
            }
            _ => {
                let map: Vec<String> = eps
                    .iter()
                    .enumerate()
                    .map(|(i, ep)| format!("{i} : {} . {}", ep.ip(), ep.port()))
                    .collect();
                let _ = writeln!(
                    dnat,
                    "    {matches} dnat to numgen random mod {} map {{ {} }}",
                    eps.len(),
                    map.join(", ")
                );
            }
        }
        endpoint_ips.extend(eps.iter().map(|ep| *ep.ip()));
    }
    let mut hairpin = String::new();
    for ip in endpoint_ips {
        let _ = writeln!(
            hairpin,
            "    ct status dnat ip saddr {ip} ip daddr {ip} masquerade"
        );
    }
    // The rules live in regular chains jumped to from prerouting (pods' traffic) and from output
    // (processes of the ground namespace itself, e.g. an operator under test run "as in a pod").
    format!(
        "table ip {TABLE}\nflush table ip {TABLE}\ntable ip {TABLE} {{\n  \
         chain service-dnat {{\n{dnat}  }}\n  \
         chain service-refuse {{\n{refuse}  }}\n  \
         chain services {{\n    type nat hook prerouting priority dstnat; policy accept;\n    jump service-dnat\n  }}\n  \
         chain services-local {{\n    type nat hook output priority -100; policy accept;\n    jump service-dnat\n  }}\n  \
         chain refuse {{\n    type filter hook prerouting priority dstnat + 10; policy accept;\n    jump service-refuse\n  }}\n  \
         chain refuse-local {{\n    type filter hook output priority -90; policy accept;\n    jump service-refuse\n  }}\n  \
         chain snat-hairpin {{\n    type nat hook postrouting priority srcnat; policy accept;\n{hairpin}  }}\n}}\n"
    )
}

/// Loads `ruleset` in `netns` in one transaction.
pub async fn load(netns: &str, ruleset: &str) -> Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting `nft` (is nftables installed?)")?;
    let mut stdin = child.stdin.take().context("nft's stdin")?;
    stdin.write_all(ruleset.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!(
            "`nft -f -` in {netns} failed: {}\n{ruleset}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Turns hairpin mode on for every bridge port in `netns` that lacks it (a sandbox made before
/// `kube-ground network` did it itself): a pod reaching itself through its Service is DNATed in
/// the bridge's prerouting and bridged back out of the port it came in by.
pub async fn hairpin(netns: &str) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Link {
        ifname: String,
        #[serde(default)]
        linkinfo: Option<LinkInfo>,
    }
    #[derive(serde::Deserialize)]
    struct LinkInfo {
        #[serde(default)]
        info_slave_kind: Option<String>,
        #[serde(default)]
        info_slave_data: Option<SlaveData>,
    }
    #[derive(serde::Deserialize)]
    struct SlaveData {
        #[serde(default)]
        hairpin: bool,
    }
    let out = ip(netns, &["-json", "-details", "link", "show"]).await?;
    let links: Vec<Link> =
        serde_json::from_str(&out).with_context(|| format!("parsing `ip link` output {out:?}"))?;
    for link in links {
        let Some(info) = link.linkinfo else { continue };
        let on = info.info_slave_data.is_some_and(|d| d.hairpin);
        if info.info_slave_kind.as_deref() == Some("bridge") && !on {
            ip(
                netns,
                &[
                    "link",
                    "set",
                    &link.ifname,
                    "type",
                    "bridge_slave",
                    "hairpin",
                    "on",
                ],
            )
            .await?;
        }
    }
    Ok(())
}

/// Forwarding, and bridged frames through netfilter, in `netns` only.
pub async fn prepare(netns: &str) -> Result<()> {
    for setting in [
        "net.ipv4.ip_forward=1",
        "net.bridge.bridge-nf-call-iptables=1",
    ] {
        let out = Command::new("ip")
            .args(["netns", "exec", netns, "sysctl", "-qw", setting])
            .kill_on_drop(true)
            .output()
            .await
            .context("starting `sysctl`")?;
        if !out.status.success() {
            bail!(
                "setting {setting} in {netns} failed (is br_netfilter loaded?): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    // A route for the Service range, so that a process of the ground namespace can connect to a
    // ClusterIP at all (the output chain then DNATs it, as prerouting does for pods).
    let routes = ip(
        netns,
        &[
            "-json", "-4", "route", "show", "proto", "kernel", "scope", "link",
        ],
    )
    .await?;
    #[derive(serde::Deserialize)]
    struct Route {
        dev: String,
    }
    let routes: Vec<Route> = serde_json::from_str(&routes).unwrap_or_default();
    if let Some(dev) = routes.iter().map(|r| r.dev.as_str()).find(|d| *d != "lo") {
        ip(netns, &["route", "replace", "10.96.0.0/16", "dev", dev]).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::routes::Route;
    use super::*;

    #[test]
    fn rules_per_route() {
        let sa = |s: &str| s.parse().unwrap();
        let route = |target| Route {
            service: "default/web:http".into(),
            target,
        };
        let routes = Routes(
            [
                (
                    (Protocol::Tcp, sa("10.96.0.1:443")),
                    route(Target::Host("127.0.0.1:6443".parse().unwrap())),
                ),
                (
                    (Protocol::Tcp, sa("10.96.3.4:80")),
                    route(Target::Endpoints(vec![
                        sa("10.244.0.5:8080"),
                        sa("10.244.0.6:8080"),
                    ])),
                ),
                (
                    (Protocol::Udp, sa("10.96.3.4:53")),
                    route(Target::Endpoints(vec![sa("10.244.0.5:53")])),
                ),
                (
                    (Protocol::Tcp, sa("10.96.3.5:80")),
                    route(Target::Endpoints(vec![])),
                ),
            ]
            .into(),
        );
        let text = ruleset(&routes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert!(!text.contains("10.96.0.1"), "{text}");
        for want in [
            "flush table ip kube-ground",
            "ip daddr 10.96.3.4 tcp dport 80 dnat to numgen random mod 2 map { 0 : 10.244.0.5 . 8080, 1 : 10.244.0.6 . 8080 }",
            "ip daddr 10.96.3.4 udp dport 53 dnat to 10.244.0.5:53",
            "ip daddr 10.96.3.5 tcp dport 80 reject with tcp reset",
            "ct status dnat ip saddr 10.244.0.5 ip daddr 10.244.0.5 masquerade",
            "ct status dnat ip saddr 10.244.0.6 ip daddr 10.244.0.6 masquerade",
        ] {
            assert!(lines.contains(&want), "{want}\n{text}");
        }
    }
}
