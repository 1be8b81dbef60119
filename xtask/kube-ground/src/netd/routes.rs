//! Where a connection to a Service's ClusterIP, port and protocol goes, as kube-proxy decides it:
//! one of the ready endpoints, at the port the EndpointSlice gives for the Service port's name.
//! Pure.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{ready, slices_of};

/// The `kubernetes` Service: its port 443 goes to the API server on the host's loopback, whether
/// the Service object exists or not (pods are told this address in `KUBERNETES_SERVICE_HOST`).
pub const API_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 1), 443);
/// Answered by the DNS server itself, never proxied.
pub const DNS_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 10), 53);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    fn parse(p: Option<&str>) -> Option<Self> {
        match p {
            None | Some("TCP") => Some(Self::Tcp),
            Some("UDP") => Some(Self::Udp),
            Some(_) => None,
        }
    }

    /// As nft writes it.
    pub fn nft(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A host address, connected to from the host's namespace.
    Host(SocketAddr),
    /// Ready endpoints in the ground namespace, in a stable order; empty rejects.
    Endpoints(Vec<SocketAddrV4>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// `ns/name:port`, for logs.
    pub service: String,
    pub target: Target,
}

/// (protocol, ClusterIP:port) → route, for every TCP and UDP port of every Service with a
/// ClusterIP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes(pub BTreeMap<(Protocol, SocketAddrV4), Route>);

impl Routes {
    pub fn build(
        services: &[Arc<Service>],
        slices: &[Arc<EndpointSlice>],
        apiserver: SocketAddr,
    ) -> Self {
        let mut routes = BTreeMap::new();
        routes.insert(
            (Protocol::Tcp, API_SERVICE),
            Route {
                service: "default/kubernetes:https".into(),
                target: Target::Host(apiserver),
            },
        );
        for svc in services {
            let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
                continue;
            };
            let Some(spec) = &svc.spec else { continue };
            let Some(ip) = spec
                .cluster_ip
                .as_deref()
                .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            else {
                continue;
            };
            for port in spec.ports.iter().flatten() {
                let Ok(number) = u16::try_from(port.port) else {
                    continue;
                };
                let at = SocketAddrV4::new(ip, number);
                let Some(proto) = Protocol::parse(port.protocol.as_deref()) else {
                    continue;
                };
                if (proto == Protocol::Tcp && at == API_SERVICE) || at == DNS_SERVICE {
                    continue;
                }
                let port_name = port.name.clone().unwrap_or_default();
                let mut endpoints = Vec::new();
                for slice in slices_of(slices, ns, name) {
                    let Some(target_port) =
                        slice_port(slice, &port_name, proto).or_else(|| match &port.target_port {
                            Some(IntOrString::Int(n)) => u16::try_from(*n).ok(),
                            Some(IntOrString::String(_)) => None,
                            None => Some(number),
                        })
                    else {
                        continue;
                    };
                    for ep in slice.endpoints.iter().flatten().filter(|ep| ready(ep)) {
                        endpoints.extend(
                            ep.addresses
                                .iter()
                                .filter_map(|a| a.parse::<Ipv4Addr>().ok())
                                .map(|a| SocketAddrV4::new(a, target_port)),
                        );
                    }
                }
                endpoints.sort();
                endpoints.dedup();
                routes.insert(
                    (proto, at),
                    Route {
                        service: format!(
                            "{ns}/{name}:{}",
                            port.name.as_deref().unwrap_or(&number.to_string())
                        ),
                        target: Target::Endpoints(endpoints),
                    },
                );
            }
        }
        Routes(routes)
    }

    /// The ClusterIPs that must be local addresses of the ground namespace: those of the routes
    /// to the host, served by the userspace proxy (the others are DNAT in prerouting).
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.0
            .iter()
            .filter(|(_, r)| matches!(r.target, Target::Host(_)))
            .map(|((_, a), _)| *a.ip())
    }
}

/// The port the slice gives for the Service port named `name` (the EndpointSlice controller has
/// resolved a named targetPort into it).
fn slice_port(slice: &EndpointSlice, name: &str, proto: Protocol) -> Option<u16> {
    slice
        .ports
        .iter()
        .flatten()
        .find(|p| {
            p.name.as_deref().unwrap_or("") == name
                && Protocol::parse(p.protocol.as_deref()) == Some(proto)
        })
        .and_then(|p| p.port)
        .and_then(|p| u16::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::super::names::fixtures::{service, slice};
    use super::*;
    use serde_json::json;

    fn sa(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    fn tcp(s: &str) -> (Protocol, SocketAddrV4) {
        (Protocol::Tcp, sa(s))
    }

    const APISERVER: &str = "127.0.0.1:6443";

    #[test]
    fn only_ready_endpoints_at_the_named_port() {
        let services = [service(
            "default",
            "web",
            json!({"clusterIP": "10.96.3.4", "ports": [
                {"name": "http", "port": 80, "targetPort": "web"},
                {"name": "metrics", "port": 9100, "targetPort": 9100},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ]}),
        )];
        let slices = [slice(
            "default",
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9101}]),
            &[
                ("10.244.0.6", Some(true), None),
                ("10.244.0.5", None, None),
                ("10.244.0.7", Some(false), None),
            ],
        )];
        let routes = Routes::build(&services, &slices, APISERVER.parse().unwrap());
        assert_eq!(
            routes.0[&tcp("10.96.3.4:80")],
            Route {
                service: "default/web:http".into(),
                target: Target::Endpoints(vec![sa("10.244.0.5:8080"), sa("10.244.0.6:8080")]),
            }
        );
        // The slice's port wins over the Service's targetPort, as kube-proxy reads it.
        assert_eq!(
            routes.0[&tcp("10.96.3.4:9100")].target,
            Target::Endpoints(vec![sa("10.244.0.5:9101"), sa("10.244.0.6:9101")])
        );
        assert_eq!(
            routes.0[&(Protocol::Udp, sa("10.96.3.4:53"))].target,
            Target::Endpoints(vec![sa("10.244.0.5:53"), sa("10.244.0.6:53")]),
            "UDP too; the slice lacking the port, the Service's own port"
        );
        assert!(!routes.0.contains_key(&tcp("10.96.3.4:53")));
        assert_eq!(
            routes.0[&(Protocol::Tcp, API_SERVICE)].target,
            Target::Host(APISERVER.parse().unwrap())
        );
        let ips: Vec<Ipv4Addr> = routes.addresses().collect();
        assert_eq!(ips, [Ipv4Addr::new(10, 96, 0, 1)], "only the proxied ones");
    }

    #[test]
    fn services_without_endpoints_or_clusterip() {
        let services = [
            service(
                "default",
                "empty",
                json!({"clusterIP": "10.96.3.5", "ports": [{"port": 80, "targetPort": "http"}]}),
            ),
            service(
                "default",
                "headless",
                json!({"clusterIP": "None", "ports": [{"port": 80}]}),
            ),
            service(
                "kube-system",
                "kube-dns",
                json!({"clusterIP": "10.96.0.10", "ports": [{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}),
            ),
            service(
                "default",
                "kubernetes",
                json!({"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}),
            ),
        ];
        // A slice without ports cannot resolve a named targetPort: rejected, as kube-proxy does.
        let slices = [slice(
            "default",
            "empty",
            json!([]),
            &[("10.244.0.5", Some(true), None)],
        )];
        let routes = Routes::build(&services, &slices, APISERVER.parse().unwrap());
        assert_eq!(
            routes.0[&tcp("10.96.3.5:80")].target,
            Target::Endpoints(vec![])
        );
        assert_eq!(routes.0.len(), 2, "{routes:?}");
        assert_eq!(
            routes.0[&(Protocol::Tcp, API_SERVICE)].target,
            Target::Host(APISERVER.parse().unwrap())
        );
    }
}
